"""Compile options for the user-facing tests (the e2e/ tests that compile programs and
models), and the `compiled` shorthand and small function the test_compile_* files share.

Knobs to isolate a failing layer: FUSEGRAD_TEST_EXECUTOR=reference runs the dg
IR in the reference interpreter, FUSEGRAD_TEST_FUSION=0 skips dg-fuse.
"""
import os

import torch

import fusegrad
from fusegrad.program import CompileOptions

OPTIONS = {"executor": os.environ.get("FUSEGRAD_TEST_EXECUTOR", "cpu"),
           "fusion": os.environ.get("FUSEGRAD_TEST_FUSION", "1") == "1"}
COMPILE_OPTIONS = CompileOptions(**OPTIONS)


def compiled(fn, **kw):
    """`fusegrad.compile` with the test options."""
    return fusegrad.compile(fn, **OPTIONS, **kw)


def f_pointwise(x, y):
    return torch.tanh(x) * y + torch.exp(-y).sum(dim=1, keepdim=True)

"""Compile options for the user-facing tests (test_compile/models/training/functional).

Knobs to isolate a failing layer: FUSEGRAD_TEST_EXECUTOR=reference runs the dg
IR in the reference interpreter, FUSEGRAD_TEST_FUSION=0 skips dg-fuse.
"""
import os

from fusegrad.program import CompileOptions

OPTIONS = {"executor": os.environ.get("FUSEGRAD_TEST_EXECUTOR", "cpu"),
           "fusion": os.environ.get("FUSEGRAD_TEST_FUSION", "1") == "1"}
COMPILE_OPTIONS = CompileOptions(**OPTIONS)

"""Rounding error of compiled reductions against eager's (issue 47): the bound, the inputs
and the cases the CPU (e2e/test_numerics.py) and CUDA (cuda/test_cuda_numerics.py)
tests share.

Each case runs in float32 eagerly and compiled, and in float64 eagerly as the
reference; the compiled result's relative error (the norm of its difference from the
reference over the reference's norm), and its gradients', must be at most BOUND times
eager's own, or below FLOOR (a single value whose eager result happened to round right:
its error is a fraction of an ulp). Inputs are offset (values in [10, 11), a mean of
1000 with unit deviation) so that a sum rounds at every step and a variance or a
normalization cancels.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

F = torch.nn.functional
BOUND = 2.0
FLOOR = 1e-7


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want||, in float64."""
    return ((got.double() - want).norm() / want.norm()).item()


def uniform(*shape: int, low: float = 10.0):
    return lambda g: torch.rand(*shape, generator=g) + low


def normal(*shape: int, mean: float = 0.0, std: float = 1.0):
    return lambda g: torch.randn(*shape, generator=g) * std + mean


def ramp(*shape: int, step: float):
    """0, step, 2 step, ... in row-major order: along rows, a running maximum that changes
    at every element (step > 0) or never (step < 0)."""
    return lambda g: (torch.arange(math.prod(shape), dtype=torch.float64) * step).float() \
        .reshape(shape)


@dataclass
class Case:
    name: str
    fn: Callable
    inputs: list  # per input, a function of a torch.Generator
    grad: bool = False  # also the gradients of the floating inputs (a random cotangent)
    dynamic: bool = False  # compiled for every size

    def __str__(self) -> str:
        return self.name


def results(fn: Callable, inputs: list, grad: bool) -> list:
    """fn's output, and with `grad` the gradients of its floating inputs for a fixed
    random cotangent."""
    inputs = [x.detach().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    out = fn(*inputs)
    if not grad:
        return [out.detach()]
    wrt = [x for x in inputs if x.requires_grad]
    return [out.detach(), *torch.autograd.grad(out, wrt, cotangent(out))]


def cotangent(out: torch.Tensor) -> torch.Tensor:
    """The fixed random cotangent of `out` the gradients are taken for."""
    return torch.randn(out.shape, generator=torch.Generator().manual_seed(1),
                       dtype=torch.float64).to(out.dtype)


def _labels(g: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 1000, (4096,), generator=g)


def _conv_batch_norm(x, w, gamma, beta):
    """A batch norm of a convolution's output: compiled channels-last (dg-channels-last),
    its statistics are sums over N*H*W rows of 16 channels."""
    y = F.conv2d(x, w, padding=1) + 300
    return F.batch_norm(y, None, None, gamma, beta, training=True)


# the table of issue 47
ISSUE_TABLE = [
    Case("sum of 4M values in [10, 11)", lambda x: x.sum(), [uniform(1 << 22)]),
    Case("row sums, 64 rows of 4096", lambda x: x.sum(1), [uniform(64, 4096)]),
    Case("var over rows of 4096, mean 1000", lambda x: x.var(1), [normal(256, 4096, mean=1000)]),
    Case("layer_norm over rows of 4096, mean 1000",
         lambda x: F.layer_norm(x, (4096,)), [normal(64, 4096, mean=1000)]),
    Case("batch_norm (training) 64x16x32x32, mean 300",
         lambda x: F.batch_norm(x, None, None, training=True), [normal(64, 16, 32, 32, mean=300)]),
]

CASES = ISSUE_TABLE + [
    # a count that is no power of two (a division by a constant)
    Case("std over rows of 768, mean 1000", lambda x: x.std(1), [normal(256, 768, mean=1000)]),
    # sums over rows: per-block partials; many rows; inline; a middle dim; everything
    Case("column sums, 4096 rows of 1024", lambda x: x.sum(0), [uniform(4096, 1024)]),
    Case("column sums, 65536 rows of 16", lambda x: x.sum(0), [uniform(65536, 16)]),
    Case("column sums, 512 rows of 64", lambda x: x.sum(0), [uniform(512, 64)]),
    Case("mean over the middle dim of 32x512x64", lambda x: x.mean(1), [uniform(32, 512, 64)]),
    Case("sum of 4096x1024", lambda x: x.sum(), [uniform(4096, 1024)]),
    Case("softmax over rows of 4096", lambda x: x.softmax(-1), [normal(256, 4096)]),
    Case("norm over rows of 4096", lambda x: x.norm(dim=1), [normal(256, 4096)]),
    Case("mse_loss 256x1024", F.mse_loss, [normal(256, 1024), normal(256, 1024)]),
    Case("cross_entropy 4096x1000", F.cross_entropy, [normal(4096, 1000), _labels]),
    # backwards
    Case("layer_norm forward and backward, mean 100",
         lambda x, w, b: F.layer_norm(x, (1024,), w, b),
         [normal(1024, 1024, mean=100), normal(1024), normal(1024)], grad=True),
    Case("batch_norm forward and backward, mean 300",
         lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
         [normal(64, 16, 32, 32, mean=300), normal(16), normal(16)], grad=True),
    Case("batch_norm after a convolution (NHWC), forward and backward, mean 300",
         _conv_batch_norm, [normal(64, 16, 32, 32), normal(16, 16, 3, 3), normal(16), normal(16)],
         grad=True),
    Case("softmax forward and backward", lambda x: x.softmax(-1), [normal(256, 1024)],
         grad=True),
    Case("linear's bias gradient over 4096 rows", F.linear,
         [normal(4096, 256), normal(1024, 256), normal(1024)], grad=True),
    # scans: f32 log-sum-exps accumulate in f64 as eager's (in f32 they erred 1.2e-6 over
    # 32000 elements, eager 2.4e-8), and so do the two in logcumsumexp's backward
    Case("logcumsumexp along rows of 32000, forward and backward",
         lambda x: torch.logcumsumexp(x, 1), [normal(4, 32000, std=3)], grad=True),
    Case("logcumsumexp along rows of 32000 rising by 1e-3, forward and backward",
         lambda x: torch.logcumsumexp(x, 1), [ramp(4, 32000, step=1e-3)], grad=True),
    Case("logcumsumexp along rows of 32000 falling by 1e-3, forward and backward",
         lambda x: torch.logcumsumexp(x, 1), [ramp(4, 32000, step=-1e-3)], grad=True),
    Case("logcumsumexp along columns of 1024x1024, forward and backward",
         lambda x: torch.logcumsumexp(x, 0), [normal(1024, 1024, std=3)], grad=True),
    Case("logcumsumexp along columns of 1024x1024 falling by 1e-3, forward and backward",
         lambda x: torch.logcumsumexp(x, 0), [ramp(1024, 1024, step=-1e-3)], grad=True),
    # one program for every size
    Case("row sums of run-time length", lambda x: x.sum(1), [uniform(64, 4096)], dynamic=True),
    Case("column sums over a run-time number of rows", lambda x: x.sum(0),
         [uniform(20000, 16)], dynamic=True),
]


def assert_within_eager(case: Case, run: Callable[[list], list]) -> None:
    """`run(inputs)`'s results (as `results` gives them: the output, then with
    `case.grad` the gradients) have at most BOUND times eager's relative error each, or
    less than FLOOR."""
    g = torch.Generator().manual_seed(0)
    inputs = [make(g) for make in case.inputs]
    want = results(case.fn, [x.double() if x.is_floating_point() else x for x in inputs],
                   case.grad)
    eager = results(case.fn, inputs, case.grad)
    got = run(inputs)
    assert len(got) == len(want), case
    for k, (g, e, w) in enumerate(zip(got, eager, want)):
        bound = max(BOUND * relative_error(e, w), FLOOR)
        error = relative_error(g, w)
        assert error <= bound, f"{case}: result {k} has relative error {error:.2e}, " \
                               f"eager's {relative_error(e, w):.2e}"

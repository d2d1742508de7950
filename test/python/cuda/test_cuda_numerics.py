"""Rounding error of reductions compiled for CUDA, run in the kernel emulator (issue 47;
CUDA.md, "Accuracy of sums").

The cases and the bound of e2e/test_numerics.py (reduction_errors.py: at most twice
eager's relative error against float64, gradients too), for programs compiled for
target cuda as `fusegrad.compile` would (dg-optimize-cuda, then the CUDA lowering) and
run in the emulator (cuda_emulator.py), which adds in the kernels' order and dtypes:
issue 47's table (row kernels, a full reduction, a block per output), a batch norm's
backward (a block per output, whose f32 tree made the weight gradient err 3.1x
eager's), one thread per output over a long reduction (serial: 3.8x eager's over 256
elements in f32), a logcumsumexp and its backward (a thread per row), and the same at
run-time sizes. What the emulator cannot show is the
hardware's own rounding (FMA contraction by ptxas).
"""
from __future__ import annotations

import pytest
import torch

from cuda_plans import compile_emulated
from reduction_errors import (CASES, ISSUE_TABLE, Case, assert_within_eager, cotangent, normal,
                              uniform)
from fusegrad.codegen.cuda.kernels import THREAD_PER_OUTPUT_MIN
from fusegrad.frontend.capture import Captured, capture
from fusegrad.frontend.dynamic_shapes import parse_dynamic_shapes
from fusegrad.frontend.torch_export import capture_dynamic
from fusegrad.program import CompileOptions, Program
from fusegrad.runtime.cuda import CudaProgram

_SHARED = {c.name: c for c in CASES}
# sums over the middle dim of (B, L, C): B*C outputs, one thread each
_OUTPUTS = THREAD_PER_OUTPUT_MIN // 4096

CUDA_CASES = ISSUE_TABLE + [
    _SHARED["batch_norm forward and backward, mean 300"],
    Case(f"sum over the middle dim of {_OUTPUTS}x256x4096 (a thread per output)",
         lambda x: x.sum(1), [uniform(_OUTPUTS, 256, 4096)]),
    # a scan, a thread per row, its running log-sum-exp f64 (in f32: 3.4e-6 against
    # eager's 2.3e-8)
    Case("logcumsumexp along rows of 4096, forward and backward",
         lambda x: torch.logcumsumexp(x, 1), [normal(4, 4096, std=3)], grad=True),
    # one program for every size
    _SHARED["row sums of run-time length"],
    _SHARED["column sums over a run-time number of rows"],
    # kernels weigh a run-time size as DEFAULT_SIZE_HINT (64): three kept dims as 64**3
    # outputs, a thread each
    Case("sum over dim 1 of 4x256x16x16, run-time sizes", lambda x: x.sum(1),
         [uniform(4, 256, 16, 16)], dynamic=True),
]


class _Function(torch.nn.Module):
    """A function of tensors as the module torch.export traces."""

    def __init__(self, fn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.fn(*inputs)


def _captured(case: Case, inputs: list) -> Captured:
    """`case.fn` traced at `inputs`, every dim of them a size of its own when
    `case.dynamic`."""
    if not case.dynamic:
        return capture(case.fn, inputs)
    spec = [{d: f"input{i}_dim{d}" for d in range(x.dim())} for i, x in enumerate(inputs)]
    captured, _, _ = capture_dynamic(_Function(case.fn), inputs,
                                     parse_dynamic_shapes(spec, inputs, None))
    return captured


def _emulated(case: Case, inputs: list) -> list:
    """`reduction_errors.results` of `case.fn` compiled for CUDA and run in the emulator:
    the output, and with `case.grad` the gradients of the floating inputs (@main_fwd,
    then @main_bwd on what it saved and the same cotangent)."""
    captured = _captured(case, inputs)
    assert not captured.lifted, case
    program = Program.from_graph(captured.gm, CompileOptions(target="cuda"))
    wrt = [i for i, x in enumerate(inputs) if x.is_floating_point()] if case.grad else []
    module, meta = program.training_module(wrt) if wrt else program.forward_module()
    plan, driver = compile_emulated(str(module))
    cuda = CudaProgram(plan, driver=driver, device="cpu", stream=lambda: 0, chip="sm_90")
    driver.know(cuda._index_flag())
    with driver.tracking(*inputs):
        if not wrt:
            return cuda.function("main")(*inputs)
        n = meta["num_outputs"]
        results = cuda.function("main_fwd")(*inputs)
        (out,), saved = results[:n], results[n:]
        ct = cotangent(out)
        with driver.tracking(ct):
            return [out, *cuda.function("main_bwd")(*saved, ct)]


@pytest.mark.parametrize("case", CUDA_CASES, ids=str)
def test_error_within_eager(case: Case):
    """The emulated result's error (and its gradients') is at most BOUND times eager's."""
    assert_within_eager(case, lambda inputs: _emulated(case, inputs))

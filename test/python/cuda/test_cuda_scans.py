"""dg.scan on the CUDA target without a GPU: one thread per line of the other dims,
serial along the scanned one. Every combiner, along rows and columns, both ways, with
NaN and infinities: the kernels assemble for sm_80 and sm_90, and run in the kernel
emulator (cuda_emulator.py) they match the reference interpreter. (Symbolic sizes: the
scan family of test_lowering in test_cuda_run_time_sizes.py.)"""
from __future__ import annotations

import math

import pytest
import torch
from mlir import ir
from mlir.dialects import func

from cuda_plans import check_images, compile_emulated, compile_plan, needs_ptxas
from fusegrad.context import make_context
from fusegrad.dialects import TensorSpec
from fusegrad.dialects.builder import Builder
from fusegrad.dialects.interpreter import run_function
from fusegrad.runtime.cuda import CudaProgram

COMBINERS = ("add", "mul", "max", "min", "logaddexp")


def _inputs(combiner: str) -> list[torch.Tensor]:
    x = torch.randn(5, 37, generator=torch.Generator().manual_seed(0))
    x[0, 3], x[1, 20], x[2, 17], x[4, 5], x[4, 30] = (math.nan, math.inf, -math.inf,
                                                      math.inf, -math.inf)
    x = 1 + x * 0.05 if combiner == "mul" else x
    cases = [x, x.t().contiguous().double()]
    if combiner != "logaddexp":
        cases.append(torch.randint(-3, 4, (33, 3), generator=torch.Generator().manual_seed(1)))
    return cases


def _module() -> tuple[str, list]:
    """One function per case: (name, input), scanning every dim of it both ways."""
    cases = []
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            for combiner in COMBINERS:
                for k, x in enumerate(_inputs(combiner)):
                    for dim in range(x.dim()):
                        for reverse in (0, 1):
                            name = f"{combiner}_{k}_{dim}_{reverse}"
                            func.FuncOp.from_py_func(TensorSpec.of(x).to_mlir(), name=name)(
                                lambda v, c=combiner, d=dim, r=reverse:
                                Builder().scan(v, dim=d, combiner=c, reverse=r))
                            cases.append((name, x))
        return str(module), cases


@needs_ptxas
def test_scan_kernels_assemble():
    text, _ = _module()
    check_images(compile_plan(text, "dg-verify", cubin=True))


def test_scans_match_the_reference_in_the_emulator():
    text, cases = _module()
    plan, drv = compile_emulated(text)
    prog = CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 0, chip="sm_90")
    drv.know(prog._index_flag())
    with make_context():
        module = ir.Module.parse(text)
        functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                     for op in module.body.operations}
        for name, x in cases:
            with drv.tracking(x):
                got = prog.function(name)(x)
            want = run_function(functions[name], [x])
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, equal_nan=True,
                                           msg=lambda m: f"{name}: {m}")

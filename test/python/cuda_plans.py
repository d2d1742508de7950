"""dg IR compiled to CUDA launch plans without a GPU, for the CUDA tests: `compile_plan`,
`compile_emulated` (a plan and a driver running its kernels in `cuda_emulator`),
`check_images` (PTX and cubins for sm_80 and sm_90), and `needs_ptxas` for the tests that
assemble cubins (where CI is set, a missing ptxas fails them instead of skipping)."""
from __future__ import annotations

import os

import pytest
from mlir import ir

from fusegrad.context import make_context
from fusegrad.codegen.cuda.compile import compile_cuda
from fusegrad.codegen.cuda.ptxas import find_ptxas
from fusegrad.pass_manager import run_pipeline
from fusegrad.pipelines import CUDA_ENTRIES, cuda_kernels_pipeline
from fusegrad.runtime.cuda import LaunchPlan

PTXAS = find_ptxas()
if PTXAS is None and os.environ.get("CI"):  # CI must assemble every kernel, not skip it
    pytest.fail("ptxas not found (CUDA toolkit, CUDA_HOME, or "
                "pip install nvidia-cuda-nvcc-cu12)", pytrace=False)
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="ptxas not found (CUDA toolkit, or "
                                 "pip install nvidia-cuda-nvcc-cu12)")


def compile_plan(text: str, pre: str, cubin: bool) -> LaunchPlan:
    """Parse `text`, run the passes `pre`, compile for CUDA."""
    with make_context():
        module = ir.Module.parse(text)
        run_pipeline(module, pre)
        return compile_cuda(module, cubin=cubin)


def launches(plan: LaunchPlan) -> list[dict]:
    """The plan's kernel launch steps, over all its functions."""
    return [s for f in plan.functions.values() for s in f.steps if s["op"] == "launch"]


def check_images(plan: LaunchPlan) -> None:
    """Every module has PTX for sm_80 and sm_90 defining its kernels, and a cubin each."""
    assert plan.modules
    for m in plan.modules.values():
        assert sorted(m.images) == ["sm_80", "sm_90"], m.name
        for chip, img in m.images.items():
            assert f".target {chip}".encode() in img.ptx
            for k in m.kernels:
                assert f".entry {k}(".encode() in img.ptx
            assert img.cubin is not None and img.cubin[:4] == b"\x7fELF", (m.name, chip)


def compile_emulated(text: str, pre: str = "dg-verify") -> tuple[LaunchPlan, "EmulatingDriver"]:
    """The launch plan of `text` (after the passes `pre`), and a driver that runs its
    kernels in the emulator (their code before NVVM, lowered again from `text`). Each
    image is tagged with its module's name, which the driver tells modules by: two
    kernels alike but for a bound their grid makes redundant have the same PTX."""
    from cuda_emulator import EmulatingDriver

    plan = compile_plan(text, pre, cubin=False)
    for m in plan.modules.values():
        for image in m.images.values():
            image.ptx += f"\n// module {m.name}\n".encode()
    with make_context():
        module = ir.Module.parse(text)
        run_pipeline(module, pre)
        run_pipeline(module, CUDA_ENTRIES)
        run_pipeline(module, cuda_kernels_pipeline())
    return plan, EmulatingDriver(module, plan)

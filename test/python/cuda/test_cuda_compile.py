"""The CUDA target without a GPU: every kernel compiles to PTX that ptxas accepts for
sm_80 and sm_90, plans survive save/load, and a compiled plan drives the (fake)
driver with the right launches. (Whole models' training graphs:
e2e/test_cuda_model_graphs.py.)"""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from cuda_fakes import FakeDriver
from cuda_plans import PTXAS, check_images, compile_plan, launches, needs_ptxas
from fusegrad.codegen.cuda.launch_plan import format_plan
from fusegrad.runtime.cuda import CudaProgram, LaunchPlan

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
_spec = importlib.util.spec_from_file_location(
    "cuda_kernels_bench", os.path.join(REPO, "benchmarks", "cuda_kernels.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

_MATH = ("atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "erfc", "exp2")


def _math_text(dtype: str) -> str:
    """Every libdevice-backed unary op in one chain, then atan2."""
    t = f"tensor<64x100x{dtype}>"
    lines = [f'  %{i + 1} = "dg.{op}"(%{i}) : ({t}) -> {t}' for i, op in enumerate(_MATH)]
    n = len(_MATH)
    return (f"func.func @math(%0: {t}) -> {t} {{\n" + "\n".join(lines)
            + f'\n  %r = "dg.atan2"(%{n}, %0) : ({t}, {t}) -> {t}\n  return %r : {t}\n}}')


def _scatter_text() -> str:
    """scatter_reduce's combines: f32 max and product, i32 min and sum."""
    f, i, n = "tensor<64x32xf32>", "tensor<64x32xi32>", "tensor<100x32x{}>"
    lines = [f'  %{r} = "dg.scatter_{op}"(%{x}, %i, %{s}) {{dim = 0 : i64}} : '
             f'({t}, {n.format("i64")}, {n.format(t[-4:-1])}) -> {t}'
             for r, op, x, s, t in (("a", "max", "x", "s", f), ("b", "mul", "x", "s", f),
                                    ("c", "min", "xi", "si", i), ("d", "add", "xi", "si", i))]
    return (f"func.func @f(%x: {f}, %i: {n.format('i64')}, %s: {n.format('f32')}, %xi: {i}, "
            f"%si: {n.format('i32')}) -> ({f}, {f}, {i}, {i}) {{\n" + "\n".join(lines)
            + f"\n  return %a, %b, %c, %d : {f}, {f}, {i}, {i}\n}}")


# name -> (dg text, passes first): pointwise, reductions of every kind, softmax,
# a matmul epilogue, a transpose, and a layer norm's joint forward+backward
PROGRAMS = {
    "ew": (bench.ew_text(256, 1000), "dg-fuse"),
    "softmax": (bench.softmax_text(64, 1000), "dg-fuse"),
    "softmax_small": (bench.softmax_text(4, 8), "dg-fuse"),
    "rowsum": (bench.rowsum_text(128, 1000), "dg-fuse"),
    "colsum": (bench.colsum_text(128, 1000), "dg-fuse"),
    "total": (bench.total_text(1024, 1024), "dg-fuse"),
    "mlp": (bench.mlp_text(64, 128, 256), "dg-fuse"),
    "transpose": (bench.transpose_text(), "dg-fuse"),
    "ln_vjp": (bench.ln_text(64, 512), "dg-autodiff{joint=true},dg-fuse"),
    # 16-bit floats: the block reductions go through f32 (shuffles move 32 bits)
    "softmax_f16": (bench.softmax_text(64, 1000).replace("f32", "f16"), "dg-fuse"),
    "rowsum_bf16": (bench.rowsum_text(128, 1000).replace("f32", "bf16"), "dg-fuse"),
    # libdevice's __nv_* functions, inlined into one fused kernel
    "math_f32": (_math_text("f32"), "dg-fuse"),
    "math_f64": (_math_text("f64"), "dg-fuse"),
    "scatter_combine": (_scatter_text(), "dg-fuse"),
    # integer and boolean combiners in block reductions (an i64 count, an "any" flag)
    "loss_count": (bench.loss_count_text(1000), "dg-fuse"),
    "any_rows": (bench.any_rows_text(64, 300), "dg-fuse"),
}


@needs_ptxas
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_kernels_assemble(name):
    text, pre = PROGRAMS[name]
    plan = compile_plan(text, pre, cubin=True)
    check_images(plan)
    steps = launches(plan)
    assert steps and all(s["block"][0] <= 1024 for s in steps)


def test_softmax_is_one_row_kernel_without_spills():
    plan = compile_plan(bench.softmax_text(64, 1000), "dg-fuse", cubin=False)
    (f,) = plan.functions.values()
    assert [s["op"] for s in f.steps] == ["launch"]
    assert f.steps[0]["grid"] == [64, 1, 1] and f.steps[0]["block"] == [128, 1, 1]
    ptx = plan.modules[f.steps[0]["module"]].images["sm_90"].ptx
    assert ptx.count(b"shfl.sync.bfly") >= 10 and b"bar.sync" in ptx
    if PTXAS is not None:
        from fusegrad.codegen.cuda.ptxas import ptxas
        _, report = ptxas(ptx, "sm_90", "softmax")
        assert "0 bytes spill stores" in report


def test_scatter_combines_are_atomic():
    """Integer sums and minima are atomic instructions; float maxima and products loop on
    a compare-and-swap of the element's bits (an f32 cmpxchg is invalid LLVM)."""
    plan = compile_plan(_scatter_text(), "dg-fuse", cubin=False)
    atoms = [[line.split()[0] for line in m.images["sm_90"].ptx.decode().splitlines()
              if line.strip().startswith("atom")] for m in plan.modules.values()]
    assert sorted(a for found in atoms for a in found) == [
        "atom.global.add.u32", "atom.global.min.s32", "atom.relaxed.gpu.cas.b32",
        "atom.relaxed.gpu.cas.b32"]


def test_compiled_plan_drives_the_driver(tmp_path):
    plan = compile_plan(bench.softmax_text(64, 1000), "dg-fuse", cubin=False)
    plan.save(tmp_path)
    back = LaunchPlan.load(tmp_path)
    assert format_plan(back) == format_plan(plan)
    drv = FakeDriver()
    prog = CudaProgram(back, driver=drv, device="cpu", stream=lambda: 7, chip="sm_90")
    x = torch.randn(64, 1000)
    (y,) = prog.run("softmax", x)
    (launch,) = drv.launches
    assert launch["grid"] == [64, 1, 1] and launch["block"] == [128, 1, 1]
    assert launch["params"] == [("ptr", x.data_ptr()), ("ptr", y.data_ptr())]
    # no cubin in this plan: the sm_90 PTX goes to the driver's JIT
    ((image, kind),) = drv.loaded
    assert kind == "ptx" and b".target sm_90" in image


@pytest.mark.parametrize("device_chip, chips", [("sm_90", ("sm_90",)), ("sm_80", ("sm_80",)),
                                                ("sm_86", ("sm_80", "sm_90")),
                                                (None, ("sm_80", "sm_90"))])
def test_programs_compiled_in_process_get_images_for_their_device(monkeypatch, device_chip,
                                                                   chips):
    """A program compiled in this process runs on the current device: it gets that chip's
    image alone where the pipeline names the chip (half the NVVM and ptxas work), every
    default chip otherwise (another chip JIT-compiles the newest PTX not above it) or
    without a device."""
    from fusegrad import program
    from fusegrad.runtime import cuda as cuda_runtime
    monkeypatch.setattr(torch.cuda, "is_available", lambda: device_chip is not None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(cuda_runtime, "device_chip", lambda device: device_chip)
    assert program._chips_to_build() == chips

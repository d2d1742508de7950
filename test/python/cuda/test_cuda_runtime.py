"""The CUDA runtime without a GPU: plans, serialisation, launches against a fake driver.

(That it imports without MLIR is unit/test_layering.py's check of the whole runtime.)
"""
from __future__ import annotations

import json

import pytest
import torch

from cuda_fakes import FakeDriver, FakeGraph, fake_capture
from fusegrad.runtime.abi import TensorSig
from fusegrad.runtime.cuda import (CudaError, CudaProgram, Image, KernelModule, LaunchPlan,
                                   PlanError, PlanFunction)


def _plan(steps: list[dict] | None = None) -> LaunchPlan:
    steps = steps if steps is not None else [
        {"op": "alloc", "buf": "t0", "shape": [4, 8], "dtype": "f32"},
        {"op": "alloc", "buf": "t2", "shape": [4, 2], "dtype": "f32"},
        {"op": "launch", "module": "m0", "kernel": "k", "grid": [4, 1, 1],
         "block": [32, 1, 1], "smem": 0,
         "args": [{"buf": "arg0"}, {"buf": "t0"}, {"scalar": 7, "type": "i64"}]},
        {"op": "view", "buf": "t1", "base": "t0", "offset": 8, "shape": [3, 8],
         "strides": [8, 1]},
        {"op": "copy", "src": "arg0", "dst": "arg2"},
        {"op": "matmul", "a": "arg0", "b": "arg1", "c": "t2", "overwrite": True},
        {"op": "free", "buf": "t0"},
    ]
    mods = {"m0": KernelModule("m0", ["k"], {
        "sm_80": Image("sm_80", ptx=b".version 7.0\n.target sm_80\n.entry k()\n{ ret; }\n"),
        "sm_90": Image("sm_90", ptx=b"ptx90", cubin=b"\x7fELFcubin90")})}
    f = PlanFunction("f", [TensorSig([4, 8], "f32"), TensorSig([8, 2], "f32")],
                     [TensorSig([4, 8], "f32")], steps)
    return LaunchPlan({"f": f}, mods)


def _program(plan: LaunchPlan, chip: str = "sm_90", fail: str | None = None):
    drv = FakeDriver(fail)
    return CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 1234, chip=chip), drv


def test_launch_steps_against_fake_driver():
    plan = _plan()
    prog, drv = _program(plan)
    x, w = torch.randn(4, 8), torch.randn(8, 2)
    (y,) = prog.run("f", x, w)
    # the cubin of the device's chip is preferred over PTX
    assert drv.loaded == [(b"\x7fELFcubin90", "cubin")]
    (launch,) = drv.launches
    assert launch["grid"] == [4, 1, 1] and launch["block"] == [32, 1, 1]
    assert launch["stream"] == 1234 and launch["function"][1] == "k"
    kinds = [p[0] for p in launch["params"]]
    assert kinds == ["ptr", "ptr", "i64"]
    assert launch["params"][0][1] == x.data_ptr() and launch["params"][2][1] == 7
    torch.testing.assert_close(y, x)  # the copy step
    # modules are loaded once across calls
    prog.run("f", x, w)
    assert len(drv.loaded) == 1 and len(drv.launches) == 2
    prog.close()
    assert drv.unloaded == [("mod", 1)]


def test_ptx_fallback_for_newer_chip_and_missing_chip():
    prog, drv = _program(_plan(), chip="sm_100")
    prog._function("m0", "k", "test")
    # no sm_100 cubin: the PTX of the newest chip not above it, JIT-compiled by the driver
    assert drv.loaded == [(b"ptx90", "ptx")]
    prog, _ = _program(_plan(), chip="sm_75")
    with pytest.raises(PlanError, match="no image for sm_75"):
        prog._function("m0", "k", "test")


@pytest.mark.parametrize("fail,call", [("load", "cuModuleLoadData"),
                                       ("get", "cuModuleGetFunction"),
                                       ("launch", "cuLaunchKernel")])
def test_driver_errors_name_the_kernel(fail, call):
    plan = _plan()
    plan.functions["f"].steps = plan.functions["f"].steps[:3]
    prog, _ = _program(plan, fail=fail)
    with pytest.raises(CudaError, match=rf"{call} failed for kernel.*'k'.*@f step 2"):
        prog.run("f", torch.randn(4, 8), torch.randn(8, 2))


def test_inputs_are_checked():
    prog, _ = _program(_plan())
    with pytest.raises(PlanError, match=r"@f input 0: expected \(4, 8\) torch.float32"):
        prog.run("f", torch.randn(4, 7), torch.randn(8, 2))
    with pytest.raises(PlanError, match="takes 2 inputs"):
        prog.run("f", torch.randn(4, 8))
    with pytest.raises(PlanError, match="no function @g"):
        prog.function("g")


def test_plan_validation():
    bad = _plan([{"op": "free", "buf": "t9"}])
    with pytest.raises(PlanError, match="'t9' used before it is defined"):
        bad.validate()
    with pytest.raises(PlanError, match="'t0' used before it is defined"):
        _plan([{"op": "alloc", "buf": "t0", "shape": [1], "dtype": "f32"},
               {"op": "free", "buf": "t0"}, {"op": "free", "buf": "t0"}]).validate()
    with pytest.raises(PlanError, match="unknown step op"):
        _plan([{"op": "jump"}]).validate()
    with pytest.raises(PlanError, match="no kernel 'nope'"):
        _plan([{"op": "launch", "module": "m0", "kernel": "nope", "grid": [1, 1, 1],
                "block": [1, 1, 1], "smem": 0, "args": []}]).validate()


def test_save_and_load_roundtrip(tmp_path):
    plan = _plan()
    plan.save(tmp_path)
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["format"] == "fusegrad-cuda-plan"
    assert data["modules"]["m0"]["images"]["sm_90"] == {"ptx": "m0.sm_90.ptx",
                                                        "cubin": "m0.sm_90.cubin"}
    back = LaunchPlan.load(tmp_path)
    assert back.functions["f"].steps == plan.functions["f"].steps
    assert back.modules["m0"].images["sm_90"].cubin == b"\x7fELFcubin90"
    (tmp_path / "m0.sm_90.cubin").unlink()
    with pytest.raises(PlanError, match="missing image m0.sm_90.cubin"):
        LaunchPlan.load(tmp_path)


def _flagged_plan() -> LaunchPlan:
    plan = _plan([{"op": "index_flag", "buf": "t0"},
                  {"op": "launch", "module": "m0", "kernel": "k", "grid": [1, 1, 1],
                   "block": [32, 1, 1], "smem": 0, "args": [{"buf": "arg0"}, {"buf": "t0"}]},
                  {"op": "copy", "src": "arg0", "dst": "arg2"}])
    plan.index_sites = ["dg.gather at model.py:3:4", "dg.index_select at model.py:9:1"]
    return plan


def test_index_flag_is_one_buffer_and_errors_surface_on_the_next_call():
    from fusegrad.runtime.cpu import OutOfRangeIndex

    prog, drv = _program(_flagged_plan())
    x, w = torch.randn(4, 8), torch.randn(8, 2)
    prog.run("f", x, w)
    prog.run("f", x, w)
    flags = {launch["params"][1][1] for launch in drv.launches}
    assert flags == {prog._flag.data_ptr()} and prog._flag.dtype == torch.int32
    prog._flag.fill_(2)  # what a kernel gathering out of range at site 2 stores
    with pytest.raises(OutOfRangeIndex, match="dg.index_select at model.py:9:1"):
        prog.run("f", x, w)
    assert int(prog._flag) == 0  # reported once, then cleared
    prog.run("f", x, w)


def test_index_sites_survive_save_and_load(tmp_path):
    plan = _flagged_plan()
    plan.save(tmp_path)
    assert LaunchPlan.load(tmp_path).index_sites == plan.index_sites
    plan.index_sites = []
    with pytest.raises(PlanError, match="index flag, but the plan has no index sites"):
        plan.validate()


def test_constants_are_uploaded_once_and_survive_save_and_load(tmp_path):
    from fusegrad.runtime.cuda import Constant

    plan = _plan([{"op": "constant", "buf": "t0", "name": "c"},
                  {"op": "launch", "module": "m0", "kernel": "k", "grid": [1, 1, 1],
                   "block": [32, 1, 1], "smem": 0, "args": [{"buf": "t0"}, {"buf": "arg2"}]}])
    want = torch.tensor([[1.5, -2.0], [3.0, 4.25]])
    plan.constants = {"c": Constant([2, 2], "f32", want.numpy().tobytes())}
    plan.save(tmp_path)
    loaded = LaunchPlan.load(tmp_path)
    assert loaded.constants["c"].data == plan.constants["c"].data
    prog, drv = _program(loaded)
    x, w = torch.randn(4, 8), torch.randn(8, 2)
    prog.run("f", x, w)
    prog.run("f", x, w)
    uploaded = prog._constants["c"]
    torch.testing.assert_close(uploaded, want)
    assert {launch["params"][0][1] for launch in drv.launches} == {uploaded.data_ptr()}
    loaded.constants = {}
    with pytest.raises(PlanError, match="no constant 'c' in the plan"):
        loaded.validate()


def test_conv2d_grad_steps_match_autograd():
    """The library steps run through torch on the plan's device (here the CPU)."""
    x = torch.randn(2, 4, 9, 7, requires_grad=True)
    w = torch.randn(6, 2, 3, 2, requires_grad=True)
    y = torch.nn.functional.conv2d(x, w, stride=2, padding=1, groups=2)
    g = torch.randn_like(y)
    y.backward(g)
    attrs = {"stride": [2, 2], "padding": [1, 1], "dilation": [1, 1], "groups": 2}
    steps = [{"op": "conv2d_grad", "grad": "arg0", "input": None, "weight": "arg1",
              "out": "arg3", **attrs},
             {"op": "conv2d_grad", "grad": "arg0", "input": "arg2", "weight": None,
              "out": "arg4", **attrs}]
    sig = lambda t: TensorSig(list(t.shape), "f32")  # noqa: E731
    f = PlanFunction("f", [sig(g), sig(w), sig(x)], [sig(x), sig(w)], steps)
    prog, _ = _program(LaunchPlan({"f": f}, {}))
    dx, dw = prog.run("f", g, w.detach(), x.detach())
    torch.testing.assert_close(dx, x.grad)
    torch.testing.assert_close(dw, w.grad)


def test_cuda_graph_reads_stable_inputs_in_place_and_copies_the_rest(monkeypatch):
    """The bookkeeping of `GraphedFunction`: plain first call, capture on the second,
    inputs at a stable address read in place, the others copied in, a moved input
    captured again and copied from then on, fresh outputs every call."""
    from fusegrad.runtime.cuda import PlanError
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", fake_capture)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(FakeGraph, "captures", 0)
    prog, _ = _program(_plan())
    prog.graphs = True
    f = prog.function("f")
    x, w = torch.randn(4, 8), torch.randn(8, 2)  # w plays a parameter: same tensor each call
    f(x, w)
    (g,) = f.graphs.values()  # a static function: one binding of its (no) sizes
    assert FakeGraph.captures == 0 and g.graph is None
    f(torch.randn(4, 8), w)
    assert FakeGraph.captures == 1 and g.copied == {0}
    assert g.inputs[1].data_ptr() == w.data_ptr()  # read in place
    x3 = torch.randn(4, 8)
    (y,) = f(x3, w)
    assert FakeGraph.captures == 1 and g.graph.replays == 2
    torch.testing.assert_close(g.inputs[0], x3)  # copied in
    assert g.inputs[0].data_ptr() != x3.data_ptr()
    assert y is not g.outputs[0] and y.data_ptr() != g.outputs[0].data_ptr()
    f(torch.randn(4, 8), w.clone())  # the parameter moved: capture again, copy it
    assert FakeGraph.captures == 2 and g.copied == {0, 1}
    with pytest.raises(PlanError, match="@f input 1: expected a tensor"):
        f(x, 3.0)


def test_forwarded_outputs_are_the_inputs_and_survive_save_and_load(tmp_path, monkeypatch):
    """An output the plan forwards from an input (a forward saving a parameter for its
    backward) is that input, never a copy, plain or replayed from a graph; the function's
    out-params are the outputs it computes."""
    plan = _plan([{"op": "copy", "src": "arg0", "dst": "arg2"}])
    f = plan.functions["f"]
    f.outputs = [TensorSig([4, 8], "f32"), TensorSig([8, 2], "f32")]
    f.forwarded = {1: 1}
    plan.validate()
    plan.save(tmp_path)
    back = LaunchPlan.load(tmp_path)
    assert back.functions["f"].forwarded == {1: 1}
    prog, _ = _program(back)
    x, w = torch.randn(4, 8), torch.randn(8, 2)
    y, saved = prog.function("f")(x, w)
    assert saved is w and prog.function("f").returns_arguments
    torch.testing.assert_close(y, x)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", fake_capture)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    prog.graphs = True
    g = prog.function("f")
    for _ in range(3):
        y, saved = g(torch.randn(4, 8), w)
        assert saved is w
    f.forwarded = {1: 0}  # shapes differ: refused
    with pytest.raises(PlanError, match="output 1 cannot be input 0"):
        plan.validate()


def test_auto_graphs_replay_small_functions_on_cuda_only():
    """graphs="auto": a function replays from a CUDA graph when its temporaries at their
    peak plus its outputs fit AUTO_GRAPH_MAX_BYTES, and only on a CUDA device."""
    from fusegrad.runtime.cuda import AUTO_GRAPH_MAX_BYTES
    plan = _plan()
    # t0 (4x8) and t2 (4x2) live together: 160 bytes; the output 4x8: 128
    assert plan.functions["f"].footprint() == 160 + 128
    on_cuda = CudaProgram(plan, driver=FakeDriver(), device="cuda", stream=lambda: 0,
                          chip="sm_90", graphs="auto")
    assert on_cuda.replays("f")
    rows = AUTO_GRAPH_MAX_BYTES // (8 * 4) + 1
    big = _plan([{"op": "alloc", "buf": "t0", "shape": [rows, 8], "dtype": "f32"},
                 {"op": "free", "buf": "t0"},
                 {"op": "alloc", "buf": "t1", "shape": [rows, 8], "dtype": "f32"},
                 {"op": "free", "buf": "t1"}])
    assert big.functions["f"].footprint() == rows * 32 + 128  # freed before the next
    assert not CudaProgram(big, driver=FakeDriver(), device="cuda", stream=lambda: 0,
                           chip="sm_90", graphs="auto").replays("f")
    prog, _ = _program(plan)
    prog.graphs = "auto"
    assert not prog.replays("f")  # a fake device: plain calls
    with pytest.raises(ValueError, match="graphs='yes' is not one of"):
        CudaProgram(plan, driver=FakeDriver(), device="cpu", graphs="yes")


def _ints(*shape):
    """bf16 matrices of small integers: every product below is exact."""
    return torch.randint(-3, 4, shape).to(torch.bfloat16)


@pytest.mark.parametrize("overwrite", [True, False], ids=["mm", "addmm"])
def test_misaligned_16_bit_products_run_on_row_aligned_copies(monkeypatch, overwrite):
    """A large 16-bit product whose rows do not start on 16-byte boundaries (GPT-2's
    vocabulary of 50257: cuBLAS's align1 kernels) computes on copies with padded row
    strides and the same values: rows of 37 elements everywhere, the left operand a
    transposed view (columns contiguous)."""
    from fusegrad.runtime import cuda as cuda_runtime
    monkeypatch.setattr(cuda_runtime, "_ALIGN_MIN_WORK", 1)
    seen = []
    mm = torch.mm
    monkeypatch.setattr(torch, "mm", lambda a, b, out: (seen.extend((a, b, out)),
                                                        mm(a, b, out=out))[1])
    a, b = _ints(16, 37).t(), _ints(16, 37)  # a: [37, 16], columns of 37 contiguous
    c = _ints(37, 37)
    want = a.float() @ b.float() + (0 if overwrite else c.float())
    cuda_runtime._matmul(a, b, c, overwrite)
    assert torch.equal(c.float(), want)
    if overwrite:
        assert all(cuda_runtime._rows_aligned(x) for x in seen)
        assert [x.stride() for x in seen] == [(1, 40), (40, 1), (40, 1)]


def test_aligned_or_small_products_run_in_place(monkeypatch):
    """Aligned rows, or a product below the size where the copies pay, run unchanged."""
    from fusegrad.runtime import cuda as cuda_runtime
    seen = []
    mm = torch.mm
    monkeypatch.setattr(torch, "mm", lambda a, b, out: (seen.append(out), mm(a, b, out=out))[1])
    c = _ints(16, 37)
    cuda_runtime._matmul(_ints(16, 37), _ints(37, 37), c, True)  # small
    monkeypatch.setattr(cuda_runtime, "_ALIGN_MIN_WORK", 1)
    d = _ints(16, 40)
    cuda_runtime._matmul(_ints(16, 32), _ints(32, 40), d, True)  # aligned
    assert seen[0] is c and seen[1] is d

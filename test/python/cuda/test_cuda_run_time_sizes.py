"""The CUDA target's run-time sizes without a GPU: a program of symbolic sizes compiles
once into kernels ptxas accepts for sm_80 and sm_90, and its one plan launches at every
shape with that shape's grids, allocations and size arguments. Run in the kernel
emulator (cuda_emulator.py) such programs, and every op family of test_lowering with
its sizes symbolic, match the reference interpreter at several sizes; CUDA graphs are
kept per binding of the sizes. (Whole models' symbolic training graphs:
e2e/test_cuda_model_graphs.py; against eager on a GPU: test_cuda_gpu.py.)"""
from __future__ import annotations

import pytest
import torch
from mlir import ir

from cuda_fakes import FakeDriver, FakeGraph, fake_capture
from cuda_plans import check_images, compile_emulated, compile_plan, launches, needs_ptxas
from run_time_size_programs import EMULATED, PROGRAMS, inputs_at, reference
from fusegrad.context import make_context
from fusegrad.runtime.cuda import CudaProgram, LaunchPlan, PlanError
from fusegrad.runtime.cuda_graphs import MAX_GRAPHS
from unit.test_lowering import FAMILIES, assert_runs_match, symbolic_cases

@needs_ptxas
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_symbolic_program_kernels_assemble(name):
    text, pre = PROGRAMS[name]
    plan = compile_plan(text, pre, cubin=True)
    check_images(plan)
    assert all(f.symbolic for f in plan.functions.values())
    steps = launches(plan)
    # sizes reach the kernels as arguments, or their grids
    assert any(isinstance(g, str) for s in steps for g in s["grid"]) or \
        any("size" in a for s in steps for a in s["args"])


def test_one_plan_launches_every_shape():
    """A softmax over rows of run-time count and length: one kernel, one block per row of
    RUN_TIME_ROW_THREADS threads, taking the row length and count as i64 arguments; a
    pointwise kernel over run-time rows splits them over blockIdx.y and z past 65535."""
    plan = compile_plan(*PROGRAMS["softmax_scores"], cubin=False)
    drv = FakeDriver()
    prog = CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 0, chip="sm_90")
    for rows, length in ((3, 50), (37, 1000)):
        x = torch.randn(rows, length)
        (y,) = prog.function("softmax")(x)
        assert y.shape == (rows, length)
        launch = drv.launches[-1]
        assert launch["grid"] == [rows, 1, 1] and launch["block"] == [256, 1, 1]
        sizes = [v for kind, v in launch["params"] if kind == "i64"]
        pointers = [v for kind, v in launch["params"] if kind == "ptr"]
        assert sorted(sizes) == sorted([rows, length]) and pointers == [x.data_ptr(),
                                                                        y.data_ptr()]
    assert len(drv.launches) == 2 and len(drv.loaded) == 1

    plan = compile_plan(*PROGRAMS["ew_rows"], cubin=False)
    drv = FakeDriver()
    prog = CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 0, chip="sm_90")
    for rows, grid in ((3, [4, 3, 1]), (70000, [4, 65535, 2])):
        xs = [torch.randn(rows, 1000) for _ in range(3)]
        (y,) = prog.function("ew")(*xs)
        assert y.shape == (rows, 1000) and drv.launches[-1]["grid"] == grid


def test_symbolic_plan_survives_save_and_load(tmp_path):
    plan = compile_plan(*PROGRAMS["total"], cubin=False)
    plan.save(tmp_path)
    back = LaunchPlan.load(tmp_path)
    assert back.functions["total"].steps == plan.functions["total"].steps
    assert back.functions["total"].inputs == plan.functions["total"].inputs
    (launch, _) = [s for s in back.functions["total"].steps if s["op"] == "launch"]
    assert all(isinstance(g, (int, str)) for g in launch["grid"])


def test_inputs_that_do_not_fit_name_the_dim():
    plan = compile_plan(*PROGRAMS["ew_rows"], cubin=False)
    prog = CudaProgram(plan, driver=FakeDriver(), device="cpu", stream=lambda: 0, chip="sm_90")
    a = torch.randn(5, 1000)
    with pytest.raises(PlanError, match=r"@ew input 1: dim 0 has size 6, expected s0 = 5"):
        prog.run("ew", a, torch.randn(6, 1000), a)
    with pytest.raises(PlanError, match=r"@ew input 2: dim 1 has size 999, expected 1000"):
        prog.run("ew", a, a, torch.randn(5, 999))
    with pytest.raises(PlanError, match=r"@ew input 0: expected tensor<\?x1000xf32"):
        prog.run("ew", torch.randn(5), a, a)


def test_a_size_no_input_shows_comes_from_the_caller():
    """A backward whose cotangent is a scalar takes the forward's sizes (`sizes=`, what
    autograd.CompiledFunction passes from the forward's `sizes_of`): dg-size-arguments
    makes the size an argument, and the plan evaluates allocations and grids from it."""
    t = 'tensor<?x4xf32, "s0">'
    text = f'''func.func @bwd(%ct: tensor<f32>) -> {t} {{
      %0 = "dg.broadcast_in_dim"(%ct) {{dims = array<i64>}} : (tensor<f32>) -> {t}
      return %0 : {t}
    }}'''
    plan, drv = compile_emulated(text)
    prog = CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 0, chip="sm_90")
    bwd = prog.function("bwd")
    ct = torch.tensor(2.5)
    with drv.tracking(ct):
        (dx,) = bwd(ct, sizes={"s0": 6})
    torch.testing.assert_close(dx, torch.full((6, 4), 2.5))
    with pytest.raises(PlanError, match="no input shows size s0"):
        bwd(ct)


@pytest.mark.parametrize("name", sorted(EMULATED))
def test_symbolic_program_matches_the_reference_in_the_emulator(name):
    """One compile, run at three shapes (one row, rows and lengths that are no multiple
    of a block), against the reference interpreter."""
    fname, _ = EMULATED[name]
    plan, drv = compile_emulated(*PROGRAMS[name])
    prog = CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 0, chip="sm_90")
    drv.know(prog._index_flag())
    for rows, cols in ((1, 3), (37, 300), (70, 1030)):
        inputs = inputs_at(name, rows, cols)
        with drv.tracking(*inputs):
            got = prog.function(fname)(*inputs)
        want = reference(name, inputs)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4,
                                       msg=lambda m: f"{name} at {rows}x{cols}: {m}")


def _not_emulated(case) -> str | None:
    """Why a test_lowering case is left out here, or None."""
    ints = not case.args[0].is_floating_point()  # (a scatter's indices are integers)
    if case.op == "pow" and ints:
        return "math.ipowi has no NVVM lowering (static shapes too)"
    if case.op == "div" and ints:
        return "integer division by zero (in the cases) is undefined on the GPU"
    if case.op == "scatter_add" and any(t.dtype == torch.bool for t in case.args):
        return "a boolean scatter-add stays a host loop (static shapes too)"
    return None


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "source_random"])
def test_op_family_with_run_time_sizes_matches_the_reference(family):
    """test_lowering's cases of `family` with their sizes symbolic (as its own symbolic
    test builds them) compile once for CUDA, and run in the emulator match the reference
    at their sizes, and float cases also at sizes one larger."""
    with make_context(), ir.Location.unknown():
        module, built = symbolic_cases(family, skip=_not_emulated)
        text = str(module)
    plan, drv = compile_emulated(text)
    prog = CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 0, chip="sm_90")
    drv.know(prog._index_flag())
    for name, case, runs in built:
        assert plan.functions[name].symbolic

        def call(*inputs, name=name):
            with drv.tracking(*inputs):
                return prog.function(name)(*inputs)
        assert_runs_match(call, case, runs, " on CUDA")


def test_cuda_graphs_are_kept_per_binding_of_the_sizes(monkeypatch):
    """Each shape runs plainly first and is captured at its second call, into a graph of
    its own that its later calls replay; past MAX_GRAPHS shapes, calls run plainly."""
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", fake_capture)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(FakeGraph, "captures", 0)
    plan = compile_plan(*PROGRAMS["softmax_scores"], cubin=False)
    drv = FakeDriver()
    prog = CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 0, chip="sm_90",
                       graphs=True)
    f = prog.function("softmax")
    a, b = torch.randn(3, 50), torch.randn(5, 70)
    for x in (a, a, b, b, a, b):
        (y,) = f(x)
        assert y.shape == x.shape
    assert FakeGraph.captures == 2 and sorted(f.graphs) == [(3, 50), (5, 70)]
    assert f.graphs[(3, 50)].graph.replays == 2 and f.graphs[(5, 70)].graph.replays == 2
    for rows in range(10, 10 + MAX_GRAPHS):
        for _ in range(2):
            f(torch.randn(rows, 8))
    assert len(f.graphs) == MAX_GRAPHS and FakeGraph.captures == MAX_GRAPHS
    assert (10 + MAX_GRAPHS - 1, 8) not in f.graphs  # past the cap: plain calls

"""dg-cpu-kernels on run-time sizes: fused programs with symbolic sizes compiled once
(forward and backward) match eager at several sizes, including sizes that are not
multiples of a vector, one row, and a size large enough to run the threaded launchers;
and their kernels are row-fused, threaded kernels, not convert-linalg-to-loops' nests."""
from __future__ import annotations

import re

import pytest
import torch
from mlir import ir

from fusegrad.autograd_function import run_program
from fusegrad.context import make_context
from fusegrad.program import CompileOptions, Program


def _softmax(t: str, r: str, dims: str) -> str:
    """sum(softmax(x)**2) over the last dim of `t` (reduced type `r`, kept dims `dims`)."""
    return f'''func.func @main(%x: {t}) -> tensor<f32> {{
  %m = "dg.reduce_max"(%x) {{dims = array<i64: {_last(t)}>}} : ({t}) -> {r}
  %mb = "dg.broadcast_in_dim"(%m) {{dims = array<i64: {dims}>}} : ({r}) -> {t}
  %d = "dg.sub"(%x, %mb) : ({t}, {t}) -> {t}
  %e = "dg.exp"(%d) : ({t}) -> {t}
  %s = "dg.reduce_sum"(%e) {{dims = array<i64: {_last(t)}>}} : ({t}) -> {r}
  %sb = "dg.broadcast_in_dim"(%s) {{dims = array<i64: {dims}>}} : ({r}) -> {t}
  %y = "dg.div"(%e, %sb) : ({t}, {t}) -> {t}
  %yy = "dg.mul"(%y, %y) : ({t}, {t}) -> {t}
  %o = "dg.reduce_sum"(%yy) {{dims = array<i64: {_all(t)}>}} : ({t}) -> tensor<f32>
  return %o : tensor<f32>
}}'''


def _rank(t: str) -> int:
    return t.split("<")[1].split(",")[0].count("x")


def _last(t: str) -> int:
    return _rank(t) - 1


def _all(t: str) -> str:
    return ", ".join(str(d) for d in range(_rank(t)))


def _layer_norm(d: int) -> str:
    """sum((layer_norm(x) * w + b)**2) over rows of `d` (rows symbolic)."""
    t, r, v = f'tensor<?x{d}xf32, "s0">', 'tensor<?xf32, "s0">', f"tensor<{d}xf32>"
    return f'''func.func @main(%x: {t}, %w: {v}, %b: {v}) -> tensor<f32> {{
  %s = "dg.reduce_sum"(%x) {{dims = array<i64: 1>}} : ({t}) -> {r}
  %n = "dg.constant"() {{value = dense<{1.0 / d}> : tensor<f32>}} : () -> tensor<f32>
  %nb = "dg.broadcast_in_dim"(%n) {{dims = array<i64>}} : (tensor<f32>) -> {r}
  %mean = "dg.mul"(%s, %nb) : ({r}, {r}) -> {r}
  %mb = "dg.broadcast_in_dim"(%mean) {{dims = array<i64: 0>}} : ({r}) -> {t}
  %c = "dg.sub"(%x, %mb) : ({t}, {t}) -> {t}
  %c2 = "dg.mul"(%c, %c) : ({t}, {t}) -> {t}
  %q = "dg.reduce_sum"(%c2) {{dims = array<i64: 1>}} : ({t}) -> {r}
  %var = "dg.mul"(%q, %nb) : ({r}, {r}) -> {r}
  %eps = "dg.constant"() {{value = dense<1.0e-5> : tensor<f32>}} : () -> tensor<f32>
  %eb = "dg.broadcast_in_dim"(%eps) {{dims = array<i64>}} : (tensor<f32>) -> {r}
  %ve = "dg.add"(%var, %eb) : ({r}, {r}) -> {r}
  %rs = "dg.rsqrt"(%ve) : ({r}) -> {r}
  %rb = "dg.broadcast_in_dim"(%rs) {{dims = array<i64: 0>}} : ({r}) -> {t}
  %y = "dg.mul"(%c, %rb) : ({t}, {t}) -> {t}
  %wb = "dg.broadcast_in_dim"(%w) {{dims = array<i64: 1>}} : ({v}) -> {t}
  %bb = "dg.broadcast_in_dim"(%b) {{dims = array<i64: 1>}} : ({v}) -> {t}
  %z0 = "dg.mul"(%y, %wb) : ({t}, {t}) -> {t}
  %z = "dg.add"(%z0, %bb) : ({t}, {t}) -> {t}
  %zz = "dg.mul"(%z, %z) : ({t}, {t}) -> {t}
  %o = "dg.reduce_sum"(%zz) {{dims = array<i64: 0, 1>}} : ({t}) -> tensor<f32>
  return %o : tensor<f32>
}}'''


def _eager_softmax(x: torch.Tensor) -> torch.Tensor:
    return (torch.softmax(x, -1) ** 2).sum()


def _eager_layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (torch.nn.functional.layer_norm(x, x.shape[-1:], w, b, eps=1e-5) ** 2).sum()


# (name, dg text, eager function, input shapes per size)
CASES = [
    # rows of a run-time count, 37 floats each (not a multiple of a vector)
    ("softmax_rows", _softmax('tensor<?x37xf32, "s0">', 'tensor<?xf32, "s0">', "0"),
     _eager_softmax, lambda n: [(n, 37)]),
    # attention scores: the row length is a run-time size too
    ("softmax_scores", _softmax('tensor<?x?x?xf32, "s0, s1, s1">', 'tensor<?x?xf32, "s0, s1">',
                                "0, 1"),
     _eager_softmax, lambda n: [(3, n, n)]),
    # weight and bias gradients: reductions over a run-time number of rows (partials)
    ("layer_norm", _layer_norm(100), _eager_layer_norm, lambda n: [(n, 100), (100,), (100,)]),
]
SIZES = (1, 19, 700)  # 700 rows: past PARALLEL_MIN_WORK, through the __parallel launchers


@pytest.mark.parametrize("torch_threads", [2], indirect=True)
@pytest.mark.parametrize("name,text,eager,shapes", CASES, ids=[c[0] for c in CASES])
def test_symbolic_program_matches_eager(name, text, eager, shapes, torch_threads, tmp_path):
    with make_context(), ir.Location.unknown():
        program = Program(ir.Module.parse(text), "main",
                          CompileOptions(dump_dir=str(tmp_path)))
    for n in SIZES:
        if name == "softmax_scores" and n == 700:
            n = 150  # 3 x 150 x 150 scores: past PARALLEL_MIN_WORK too
        torch.manual_seed(n)
        inputs = [torch.randn(*s, dtype=torch.float32, requires_grad=True) for s in shapes(n)]
        (got,) = run_program(program, inputs)
        got.backward()
        copies = [x.detach().clone().requires_grad_() for x in inputs]
        want = eager(*copies)
        want.backward()
        what = f"{name} at {[tuple(x.shape) for x in inputs]}"
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=what)
        for x, y in zip(inputs, copies):
            torch.testing.assert_close(x.grad, y.grad, rtol=1e-4, atol=1e-5, msg=what)
    # one compile (forward and backward) for every size, whose loops are dg-cpu-kernels'
    # threaded kernels
    (llvm,) = tmp_path.glob("*.cpu-llvm*.mlir")
    text = llvm.read_text()
    for entry in ("main_fwd", "main_bwd"):
        assert re.search(rf"@{entry}_k[0-9]+__parallel", text), f"{entry}: no threaded kernel"


def test_partials_over_static_rows_into_a_run_time_sized_result():
    """A sum over a static leading dim into a result of run-time sizes: the per-block
    partials combine over the result's run-time sizes (they looped over MLIR's dynamic
    marker: an empty loop, the result left zero)."""
    from fusegrad.codegen.cpu.compile import compile_cpu

    text = '''func.func @f(%x: tensor<4x4x?x?xf32, "s0, s0">) -> tensor<4x?x?xf32, "s0, s0"> {
      %0 = "dg.reduce_sum"(%x) {dims = array<i64: 0>} : (tensor<4x4x?x?xf32, "s0, s0">) -> tensor<4x?x?xf32, "s0, s0">
      return %0 : tensor<4x?x?xf32, "s0, s0">
    }'''
    with make_context(), ir.Location.unknown():
        cm = compile_cpu(ir.Module.parse(text))
    for n in (3, 17, 64):
        x = torch.randn(4, 4, n, n)
        torch.testing.assert_close(cm.function("f")(x)[0], x.sum(0))

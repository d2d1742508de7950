"""dg programs of symbolic sizes for the CUDA tests of run-time sizes (without a GPU in
cuda/test_cuda_run_time_sizes.py, on one in cuda/test_cuda_gpu.py): the kernel
benchmark's programs (benchmarks/cuda_kernels.py) with sizes made symbolic, one per
kernel template, their inputs at given sizes, and their outputs by the reference
interpreter."""
from __future__ import annotations

import importlib.util
import os
import re
from typing import Callable

import torch
from mlir import ir

from fusegrad.context import make_context
from fusegrad.dialects.interpreter import run_function
from fusegrad.pass_manager import run_pipeline

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "cuda_kernels_bench", os.path.join(REPO, "benchmarks", "cuda_kernels.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

# marker sizes the programs below are written at, and the symbols they stand for
ROWS, COLS = 7777, 8888
SYMBOLS = {ROWS: "s0", COLS: "s1"}


def symbolic(text: str) -> str:
    """`text` with every dim that is a marker size made its symbol:
    `tensor<7777x64xf32>` -> `tensor<?x64xf32, "s0">`."""
    def retype(m: re.Match) -> str:
        dims = m.group(1).split("x")
        element = dims.pop()
        names = [SYMBOLS.get(int(d)) for d in dims]
        if not any(names):
            return m.group(0)
        shape = "x".join("?" if n else d for d, n in zip(dims, names))
        return f'tensor<{shape}x{element}, "{", ".join(n for n in names if n)}">'
    return re.sub(r"tensor<((?:[0-9]+x)+[a-z0-9]+)>", retype, text)


def _embedding_grad_text() -> str:
    """An embedding's weight gradient: a scatter-add over a run-time number of tokens."""
    i, g, ib, w = (f"tensor<{ROWS}xi64>", f"tensor<{ROWS}x32xf32>", f"tensor<{ROWS}x32xi64>",
                   "tensor<100x32xf32>")
    return f"""
func.func @embed_grad(%i: {i}, %g: {g}) -> {w} {{
  %z = "dg.full"() {{value = 0.0 : f64}} : () -> {w}
  %ib = "dg.broadcast_in_dim"(%i) {{dims = array<i64: 0>}} : ({i}) -> {ib}
  %r = "dg.scatter_add"(%z, %ib, %g) {{dim = 0 : i64}} : ({w}, {ib}, {g}) -> {w}
  return %r : {w}
}}"""


# name -> (dg text of symbolic sizes, passes first): a template each, over run-time rows,
# a run-time row length or both
PROGRAMS = {
    "ew_rows": (symbolic(bench.ew_text(ROWS, 1000)), "dg-fuse"),  # 2-D grid
    "ew_flat": (symbolic(bench.ew_text(ROWS, COLS)), "dg-fuse"),  # flat, run-time divisors
    "softmax_rows": (symbolic(bench.softmax_text(ROWS, 1000)), "dg-fuse"),  # row cache
    "softmax_scores": (symbolic(bench.softmax_text(ROWS, COLS)), "dg-fuse"),
    "rowsum": (symbolic(bench.rowsum_text(ROWS, COLS)), "dg-fuse"),
    "colsum": (symbolic(bench.colsum_text(ROWS, 1000)), "dg-fuse"),  # block per output
    "total": (symbolic(bench.total_text(ROWS, COLS)), "dg-fuse"),  # two stages
    "mlp": (symbolic(bench.mlp_text(ROWS, 128, 256)), "dg-fuse"),  # cuBLAS, epilogue
    "ln_vjp": (symbolic(bench.ln_text(ROWS, 512)), "dg-autodiff{joint=true},dg-fuse"),
    "loss_count": (symbolic(bench.loss_count_text(ROWS)), "dg-fuse"),
    "embedding_grad": (symbolic(_embedding_grad_text()), "dg-fuse"),  # atomics, run-time trips
}

# program -> (its function, its input shapes at (rows, cols)) for the numeric checks
EMULATED: dict[str, tuple[str, Callable[[int, int], list[tuple]]]] = {
    "ew_flat": ("ew", lambda r, c: [(r, c)] * 3),
    "softmax_rows": ("softmax", lambda r, c: [(r, 1000)]),
    "softmax_scores": ("softmax", lambda r, c: [(r, c)]),
    "colsum": ("colsum", lambda r, c: [(r, 1000)]),
    "total": ("total", lambda r, c: [(r, c)]),
    "mlp": ("mlp", lambda r, c: [(r, 128), (128, 256), (256,)]),
    "ln_vjp": ("ln_vjp", lambda r, c: [(r, 512), (512,), ()]),  # x, gamma, the cotangent
    "embedding_grad": ("embed_grad", lambda r, c: [(r,), (r, 32)]),
}


def inputs_at(name: str, rows: int, cols: int) -> list[torch.Tensor]:
    """Inputs of program `name` at `rows` x `cols` (token ids for the embedding)."""
    g = torch.Generator().manual_seed(rows)
    return [torch.randint(0, 100, s, generator=g) if name == "embedding_grad" and not k
            else torch.randn(s, generator=g) for k, s in enumerate(EMULATED[name][1](rows, cols))]


def reference(name: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Program `name`'s outputs on (CPU) `inputs` by the reference interpreter."""
    text, pre = PROGRAMS[name]
    with make_context():
        module = ir.Module.parse(text)
        run_pipeline(module, pre)
        (fn,) = [op.operation for op in module.body.operations
                 if ir.StringAttr(op.operation.attributes["sym_name"]).value ==
                 EMULATED[name][0]]
        return run_function(fn, inputs)

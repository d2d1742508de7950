"""2-D pointwise kernels that give each thread several columns (`POINTWISE_READ_BYTES`):
run in the kernel emulator (cuda_emulator.py), whole tiles (straight-line code, every
load before any store) and the row's last, partial tile (column by column) match the
reference interpreter, and the kernels assemble for sm_80 and sm_90. The columns per
thread and the grid are checked in test/Target/CUDA/gpu-pointwise-columns.mlir."""
from __future__ import annotations

import torch
from mlir import ir

from cuda_plans import check_images, compile_emulated, compile_plan, needs_ptxas
from fusegrad.context import make_context
from fusegrad.dialects.interpreter import run_function
from fusegrad.runtime.cuda import CudaProgram

# (name, dg body, inputs): a column of one f32 operand takes 4 columns per thread (2000
# columns: a whole tile of 1024 and a partial one), a short row 2 (300: a partial tile
# only), an add of a broadcast bias 2 (1300: one whole tile and 276 columns), an f32 to
# bf16 rounding over rows of a 3-D view. Exact ops, so results compare bit for bit
# (exp through the emulator and the interpreter differed by up to 1.5e-4 after other
# tests had run in the process, with one column per thread as well)
_CASES = [
    ("neg_wide", """
  %0 = "dg.neg"(%arg0) : (tensor<6x2000xf32>) -> tensor<6x2000xf32>
  return %0 : tensor<6x2000xf32>""", [(6, 2000)], "tensor<6x2000xf32>"),
    ("neg_short", """
  %0 = "dg.neg"(%arg0) : (tensor<3x300xf32>) -> tensor<3x300xf32>
  return %0 : tensor<3x300xf32>""", [(3, 300)], "tensor<3x300xf32>"),
    ("bias", """
  %0 = "dg.broadcast_in_dim"(%arg1) {dims = array<i64: 1>} : (tensor<1300xf32>) -> tensor<5x1300xf32>
  %1 = "dg.add"(%arg0, %0) : (tensor<5x1300xf32>, tensor<5x1300xf32>) -> tensor<5x1300xf32>
  return %1 : tensor<5x1300xf32>""", [(5, 1300), (1300,)], "tensor<5x1300xf32>"),
    ("round", """
  %0 = "dg.convert"(%arg0) : (tensor<2x3x1500xf32>) -> tensor<2x3x1500xbf16>
  return %0 : tensor<2x3x1500xbf16>""", [(2, 3, 1500)], "tensor<2x3x1500xbf16>"),
]


def _text() -> str:
    funcs = []
    for name, body, shapes, result in _CASES:
        args = ", ".join(f"%arg{i}: tensor<{'x'.join(map(str, s))}xf32>"
                         for i, s in enumerate(shapes))
        funcs.append(f"func.func @{name}({args}) -> {result} {{{body}\n}}")
    return "\n".join(funcs)


@needs_ptxas
def test_multi_column_kernels_assemble():
    check_images(compile_plan(_text(), "dg-fuse", cubin=True))


def test_multi_column_kernels_match_the_reference_in_the_emulator():
    text = _text()
    plan, drv = compile_emulated(text, "dg-fuse")
    prog = CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 0, chip="sm_90")
    drv.know(prog._index_flag())
    gen = torch.Generator().manual_seed(0)
    with make_context():
        module = ir.Module.parse(text)
        functions = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation
                     for op in module.body.operations}
        for name, _, shapes, _ in _CASES:
            xs = [torch.randn(s, generator=gen) for s in shapes]
            with drv.tracking(*xs):
                (got,) = prog.function(name)(*xs)
            (want,) = run_function(functions[name], xs)
            assert torch.equal(got, want), name

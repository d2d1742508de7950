"""dg-narrow-matmuls: an f32 matmul of widened 16-bit floats, rounded back to them, runs
on the 16-bit floats.

`convert_bf16(convert_f32(a) @ convert_f32(b))` is a product of bf16 values accumulated
in f32 and rounded once: what a bf16 matmul through PyTorch's kernel computes
(oneDNN accumulates in f32; passes/blas.py), in a quarter of the time where the CPU
multiplies bf16 natively (AMX: 194 us against 900 us for an f32 256 x 512 x 1024
product here). PyTorch's decompositions of addmm, bmm and friends compute 16-bit
floats in f32 (`pw_cast_for_opmath`) and autodiff's gradients of them are the same
shape, so bf16 models (and autocast) ran their products as f32 gemms. Operands reach
the convert through transposes of their last two dims (a linear layer's `W^T`); a
product any other op reads in f32 stays as it is.
"""
from __future__ import annotations

import logging

from mlir import ir

from ..dialects.builder import Builder, erase_dead
from ..dialects.types import TensorSpec
from .function_boundary import rewrite_bodies
from .matmul_transpose import swaps_last_two
from .registry import register_pass

log = logging.getLogger("fusegrad.passes.matmul_precision")

_NARROW = ("bf16", "f16")


def _dtype(v: ir.Value) -> str:
    return TensorSpec.from_mlir(v.type).dtype


def _narrow_operand(v: ir.Value) -> tuple[ir.Value, bool] | None:
    """(the 16-bit value `v` widens, whether `v` transposes its last two dims), else None."""
    transposed = False
    op = None if isinstance(v.owner, ir.Block) else v.owner.operation
    if op is not None and swaps_last_two(op):
        transposed, v = True, op.operands[0]
        op = None if isinstance(v.owner, ir.Block) else v.owner.operation
    if op is None or op.name != "dg.convert" or _dtype(op.operands[0]) not in _NARROW:
        return None
    return op.operands[0], transposed


def narrow_matmuls(block: ir.Block) -> int:
    """Rewrite the matmuls of `block` whose f32 operands widen 16-bit floats and whose
    readers all round the product back to them; returns how many."""
    narrowed = 0
    for op in [o.operation for o in block.operations if o.operation.name == "dg.matmul"]:
        if _dtype(op.results[0]) != "f32":
            continue
        operands = [_narrow_operand(v) for v in op.operands]
        readers = [u.owner.operation for u in op.results[0].uses]
        if None in operands or not readers:
            continue
        narrow = {_dtype(v) for v, _ in operands}
        if len(narrow) != 1 or not all(r.name == "dg.convert" and
                                       _dtype(r.results[0]) in narrow for r in readers):
            continue
        with ir.InsertionPoint(op):
            b = Builder(op.location)
            a, c = (b.transpose(v, perm=[*range(TensorSpec.from_mlir(v.type).rank - 2),
                                         TensorSpec.from_mlir(v.type).rank - 1,
                                         TensorSpec.from_mlir(v.type).rank - 2])
                    if transposed else v for v, transposed in operands)
            product = b.matmul(a, c)
        for r in readers:
            r.results[0].replace_all_uses_with(product)
            r.erase()
        narrowed += 1
    if narrowed:
        erase_dead(block)
    return narrowed


@register_pass("dg-narrow-matmuls",
               "an f32 matmul of widened bf16/f16 operands whose readers round it back runs "
               "on the 16-bit operands (f32 accumulation in the library call)")
def narrow_matmuls_pass(module: ir.Operation) -> None:
    rewrite_bodies(module, narrow_matmuls, log, "dg-narrow-matmuls: @%s: %d matmuls narrowed")

"""dg-narrow-matmuls: an f32 matmul of widened 16-bit floats, rounded back to them, runs
on the 16-bit floats.

`convert_bf16(convert_f32(a) @ convert_f32(b))` is a product of bf16 values accumulated
in f32 and rounded once: what a bf16 matmul through PyTorch's kernel computes
(oneDNN accumulates in f32; codegen/cpu/library/matmul_to_blas.py), in a quarter of the time where the CPU
multiplies bf16 natively (AMX: 194 us against 900 us for an f32 256 x 512 x 1024
product here). PyTorch's decompositions of addmm, bmm and friends compute 16-bit
floats in f32 (`pw_cast_for_opmath`) and autodiff's gradients of them are the same
shape, so bf16 models (and autocast) ran their products as f32 gemms. Operands reach
the convert through transposes of their last two dims (a linear layer's `W^T`).

A product to which a widened 16-bit value is added before the rounding (a linear
layer's bias, through a broadcast; a residual) becomes `dg.matmul_add` onto that value:
the library call's beta = 1 adds it inside the gemm, rounded once, as eager's addmm
does (a bf16 product rounded, then added, rounds twice: at outputs near zero, where
the bias cancels the product, by up to the product's rounding error). A product other
ops read in f32 stays as it is.
"""
from __future__ import annotations

import logging

from mlir import ir

from ...dialects.builder import Builder, erase_dead
from ...dialects.core import attrs_of
from ...dialects.types import TensorSpec
from ...passes import rewrite_bodies
from .matmul_transposes import swaps_last_two, transposed


log = logging.getLogger(__name__)

_NARROW = ("bf16", "f16")


def _dtype(v: ir.Value) -> str:
    return TensorSpec.from_mlir(v.type).dtype


def _owner(v: ir.Value) -> ir.Operation | None:
    return None if isinstance(v.owner, ir.Block) else v.owner.operation


def _narrow_operand(v: ir.Value) -> tuple[ir.Value, bool] | None:
    """(the 16-bit value `v` widens, whether `v` swaps its last two dims), else None."""
    swapped = False
    op = _owner(v)
    if op is not None and swaps_last_two(op):
        swapped, v = True, op.operands[0]
        op = _owner(v)
    if op is None or op.name != "dg.convert" or _dtype(op.operands[0]) not in _NARROW:
        return None
    return op.operands[0], swapped


def _widened(v: ir.Value, dtype: str, b: Builder | None = None) -> ir.Value | None:
    """The `dtype` value `v` widens (through broadcasts, remade on it when a builder is
    given), else None."""
    op = _owner(v)
    if op is None:
        return None
    if op.name == "dg.convert" and _dtype(op.operands[0]) == dtype:
        return op.operands[0]
    if op.name == "dg.broadcast_in_dim":
        inner = _widened(op.operands[0], dtype, b)
        if inner is None or b is None:
            return inner
        return b.broadcast_in_dim(inner, shape=TensorSpec.from_mlir(v.type).shape,
                                  dims=list(attrs_of(op)["dims"]))
    return None


def _rounded(v: ir.Value, narrow: str) -> list[ir.Operation] | None:
    """The readers of `v` when they are all converts to `narrow`."""
    readers = [u.owner.operation for u in v.uses]
    if readers and all(r.name == "dg.convert" and _dtype(r.results[0]) == narrow
                       for r in readers):
        return readers
    return None


def _accumulated(product: ir.Operation, narrow: str) -> tuple[ir.Operation, ir.Value] | None:
    """(the add, its other operand) when the product's one reader adds to it a widened
    `narrow` value (a bias through a broadcast, a residual) and is read only rounded."""
    readers = [u.owner.operation for u in product.results[0].uses]
    if len(readers) != 1 or readers[0].name != "dg.add":
        return None
    add = readers[0]
    lhs, rhs = add.operands
    other = rhs if lhs == product.results[0] else lhs
    if other == product.results[0] or _widened(other, narrow) is None or \
            _rounded(add.results[0], narrow) is None:
        return None
    return add, other


def narrow_matmuls(block: ir.Block) -> int:
    """Rewrite the matmuls of `block` whose f32 operands widen 16-bit floats and whose
    readers all round the product back to them (or add a widened 16-bit value first:
    dg.matmul_add); returns how many."""
    narrowed = 0
    for op in [o.operation for o in block.operations if o.operation.name == "dg.matmul"]:
        if _dtype(op.results[0]) != "f32":
            continue
        operands = [_narrow_operand(v) for v in op.operands]
        if None in operands or len({_dtype(v) for v, _ in operands}) != 1:
            continue
        narrow = _dtype(operands[0][0])
        readers = _rounded(op.results[0], narrow)
        accumulated = None if readers is not None else _accumulated(op, narrow)
        if readers is None and accumulated is None:
            continue
        with ir.InsertionPoint(op if accumulated is None else accumulated[0]):
            b = Builder(op.location)
            a, c = (transposed(b, v) if swapped else v for v, swapped in operands)
            if accumulated is None:
                result = b.matmul(a, c)
            else:
                add, other = accumulated
                result = b.matmul_add(a, c, _widened(other, narrow, b))
                readers = _rounded(add.results[0], narrow)
        for r in readers:
            r.results[0].replace_all_uses_with(result)
            r.erase()
        narrowed += 1
    if narrowed:
        erase_dead(block)
    return narrowed


def narrow_matmuls_pass(module: ir.Operation) -> None:
    rewrite_bodies(module, narrow_matmuls, log, "dg-narrow-matmuls: @%s: %d matmuls narrowed")

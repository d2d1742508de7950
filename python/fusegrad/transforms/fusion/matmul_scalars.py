"""dg-matmul-scalars: a matmul operand scaled by a splat scales the product instead.

`(x * c) @ y = (x @ y) * c`. An operand scaled by a constant is otherwise a pass
over memory of its own when nothing else fuses with the scaling (the operand goes
to gemm as it is): PyTorch's math attention scales both the query and the key by
sqrt(1/sqrt(d)), and its backward scales the key again for dQ and dK. On the
product, the scaling fuses into the pointwise ops that read it (the softmax, the
rotary embedding's backward). Only operands whose scaling nothing else reads
(through reshapes and transposes of the last two dims) move, and only to float
matmuls whose readers are pointwise, directly or through a reshape: there the
scaling costs nothing.
"""
from __future__ import annotations

import logging

from mlir import ir

from ...dialects.builder import erase_dead, recreate
from ...dialects.core import is_pointwise
from ...dialects.types import TensorSpec
from ...passes import rewrite_bodies
from .matmul_transposes import is_splat, swaps_last_two


log = logging.getLogger(__name__)


def _value(splat: ir.Value) -> float:
    return ir.FloatAttr(splat.owner.operation.attributes["value"]).value


def _scaled(v: ir.Value) -> tuple[list[ir.Operation], ir.Operation, ir.Value] | None:
    """(views, mul, x) if `v` is `views(x * splat)`, each step read only by the next
    (views: reshapes and last-two-dim transposes, last first)."""
    views = []
    while not isinstance(v.owner, ir.Block) and len(list(v.uses)) == 1:
        op = v.owner.operation
        if op.name == "dg.reshape" or swaps_last_two(op):
            views.append(op)
            v = op.operands[0]
            continue
        if op.name == "dg.mul":
            a, b = op.operands
            if is_splat(b) and not is_splat(a):
                return views, op, a
            if is_splat(a) and not is_splat(b):
                return views, op, b
        return None
    return None


def _readers_fuse(v: ir.Value) -> bool:
    """Is every reader of `v` pointwise, directly or through reshapes? (A product the
    function returns, attention's scores saved for the backward, would be scaled by a
    pass of its own.)"""
    readers = [u.owner.operation for u in v.uses]
    return bool(readers) and all(
        is_pointwise(r) or (r.name == "dg.reshape" and _readers_fuse(r.results[0]))
        for r in readers)


def _move_scalar(matmul: ir.Operation) -> ir.Operation | None:
    """Move one operand's splat factor onto `matmul`'s product; returns the new matmul."""
    out = matmul.results[0]
    if TensorSpec.from_mlir(out.type).dtype not in ("f16", "bf16", "f32", "f64") or \
            not _readers_fuse(out):
        return None
    for k, operand in enumerate(matmul.operands):
        found = _scaled(operand)
        if found is None:
            continue
        views, mul, x = found
        splat = next(v for v in mul.operands if v != x and is_splat(v))
        # the product's reshapes, each read only by the next: the scaling goes after them,
        # in the shape of the ops that take it
        reshapes, end = [], out
        while len(list(end.uses)) == 1 and next(iter(end.uses)).owner.operation.name == \
                "dg.reshape":
            reshapes.append(next(iter(end.uses)).owner.operation)
            end = reshapes[-1].results[0]
        with ir.InsertionPoint(matmul):
            for view in reversed(views):
                x = recreate(view, [x]).results[0]
            operands = list(matmul.operands)
            operands[k] = x
            product = recreate(matmul, operands)
            y = product.results[0]
            for reshape in reshapes:
                y = recreate(reshape, [y]).results[0]
            value, dead = _value(splat), [*reversed(reshapes), matmul]
            readers = [u.owner.operation for u in end.uses]
            if len(readers) == 1 and readers[0].name == "dg.mul" and \
                    any(is_splat(v) for v in readers[0].operands if v != end):
                # `(p * c) * c2` is `p * (c * c2)`: one scaling (attention's backward
                # scales dK again), which reshapes then hoist into the next region
                again = readers[0]
                value *= _value(next(v for v in again.operands if v != end))
                end = again.results[0]
                dead.insert(0, again)
            factor = recreate(splat.owner.operation, [], [end.type])
            factor.attributes["value"] = ir.FloatAttr.get(ir.F64Type.get(), value)
            scaled = recreate(mul, [y, factor.results[0]], [end.type])
        end.replace_all_uses_with(scaled.results[0])
        for op in dead:  # readers first; the other operand then has one reader again
            op.erase()
        return product
    return None


def move_matmul_scalars(block: ir.Block) -> int:
    """Rewrite the matmuls of `block` with splat-scaled operands; returns how many factors
    moved (what they leave unread is erased at the end)."""
    moved = 0
    work = [o.operation for o in block.operations if o.operation.name == "dg.matmul"]
    while work:
        new = _move_scalar(work.pop())
        if new is not None:
            moved += 1
            work.append(new)  # its other operand may be scaled too
    if moved:
        erase_dead(block)
    return moved


def move_matmul_scalars_pass(module: ir.Operation) -> None:
    rewrite_bodies(module, move_matmul_scalars, log, "dg-matmul-scalars: @%s: %d factors moved")

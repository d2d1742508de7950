"""dg-lower-to-linalg: replace every dg op by its `lower` rule's linalg/tensor IR.

Ops are lowered outermost first, in block order. A `dg.fusion` is lowered by
its own rule when one is registered; otherwise its body is inlined into the
parent block and its ops are lowered one by one.
"""
from __future__ import annotations

from mlir import ir

from ..dialects.core import attrs_of, lookup
from ..dialects.region_ops import FUSION_TERMINATOR
from ..dialects.types import TensorSpec
from .registry import PassError, register_pass


def _rule_missing(op: ir.Operation) -> PassError:
    return PassError(f"{op.name} has no lowering rule; register one with @lowering(\"{op.name[3:]}\") "
                     "in its op family module", op.location)


def _inline_fusion(op: ir.Operation) -> list[ir.Operation]:
    """Move a fusion body before `op`, rewire its values, erase `op`; returns the moved ops."""
    block = op.regions[0].blocks[0]
    for arg, operand in zip(block.arguments, op.operands):
        arg.replace_all_uses_with(operand)
    moved = []
    for inner in list(block.operations):
        inner = inner.operation
        if inner.name == FUSION_TERMINATOR:
            for r, v in zip(op.results, inner.operands):
                r.replace_all_uses_with(v)
            break
        inner.move_before(op)
        moved.append(inner)
    op.erase()
    return moved


def lower_op(op: ir.Operation) -> None:
    """Lower one dg op (and, for an inlined fusion, its body) in place."""
    d = lookup(op.name)
    if d.lower is None:
        if op.name == "dg.fusion":
            for inner in _inline_fusion(op):
                if inner.name.startswith("dg."):
                    lower_op(inner)
            return
        raise _rule_missing(op)
    out = [TensorSpec.from_mlir(r.type) for r in op.results]
    try:
        with ir.InsertionPoint(op), op.location:
            values = d.lower(op, list(op.operands), op_name=d.name, attrs=attrs_of(op), out=out)
        got = [str(v.type) for v in values]
    except PassError:
        raise
    except Exception as e:
        raise PassError(f"lowering {op.name} failed: {type(e).__name__}: {e}", op.location) from e
    want = [str(r.type) for r in op.results]
    if got != want:
        raise PassError(f"lowering rule of {op.name} produced values of types {got} for results "
                        f"{want}", op.location)
    for r, v in zip(op.results, values):
        r.replace_all_uses_with(v)
    op.erase()


def _lower_region_ops(op: ir.Operation) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in list(block.operations):
                inner = inner.operation
                if inner.name.startswith("dg."):
                    lower_op(inner)
                else:
                    _lower_region_ops(inner)


@register_pass("dg-lower-to-linalg", "lower dg ops to linalg/tensor/arith/math on tensors")
def lower_to_linalg(module: ir.Operation) -> None:
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func":
            _lower_region_ops(op.operation)

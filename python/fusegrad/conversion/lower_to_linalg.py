"""dg-lower-to-linalg: replace every dg op by its `lower` rule's linalg/tensor IR.

Ops are lowered outermost first, in block order; a fusion region (see
dialects/region_ops.py) is lowered as a whole by conversion/fusion_regions.py.
A rule may also decompose its op into other dg ops, which are then lowered by
their own rules (the gradients of dg.conv2d lower to forward convolutions).
"""
from __future__ import annotations

from mlir import ir

from ..dialects.composite import emitted_dg_ops
from ..dialects.core import attrs_of, lookup
from ..dialects.region_ops import is_fusion
from ..dialects.types import TensorSpec
from .fusion_regions import lower_region
from .sizes import function_sizes
from ..passes import PassError


def _rule_missing(op: ir.Operation) -> PassError:
    return PassError(f"{op.name} has no lowering rule; register one with @lowering(\"{op.name[3:]}\") "
                     "in its op family module", op.location)


def _emit(op: ir.Operation, row_bytes_max: int) -> list[ir.Value]:
    if is_fusion(op):
        return lower_region(op, row_bytes_max)
    d = lookup(op.name)
    if d.lower is None:
        raise _rule_missing(op)
    out = [TensorSpec.from_mlir(r.type) for r in op.results]
    return d.lower(op, list(op.operands), op_name=d.name, attrs=attrs_of(op), out=out)


def lower_op(op: ir.Operation, row_bytes_max: int = 0) -> None:
    """Lower one dg op or fusion region in place. A rule may emit dg ops (a decomposition,
    e.g. dg.conv2d_input_grad into pad, reverse and conv2d); those are lowered in turn.
    `row_bytes_max`: see `fusion_lowering.lower_region`."""
    try:
        with ir.InsertionPoint(op), op.location:
            values = _emit(op, row_bytes_max)
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
    # ops before `op` are lowered already, so the walk back stops at the rule's own ops
    for inner in emitted_dg_ops(values):
        lower_op(inner, row_bytes_max)


def _lower_region_ops(op: ir.Operation, row_bytes_max: int) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in list(block.operations):
                inner = inner.operation
                if inner.name.startswith("dg.") or is_fusion(inner):
                    lower_op(inner, row_bytes_max)
                else:
                    _lower_region_ops(inner, row_bytes_max)


def lower_to_linalg(module: ir.Operation, row_bytes_max: int = 0) -> None:
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and op.regions[0].blocks:
            with function_sizes(op.operation):
                _lower_region_ops(op.operation, row_bytes_max)

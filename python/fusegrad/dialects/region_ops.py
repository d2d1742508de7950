"""Fusion regions: a group of dg ops that becomes one kernel.

A fusion region is an upstream `scf.execute_region` marked with the unit
attribute `dg.fusion` and `no_inline` (so canonicalize keeps it), whose single
block holds dg ops and ends in `scf.yield` of the region's results:

    %r:2 = scf.execute_region -> (tensor<4x8xf32>, tensor<4xf32>) no_inline {
      %e = "dg.exp"(%x) : ...
      %s = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : ...
      scf.yield %e, %s : tensor<4x8xf32>, tensor<4xf32>
    } {dg.fusion}

Why not a `dg.fusion` op: IRDL ops cannot carry the terminator trait, and IRDL
binds one type variable per variadic operand/result group, so an IRDL op could
never take or return tensors of different types. The region captures its
inputs from above; `fusion_inputs` lists them.
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir

from .types import TensorSpec

FUSION_ATTR = "dg.fusion"
FUSION_TERMINATOR = "scf.yield"


def is_fusion(op: ir.Operation) -> bool:
    op = op.operation
    return op.name == "scf.execute_region" and FUSION_ATTR in op.attributes


def create_fusion(result_types: Sequence[TensorSpec], loc: ir.Location | None = None) -> ir.Operation:
    """An empty fusion region at the current insertion point; fill its block, then yield."""
    op = ir.Operation.create("scf.execute_region", results=[r.to_mlir() for r in result_types],
                             attributes={FUSION_ATTR: ir.UnitAttr.get(),
                                         "no_inline": ir.UnitAttr.get()},
                             regions=1, loc=loc)
    op.regions[0].blocks.append()
    return op


def create_fusion_yield(values: Sequence[ir.Value], loc: ir.Location | None = None) -> ir.Operation:
    return ir.Operation.create(FUSION_TERMINATOR, operands=list(values), loc=loc)


def fusion_body(op: ir.Operation) -> tuple[list[ir.Operation], list[ir.Value]]:
    """The ops of a fusion region (without the terminator) and the values it yields."""
    ops = [o.operation for o in op.operation.regions[0].blocks[0].operations]
    return ops[:-1], list(ops[-1].operands)


def fusion_inputs(op: ir.Operation) -> list[ir.Value]:
    """Values defined outside the region and used inside it, in first-use order."""
    ops, yielded = fusion_body(op)
    inside = {r for o in ops for r in o.results}
    seen: list[ir.Value] = []
    for v in [x for o in ops for x in o.operands] + yielded:
        if v not in inside and v not in seen:
            seen.append(v)
    return seen

"""dg-scatter-into-sums: `x + scatter_add(0, idx, src)` is `scatter_add(x, idx, src)`.

A weight used twice gets the sum of two gradients; where one is a scatter into zeros
(an embedding's, whose weight the output layer shares, as in GPT-2), the sum needed
the scattered tensor as a temporary of the weight's size (147 MiB for GPT-2's 50257 x
768 embedding) beside the other gradient. Scattered into the other gradient, it needs
none: bufferization adds the rows in place. Each row the indices name gets its updates
added one by one onto the other gradient's value instead of onto zero first (the
rounding of a sum in another order, as autograd's own order of accumulation).
"""
from __future__ import annotations

import logging
from typing import Optional

from mlir import ir

from ...dialects.builder import erase_if_unused
from ...passes import rewrite_bodies

log = logging.getLogger(__name__)


def _scatter_into_zeros(v: ir.Value) -> Optional[ir.Operation]:
    """The scatter_add making `v` into a splat 0, which nothing else reads, or None."""
    if isinstance(v.owner, ir.Block) or len(list(v.uses)) != 1:
        return None
    op = v.owner.operation
    if op.name != "dg.scatter_add":
        return None
    base = op.operands[0]
    if isinstance(base.owner, ir.Block) or base.owner.operation.name != "dg.full" or \
            ir.FloatAttr(base.owner.operation.attributes["value"]).value != 0.0:
        return None
    return op


def scatter_into_sums(block: ir.Block) -> int:
    rewritten = 0
    for op in [o.operation for o in block.operations]:
        if op.name != "dg.add" or op.operands[0].type != op.operands[1].type or \
                op.operands[0].type != op.results[0].type:
            continue
        for k in (0, 1):
            scatter = _scatter_into_zeros(op.operands[k])
            if scatter is None:
                continue
            zeros = scatter.operands[0].owner.operation
            other = op.operands[1 - k]
            scatter.operands[0] = other  # the other term is defined before the add
            scatter.move_before(op)
            op.results[0].replace_all_uses_with(scatter.results[0])
            op.erase()
            erase_if_unused(zeros)
            rewritten += 1
            break
    return rewritten


def scatter_into_sums_pass(module: ir.Operation) -> None:
    rewrite_bodies(module, scatter_into_sums, log,
                   "dg-scatter-into-sums: @%s: %d sums scattered into")

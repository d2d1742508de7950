"""dg-transpose-matmul-results: a matmul read only transposed computes the transpose.

`transpose(A @ B) = B^T @ A^T` (last two dims). When every reader of a matmul
takes it through a transpose of its last two dims, the matmul is rewritten to
produce that layout directly; operand transposes cancel against transposes
already there or become BLAS transpose flags (`dg-matmul-to-blas`). Left as
it was, the transpose would be read column-wise by whatever kernel it fuses
into: a tied embedding's gradient (GPT-2, BERT) added the LM head's
transposed 256x2048 weight gradient that way, the largest of GPT-2's
backward kernels.
"""
from __future__ import annotations

import logging

from mlir import ir

from ..dialects.builder import Builder, erase_if_unused
from ..dialects.core import attrs_of
from .function_boundary import functions
from .registry import register_pass

log = logging.getLogger("fusegrad.passes.matmul_transpose")


def swaps_last_two(op: ir.Operation) -> bool:
    """Is `op` a dg.transpose of the last two dims only?"""
    if op.name != "dg.transpose":
        return False
    perm = list(attrs_of(op)["perm"])
    n = len(perm)
    return n >= 2 and perm == [*range(n - 2), n - 1, n - 2]


def _transposed(b: Builder, v: ir.Value) -> ir.Value:
    """`v` with its last two dims swapped (undoing a transpose that swapped them)."""
    if not isinstance(v.owner, ir.Block) and swaps_last_two(v.owner.operation):
        return v.owner.operation.operands[0]
    n = ir.RankedTensorType(v.type).rank
    return b.transpose(v, perm=[*range(n - 2), n - 1, n - 2])


def transpose_matmul_results(block: ir.Block) -> int:
    """Rewrite the matmuls of `block` read only transposed; returns how many."""
    rewritten = 0
    for op in [o.operation for o in block.operations if o.operation.name == "dg.matmul"]:
        readers = [u.owner.operation for u in op.results[0].uses]
        if not readers or not all(swaps_last_two(r) for r in readers):
            continue
        lhs, rhs = op.operands
        with ir.InsertionPoint(op):
            b = Builder(op.location)
            product = b.matmul(_transposed(b, rhs), _transposed(b, lhs))
        for r in readers:
            r.results[0].replace_all_uses_with(product)
            r.erase()
        erase_if_unused(op)
        rewritten += 1
    return rewritten


@register_pass("dg-transpose-matmul-results",
               "a matmul read only through transposes computes the transposed product")
def transpose_matmul_results_pass(module: ir.Operation) -> None:
    for fn in functions(module):
        n = transpose_matmul_results(fn.regions[0].blocks[0])
        if n:
            log.debug("dg-transpose-matmul-results: @%s: %d matmuls",
                      ir.StringAttr(fn.attributes["sym_name"]).value, n)

"""dg-results-in-place: compute a result in its out-param instead of copying it there.

`buffer-results-to-out-params` forwards a result into its out-param only when
the returned memref is an alloc itself; a result returned through a reshape
(a linear layer's 2-D product returned as [batch, seq, features]) is computed
into a temporary and copied into the out-param at the end: for a language
model's logits, a pass over megabytes that does nothing. Here the temporary
becomes a view of the out-param and the copy goes.

A result of run-time sizes is always computed into a temporary (the pass
hoists static allocs only); one copied whole into an out-param of its type
becomes that out-param (CUDA would otherwise run a copy kernel per output).

Safe when the out-param is touched by nothing but that copy (out-params are
fresh buffers the runtime allocates, never an input), the temporary is an
alloc in the same block, both are contiguous with the same element count (of
run-time sizes: the temporary itself is copied, and has the out-param's type),
and nothing but deallocs touches the temporary after the copy.
"""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import memref

from ...passes import functions
from .memrefs import buffer_root, contiguous_memref, touching_ops


def _view_of(out: ir.Value, like: ir.MemRefType) -> ir.Value:
    """`out` (contiguous) seen with the shape of `like`: flattened, then expanded."""
    flat = out
    if out.type.rank != 1:
        flat = memref.CollapseShapeOp(
            ir.MemRefType.get([math.prod(out.type.shape)], out.type.element_type), out,
            [list(range(out.type.rank))]).result
    if like.rank == 1:
        return flat
    return memref.ExpandShapeOp(like, flat, [list(range(like.rank))], [], like.shape).result


def _in_place(copy: ir.Operation, args: list) -> bool:
    source, out = copy.operands
    if out not in args or len(list(out.uses)) != 1:
        return False
    alloc = buffer_root(source)
    if isinstance(alloc.owner, ir.Block) or alloc.owner.operation.name != "memref.alloc" or \
            alloc.owner.operation.block != copy.block:
        return False
    if alloc.type.rank == 0 or out.type.rank == 0:  # a scalar: nothing worth a view
        return False
    if not alloc.type.has_static_shape:
        if source != alloc or alloc.type != out.type:
            return False
    elif not (contiguous_memref(alloc.type) and contiguous_memref(out.type)) or \
            math.prod(alloc.type.shape) != math.prod(out.type.shape) or \
            alloc.type.element_type != out.type.element_type:
        return False
    touching = touching_ops(alloc, copy.block)
    if touching is None:
        return False
    return all(op == copy or op.is_before_in_block(copy) for op in touching[0])


def results_in_place(module: ir.Operation) -> None:
    for fn in functions(module):
        block = fn.regions[0].blocks[0]
        args = list(block.arguments)
        copies = [op.operation for op in block.operations if op.operation.name == "memref.copy"]
        for copy in copies:
            if not _in_place(copy, args):
                continue
            source, out = copy.operands
            alloc = buffer_root(source).owner.operation
            with ir.InsertionPoint(alloc), alloc.location:
                view = _view_of(out, alloc.result.type) \
                    if alloc.result.type.has_static_shape else out
            for use in list(alloc.result.uses):
                if use.owner.operation.name == "memref.dealloc":
                    use.owner.operation.erase()
            alloc.result.replace_all_uses_with(view)
            alloc.erase()
            copy.erase()

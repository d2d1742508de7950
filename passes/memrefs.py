"""Facts about memref values that the CPU and GPU kernel passes share: which
buffer a view aliases, whether a buffer is contiguous, whether two loop ops
touch a buffer only row by row."""
from __future__ import annotations

from typing import Optional

from mlir import ir

VIEWS = ("memref.expand_shape", "memref.collapse_shape", "memref.subview", "memref.cast",
         "memref.reinterpret_cast")

Access = tuple  # per buffer dim: the loop dim indexing it, or None for the constant index 0


def buffer_root(v: ir.Value) -> ir.Value:
    """The buffer a view is a view of (an alloc or a function argument)."""
    while not isinstance(v.owner, ir.Block) and v.owner.operation.name in VIEWS:
        v = v.owner.operation.operands[0]
    return v


def _in_block(op: ir.Operation, block: ir.Block) -> Optional[ir.Operation]:
    """The ancestor of `op` (or `op` itself) that sits in `block`, if any."""
    while op.block != block:
        parent = op.parent
        if parent is None or parent.name == "builtin.module":
            return None
        op = parent.operation
    return op


def touching_ops(buf: ir.Value, block: ir.Block
                 ) -> Optional[tuple[list[ir.Operation], list[ir.Operation]]]:
    """The ops of `block` that touch buffer `buf`: use it or anything derived from it
    (views, pointers taken for library calls, loop results), as (ops in `block` whose
    regions or selves do, deallocs of it). None when something escapes: a return, or a
    dealloc outside `block`."""
    ops, deallocs = [], []
    seen, work = set(), [buf]
    while work:
        for use in work.pop().uses:
            user = use.owner.operation
            top = _in_block(user, block)
            if user.name == "func.return" or top is None:
                return None
            if user.name == "memref.dealloc":
                if top != user:
                    return None
                deallocs.append(user)
                continue
            ops.append(top)
            if user not in seen:
                seen.add(user)
                work.extend(user.results)
    return ops, deallocs


def static_memref(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType) and t.has_static_shape


def contiguous_memref(t: ir.Type) -> bool:
    """A statically shaped memref with row-major strides and offset 0."""
    if not static_memref(t):
        return False
    strides, offset = t.get_strides_and_offset()
    expected, acc = [], 1
    for size in reversed(t.shape):
        expected.insert(0, acc)
        acc *= size
    return offset == 0 and (list(strides) == expected or t.rank == 0)


def row_local(acc: Optional[Access]) -> bool:
    """Is the buffer's dim 0 indexed by loop dim 0 (each row touches only its own row)?"""
    return acc is not None and len(acc) > 0 and acc[0] == 0


def row_conflict(group, op) -> bool:
    """Would running loop op `op` row by row with the loop ops of `group` change what any
    of them reads? (Loop ops expose `buffers()`: (buffer, access, writes?) triples.)"""
    for b, acc_b, writes_b in op.buffers():
        root = buffer_root(b)
        for member in group:
            for a, acc_a, writes_a in member.buffers():
                if buffer_root(a) != root or not (writes_a or writes_b):
                    continue
                if a != b or not (row_local(acc_a) and row_local(acc_b)):
                    return True
    return False

"""dg-elide-copies: a temporary that is written, then copied whole into part of another
buffer and never used again, is that part from the start.

Bufferization leaves a concatenation as copies: each part is computed into a buffer
of its own, then `memref.copy`'d through reshapes into a subview of the result. A
max-pool's backward interleaves four window gradients that way, in two levels of
concatenation (along W, then H): the benchmark CNN copied 12 MiB per step in four
kernels, about 6% of the step. Here the part's buffer becomes a view of the result
(`memref.reinterpret_cast` of the result's buffer, with the strides the copy's
destination gives it through the reshapes), so the kernel that computed the part
writes it in place, and the copy goes; the views of the part are retyped to match.

A copy is elided only when nothing touches its destination's elements between the
part's first writer and the copy (`_overlap`: other parts of the concatenation, written
in between, lie elsewhere). Copies are taken last first, again until none changes, so
that a concatenation of concatenations is elided from the outside in: a part's buffer
is retyped before its own parts become views of it.
"""
from __future__ import annotations

from typing import Optional

from mlir import ir
from mlir.dialects import memref

from ...passes import functions
from ..common.memrefs import buffer_root, first_in_block, static_layout, touching_ops


_RESHAPES = ("memref.expand_shape", "memref.collapse_shape")
_VIEWS = _RESHAPES + ("memref.subview", "memref.reinterpret_cast", "memref.cast")
# ops a part's buffer (or a view of it) may meet: none needs a contiguous buffer
_LAYOUT_FREE = ("linalg.generic", "linalg.fill", "linalg.transpose", "linalg.copy",
                "memref.copy", "memref.load", "memref.store", "memref.dealloc")


def view_strides(shape: list[int], strides: list[int], new_shape: list[int]
                 ) -> Optional[list[int]]:
    """Strides of `new_shape` viewing the elements of a (shape, strides) array in the same
    row-major order, or None when no strides can (ATen's `computeStride`)."""
    if not shape:
        return [1] * len(new_shape) if all(s == 1 for s in new_shape) else None
    new = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    base = strides[-1]
    numel = view_numel = 1
    for d in range(len(shape) - 1, -1, -1):
        numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != numel * base):
            while view_d >= 0 and (view_numel < numel or new_shape[view_d] == 1):
                new[view_d] = view_numel * base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != numel:
                return None
            if d > 0:
                base, numel, view_numel = strides[d - 1], 1, 1
    return new if view_d == -1 else None


def _strided(shape: list[int], element: ir.Type, strides: list[int], offset: int) -> ir.Type:
    layout = ir.StridedLayoutAttr.get(offset, strides)
    return ir.MemRefType.get(shape, element, layout)


def _view_type(op: ir.Operation, source: ir.MemRefType) -> Optional[ir.Type]:
    """The result type of view `op` when its source has type `source` (static layout)."""
    result = ir.MemRefType(op.results[0].type)
    strides, offset = static_layout(source)
    if op.name in _RESHAPES:
        new = view_strides(list(source.shape), strides, list(result.shape))
        return None if new is None else _strided(list(result.shape), result.element_type,
                                                 new, offset)
    if op.name != "memref.subview" or len(op.operands) != 1:
        return None
    offsets = list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"]))
    sizes = list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"]))
    steps = list(ir.DenseI64ArrayAttr(op.attributes["static_strides"]))
    if len(sizes) != result.rank:  # rank-reducing: not taken
        return None
    offset += sum(o * s for o, s in zip(offsets, strides))
    return _strided(list(result.shape), result.element_type,
                    [s * step for s, step in zip(strides, steps)], offset)


def _box(v: ir.Value) -> Optional[tuple[int, list[int], list[int]]]:
    """(offset, sizes, strides) of the elements memref `v` covers in its buffer."""
    t = ir.MemRefType(v.type)
    layout = static_layout(t)
    return None if layout is None else (layout[1], list(t.shape), layout[0])


def _overlap(a: tuple, b: tuple, budget: int = 4096) -> bool:
    """May boxes `a` and `b` (from `_box`, in one buffer) share an element? Exact when the
    strides are equal and the search fits `budget` steps, else True. An element of both
    has a.offset + i.strides = b.offset + j.strides, so sum (i_k - j_k) strides_k =
    b.offset - a.offset with -(b.size_k - 1) <= i_k - j_k <= a.size_k - 1: a search over
    the dims by decreasing stride, keeping the rest within what the inner dims reach."""
    (oa, na, sa), (ob, nb, sb) = a, b
    if sa != sb or len(na) != len(nb) or any(st < 0 for st in sa):
        return True
    dims = sorted(((st, -(y - 1), x - 1) for st, x, y in zip(sa, na, nb)),
                  key=lambda d: -abs(d[0]))
    if any(x < 0 or y > 0 for _, y, x in dims):  # an empty box
        return False
    reach = [(0, 0)] * (len(dims) + 1)  # (min, max) of the sum over dims[k:]
    for k in range(len(dims) - 1, -1, -1):
        st, lo, hi = dims[k]
        ends = (lo * st, hi * st)
        reach[k] = (reach[k + 1][0] + min(ends), reach[k + 1][1] + max(ends))
    steps = [0]

    def search(k: int, rest: int) -> bool:
        steps[0] += 1
        if steps[0] > budget:
            return True
        if k == len(dims):
            return rest == 0
        st, lo, hi = dims[k]
        low, high = reach[k + 1]
        if st == 0:
            return search(k + 1, rest)
        # c * st within [rest - high, rest - low]
        for c in range(max(lo, -((high - rest) // st)), min(hi, (rest - low) // st) + 1):
            if search(k + 1, rest - c * st):
                return True
        return False
    return search(0, ob - oa)


def _derived(v: ir.Value, skip: set) -> Optional[list[ir.Operation]]:
    """The view ops derived from `v` (transitively, parents first), not in `skip`; None if
    a use is not an op that accepts any layout."""
    views, work = [], [v]
    while work:
        for use in work.pop().uses:
            user = use.owner.operation
            if user in skip:
                continue
            if user.name in _RESHAPES or user.name == "memref.subview":
                if use.operand_number != 0:
                    return None
                views.append(user)
                work.append(user.results[0])
            elif user.name not in _LAYOUT_FREE:
                return None
    return views


def _source_chain(src: ir.Value) -> Optional[tuple[ir.Value, list[ir.Operation]]]:
    """(buffer, reshapes from it to `src`) when `src` is reshapes of a buffer, each used
    once."""
    chain = []
    while not isinstance(src.owner, ir.Block) and src.owner.operation.name in _RESHAPES:
        if len(list(src.uses)) != 1:
            return None
        chain.append(src.owner.operation)
        src = src.owner.operation.operands[0]
    return src, chain


Touching = Optional[tuple[list[ir.Operation], list[ir.Operation]]]


class _TouchingOps:
    """`touching_ops` per buffer of one block, kept up to date as copies are elided: a
    concatenation of n parts asked for its result's ops n times, each a walk over what
    the earlier parts had added (an unrolled GRU's backward: 5 s)."""

    def __init__(self, block: ir.Block) -> None:
        self.block = block
        self.known: dict[ir.Value, Touching] = {}

    def __call__(self, buf: ir.Value) -> Touching:
        if buf not in self.known:
            self.known[buf] = touching_ops(buf, self.block)
        return self.known[buf]

    def merge(self, part: ir.Value, result: ir.Value, erased: set) -> None:
        """`part`'s ops now touch `result` (a view of it stands for `part`); `erased` are
        gone."""
        part_ops, result_ops = self.known.pop(part), self.known[result]
        self.known[result] = ([o for o in [*result_ops[0], *part_ops[0]] if o not in erased],
                              result_ops[1])


def _elide_whole(copy: ir.Operation, touching_of: _TouchingOps) -> bool:
    """A buffer of run-time sizes copied whole into a buffer of its type (a result into
    its out-param, which bufferization does for static shapes only: its
    `buffer-results-to-out-params` hoists static allocs) is that buffer from its first
    writer on: its uses take the destination, its alloc and the copy go."""
    block = copy.block
    part, dst = copy.operands
    alloc = part.owner
    if isinstance(alloc, ir.Block) or alloc.operation.name != "memref.alloc" or \
            alloc.operation.block != block or part.type != dst.type or \
            ir.MemRefType(part.type).has_static_shape or \
            not isinstance(ir.MemRefType(part.type).layout, ir.AffineMapAttr) or \
            buffer_root(dst) == part:
        return False
    alloc = alloc.operation
    owner = dst.owner  # the destination exists before the part does
    if isinstance(owner, ir.Block):
        if owner != block:
            return False
    elif owner.operation.block != block or not owner.operation.is_before_in_block(alloc):
        return False
    touching = touching_of(part)
    if touching is None:
        return False
    ops = [o for o in touching[0] if o != copy and o.name not in _VIEWS + ("memref.dim",)]
    if not ops or any(not o.is_before_in_block(copy) for o in ops):
        return False
    first = first_in_block(ops)
    result = buffer_root(dst)
    result_touching = touching_of(result)
    if result_touching is None:
        return False
    for o in result_touching[0]:
        if o.name in _VIEWS or o.name == "memref.dim" or o == copy:
            continue
        if o == first or (first.is_before_in_block(o) and o.is_before_in_block(copy)):
            return False
    erased = {copy, *touching[1]}
    touching_of.merge(part, result, erased)
    copy.erase()
    for use in list(part.uses):
        user = use.owner.operation
        if user.name == "memref.dealloc":
            user.erase()
        else:
            user.operands[use.operand_number] = dst
    alloc.erase()
    return True


def _elide(copy: ir.Operation, touching_of: _TouchingOps) -> bool:
    if _elide_whole(copy, touching_of):
        return True
    block = copy.block
    found = _source_chain(copy.operands[0])
    if found is None:
        return False
    part, chain = found
    dst = copy.operands[1]
    result = buffer_root(dst)
    alloc = part.owner
    if isinstance(alloc, ir.Block) or alloc.operation.name != "memref.alloc" or \
            len(alloc.operation.operands) or alloc.operation.block != block or result == part:
        return False
    alloc = alloc.operation
    part_type, dst_type = ir.MemRefType(part.type), ir.MemRefType(dst.type)
    layout = static_layout(dst_type)
    if layout is None or not part_type.has_static_shape or \
            not isinstance(part_type.layout, ir.AffineMapAttr) or \
            not isinstance(ir.MemRefType(result.type).layout, ir.AffineMapAttr):
        return False
    strides = view_strides(list(dst_type.shape), layout[0], list(part_type.shape))
    if strides is None:
        return False
    # the result buffer must be defined before the part's alloc, or be an alloc we can move
    owner = result.owner
    if isinstance(owner, ir.Block):
        if owner != block:
            return False
        movable = None
    else:
        owner = owner.operation
        if owner.name != "memref.alloc" or len(owner.operands) or owner.block != block:
            return False
        movable = owner if alloc.is_before_in_block(owner) else None
    # the part is dead after the copy, and something writes it before
    touching = touching_of(part)
    if touching is None:
        return False
    ops = [o for o in touching[0] if o != copy and o.name not in _VIEWS]
    if any(not o.is_before_in_block(copy) for o in ops) or not ops:
        return False
    first = first_in_block(ops)
    # nothing touches the copy's destination from the part's first writer to the copy
    result_touching = touching_of(result)
    if result_touching is None:
        return False
    target = _box(dst)
    for o in result_touching[0]:
        if o.name in _VIEWS or o == first or o == copy or not first.is_before_in_block(o) \
                or not o.is_before_in_block(copy):
            continue
        if not o.name.startswith("linalg.") and o.name not in _LAYOUT_FREE:
            return False  # its effects on the buffer are not those of its memref operands
        for v in o.operands:
            if isinstance(v.type, ir.MemRefType) and buffer_root(v) == result:
                box = _box(v)
                if box is None or _overlap(target, box):
                    return False
    views = _derived(part, set(chain) | {copy})
    if views is None:
        return False
    new_type = _strided(list(part_type.shape), part_type.element_type, strides, layout[1])
    types: dict = {}
    for view in views:  # parents first
        source = types.get(view.operands[0], new_type)
        t = _view_type(view, ir.MemRefType(source))
        if t is None:
            return False
        types[view.results[0]] = t
    # rewrite
    if movable is not None:
        movable.move_before(alloc)
    with ir.InsertionPoint(alloc), alloc.location:
        in_place = memref.reinterpret_cast(new_type, result, [], [], [], [layout[1]],
                                           list(part_type.shape), strides)
    erased = {copy, *chain, *touching[1]}
    touching_of.merge(part, result, erased)
    copy.erase()
    for op in chain:
        op.erase()
    for use in list(part.uses):
        user = use.owner.operation
        if user.name == "memref.dealloc":
            user.erase()
        else:
            user.operands[use.operand_number] = in_place
    alloc.erase()
    for value, t in types.items():
        value.set_type(t)
    return True


def elide_copies(module: ir.Operation) -> None:
    for fn in functions(module):
        if not fn.regions[0].blocks:
            continue
        block = fn.regions[0].blocks[0]
        touching = _TouchingOps(block)
        changed = True
        while changed:
            changed = False
            copies = [op.operation for op in block.operations if op.operation.name == "memref.copy"]
            for copy in reversed(copies):
                if _elide(copy, touching):
                    changed = True

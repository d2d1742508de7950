"""dg-prefetch-streams: software prefetch for the arrays a loop nest streams through.

A fused kernel that computes much per element (gelu(x*w+b) * sigmoid(x): about 55
vector instructions per 16 floats) keeps few cache-line misses in flight: on the
2-core Xeon of benchmarks/README.md, with x in DRAM, its loop stalled on the load of
x (38% of its samples) and took 5.2 ms where it took 2.7 ms with x in cache; the
hardware prefetchers did not run far enough ahead. A `prefetcht0` of the same stream
2 KiB ahead of each 512-byte chunk brought it to 3.3 ms.

Here each innermost `scf.for` (unit step, or unrolled by hand) that loads a stream
(the loop's index is the last index of a memref whose last dim is unit-stride, and an
earlier index moves with the enclosing loop: the rows of a row kernel; not a vector
like a bias, which every row re-reads) is strip-mined into chunks of CHUNK_BYTES, and
before each chunk one prefetch per cache line of the chunk PREFETCH_BYTES ahead of it,
in the memref's buffer seen as one dim and clamped to the view's last element (the
next row's start, near a row's end). The chunk loop keeps the body as it was, so
LLVM still vectorizes it; a loop no longer than a chunk is left whole and prefetched
before it, as is the block of a blocked sum (`blocked_sums`), whose enclosing loop is
the one above its loop over the blocks. Stores are not prefetched: prefetching the output for
writing made the gelu kernel slower.
"""
from __future__ import annotations

from typing import Optional

from mlir import ir
from mlir.dialects import arith, memref, scf

from .blocked_sums import BLOCK_ATTR, BLOCKS_ATTR


CACHE_LINE = 64
CHUNK_BYTES = 512
PREFETCH_BYTES = 2048
_LOOPS = ("scf.for", "scf.parallel", "scf.while", "scf.forall")


def _constant(v: ir.Value) -> Optional[int]:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    attr = owner.operation.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


def _innermost(op: ir.Operation) -> bool:
    found = []

    def visit(o: ir.Operation) -> ir.WalkResult:
        if o != op and o.name in _LOOPS + ("func.call",):
            found.append(o)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE
    op.walk(visit)
    return not found


def _defined_in(v: ir.Value, op: ir.Operation) -> bool:
    """Is `v` defined inside `op` (as a block argument of or an op nested in it)?"""
    owner = v.owner
    parent = owner.owner if isinstance(owner, ir.Block) else owner.operation
    op = op.operation
    while parent is not None:
        if parent == op:
            return True
        parent = parent.parent
    return False


def _enclosing(loop: ir.Operation) -> tuple[Optional[ir.Operation], Optional[int]]:
    """The loop around `loop` that moves its streams (a row kernel's rows): its parent,
    or the op above a blocked sum's ops around its block (`blocked_sums.BLOCKS_ATTR`);
    and which branch of such an `scf.if` (one block or more) holds `loop`, if any."""
    child, parent, branch = loop, loop.parent, None
    while parent is not None and BLOCKS_ATTR in parent.attributes:
        if parent.name == "scf.if":
            branch = 0 if child.block == parent.regions[0].blocks[0] else 1
        child, parent = parent, parent.parent
    return parent, branch


def _streams(loop: ir.Operation) -> list[tuple[ir.Value, list[ir.Value]]]:
    """(memref, indices) of the loads in `loop` that stream: a memref with a unit-stride
    last dim, indexed there by the loop's induction variable (plus a constant), the other
    indices invariant in `loop` and some moving with the enclosing loop. One entry per
    distinct (memref, leading indices)."""
    parent, _ = _enclosing(loop)
    if parent is None or parent.name != "scf.for":
        return []
    iv = loop.regions[0].blocks[0].arguments[0]
    seen: dict = {}

    def visit(o: ir.Operation) -> ir.WalkResult:
        if o.name != "memref.load":
            return ir.WalkResult.ADVANCE
        buf, indices = o.operands[0], list(o.operands[1:])
        if (not indices or not _at(indices[-1], iv) or not _streamable(ir.MemRefType(buf.type))
                or any(_defined_in(i, loop) for i in indices[:-1])
                or not any(_defined_in(i, parent) for i in indices[:-1])):
            return ir.WalkResult.ADVANCE
        key = (buf, tuple(indices[:-1]))
        seen.setdefault(key, (buf, indices[:-1]))
        return ir.WalkResult.ADVANCE
    loop.walk(visit)
    return list(seen.values())


def _at(index: ir.Value, iv: ir.Value) -> bool:
    """Is `index` the induction variable `iv`, or `iv` plus a constant (an unrolled loop)?"""
    if index == iv:
        return True
    owner = index.owner
    return (not isinstance(owner, ir.Block) and owner.operation.name == "arith.addi"
            and any(a == iv for a in owner.operation.operands)
            and any(_constant(a) is not None for a in owner.operation.operands))


def _element_bytes(t: ir.MemRefType) -> int:
    elt = t.element_type
    width = elt.width if isinstance(elt, (ir.IntegerType, ir.FloatType)) else 64
    return max(1, width // 8)


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _layout(t: ir.MemRefType) -> Optional[tuple[list[int], Optional[int]]]:
    """(strides, offset) of a statically shaped and strided memref whose last dim is
    unit-stride, the offset None where it is dynamic (a kernel's slice parameter, see
    `memrefs.dynamic_offset`); else None."""
    if not t.rank or not t.has_static_shape:
        return None
    strides, offset = t.get_strides_and_offset()
    if any(t.is_dynamic_stride_or_offset(s) for s in strides) or strides[-1] != 1:
        return None
    return list(strides), None if t.is_dynamic_stride_or_offset(offset) else offset


def _streamable(t: ir.MemRefType) -> bool:
    """A memref whose last dim is unit-stride: statically laid out (`_layout`), or of
    run-time sizes or strides (`_prefetch_dynamic`)."""
    if _layout(t) is not None:
        return True
    if not t.rank:
        return False
    strides, _ = t.get_strides_and_offset()
    return strides[-1] == 1


def _prefetch_dynamic(buf: ir.Value, leading: list[ir.Value], start: ir.Value,
                      nbytes: int) -> None:
    """`_prefetch_lines` for a memref of run-time sizes or strides: the view's extent in
    its buffer from its descriptor (`memref.extract_strided_metadata`)."""
    t = ir.MemRefType(buf.type)
    elt = _element_bytes(t)
    per_line = max(1, CACHE_LINE // elt)
    lines = max(1, -(-nbytes // CACHE_LINE))
    metadata = memref.ExtractStridedMetadataOp(buf).results
    rank = t.rank
    static_strides, static_offset = t.get_strides_and_offset()
    offset = metadata[1] if t.is_dynamic_stride_or_offset(static_offset) else \
        _index(static_offset)
    sizes = [metadata[2 + k] if t.is_dynamic_dim(k) else _index(t.shape[k])
             for k in range(rank)]
    strides = [metadata[2 + rank + k] if t.is_dynamic_stride_or_offset(s) else _index(s)
               for k, s in enumerate(static_strides)]
    one = _index(1)
    extent = arith.addi(offset, one)  # offset + 1 + sum((size - 1) * stride)
    for size, stride in zip(sizes, strides):
        extent = arith.addi(extent, arith.muli(arith.subi(size, one), stride))
    dynamic = ir.ShapedType.get_dynamic_size()
    flat = memref.reinterpret_cast(ir.MemRefType.get([dynamic], t.element_type), buf, [],
                                   [extent], [], [0], [dynamic], [1])
    linear = arith.addi(start, offset)
    for i, stride in zip(leading, strides):
        linear = arith.addi(linear, arith.muli(i, stride))
    last_start = arith.maxsi(arith.subi(extent, _index(1 + (lines - 1) * per_line)), _index(0))
    first = arith.minui(arith.addi(linear, _index(PREFETCH_BYTES // elt)), last_start)
    for k in range(lines):
        at = first if k == 0 else arith.addi(first, _index(k * per_line))
        memref.prefetch(flat, [at], is_write=False, locality_hint=3, is_data_cache=True)


def _prefetch_lines(buf: ir.Value, leading: list[ir.Value], start: ir.Value, nbytes: int) -> None:
    """Prefetch the cache lines of `buf`[leading..., start:] + PREFETCH_BYTES, `nbytes`
    of them, each address clamped to the view's last element."""
    t = ir.MemRefType(buf.type)
    if _layout(t) is None:
        _prefetch_dynamic(buf, leading, start, nbytes)
        return
    elt = _element_bytes(t)
    strides, offset = _layout(t)
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, strides))
    per_line = max(1, CACHE_LINE // elt)
    lines = max(1, -(-nbytes // CACHE_LINE))
    # the underlying buffer, from its start, as one dim (the view's offset is in `linear`)
    if offset is None:
        dynamic = ir.ShapedType.get_dynamic_size()
        offset_value = memref.ExtractStridedMetadataOp(buf).results[1]
        extent = arith.addi(offset_value, _index(span))
        flat = memref.reinterpret_cast(ir.MemRefType.get([dynamic], t.element_type), buf, [],
                                       [extent], [], [0], [dynamic], [1])
        linear = arith.addi(start, offset_value)
        last_start = arith.maxsi(arith.subi(extent, _index(1 + (lines - 1) * per_line)),
                                 _index(0))
    else:
        extent = offset + span
        flat = memref.reinterpret_cast(ir.MemRefType.get([extent], t.element_type), buf, [],
                                       [], [], [0], [extent], [1])
        linear = arith.addi(start, _index(offset)) if offset else start
        last_start = _index(max(0, extent - 1 - (lines - 1) * per_line))
    for i, stride in zip(leading, strides):
        linear = arith.addi(linear, arith.muli(i, _index(stride)))
    first = arith.minui(arith.addi(linear, _index(PREFETCH_BYTES // elt)), last_start)
    for k in range(lines):
        at = first if k == 0 else arith.addi(first, _index(k * per_line))
        memref.prefetch(flat, [at], is_write=False, locality_hint=3, is_data_cache=True)


def _strip_mine(loop: ir.Operation, chunk: int) -> ir.Operation:
    """for j in [lo, hi) -> for jj in [lo, hi) step chunk { for j in [jj, jj + chunk) }
    (the upper bound min(jj + chunk, hi) unless chunk divides a constant trip count).
    Returns the chunk loop, the old loop nested in it."""
    lo, hi, _ = loop.operands[0], loop.operands[1], loop.operands[2]
    inits = list(loop.operands[3:])
    lo_c, hi_c = _constant(lo), _constant(hi)
    exact = lo_c is not None and hi_c is not None and (hi_c - lo_c) % chunk == 0
    with ir.InsertionPoint(loop), loop.location:
        outer = scf.ForOp(lo, hi, _index(chunk), inits)
    block = outer.body
    with ir.InsertionPoint(block), loop.location:
        jj = outer.induction_variable
        end = arith.addi(jj, _index(chunk))
        if not exact:
            end = arith.minsi(end, hi)
        done = scf.YieldOp(list(loop.results))
    loop.move_before(done)
    for old, new in zip(list(loop.results), outer.results):
        for use in list(old.uses):
            if use.owner != done:
                use.owner.operands[use.operand_number] = new
    loop.operands[0] = jj
    loop.operands[1] = end
    for i, arg in enumerate(block.arguments[1:]):
        loop.operands[3 + i] = arg
    return outer.operation


def _prefetch_loop(loop: ir.Operation, done: set) -> bool:
    """Prefetch `loop`'s streams that no earlier loop in the same enclosing loop did (a
    row kernel's later loops over the row find it in cache), the two branches of a
    blocked sum's choice being alternatives, not earlier; `done` holds those."""
    parent, branch = _enclosing(loop)
    streams = [(b, lead) for b, lead in _streams(loop)
               if (parent, branch, b, tuple(lead)) not in done
               and 0 not in ir.MemRefType(b.type).shape]
    step = _constant(loop.operands[2])
    if not streams or step is None or step < 1:
        return False
    elt = max(_element_bytes(ir.MemRefType(b.type)) for b, _ in streams)
    chunk = max(1, CHUNK_BYTES // elt // step) * step
    done.update((parent, key, b, tuple(lead)) for b, lead in streams for key in (branch, None))
    lo, hi = _constant(loop.operands[0]), _constant(loop.operands[1])
    short = lo is not None and hi is not None and hi - lo <= chunk
    if short and hi <= lo:
        return False
    if BLOCK_ATTR in loop.attributes:  # a blocked sum's block: a chunk already
        start, count = loop.operands[0], ir.IntegerAttr(loop.attributes[BLOCK_ATTR]).value
    elif short:
        start, count = loop.operands[0], hi - lo
    else:
        start, count = _strip_mine(loop, chunk).regions[0].blocks[0].arguments[0], chunk
    with ir.InsertionPoint(loop), loop.location:
        for buf, leading in streams:
            _prefetch_lines(buf, leading, start, count * _element_bytes(ir.MemRefType(buf.type)))
    return True


def prefetch_streams(module: ir.Operation) -> None:
    loops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.for" and _innermost(op):
            loops.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    done: set = set()
    for loop in loops:
        _prefetch_loop(loop, done)

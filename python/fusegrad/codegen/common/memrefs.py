"""Facts about memref values that the CPU and GPU kernel passes share: which
buffer a view aliases, whether a buffer is contiguous, whether two loop ops
touch a buffer only row by row."""
from __future__ import annotations

import functools
import math
from typing import Optional

from mlir import ir
from mlir.dialects import memref

# (a memref.reshape, which dg-lower-to-linalg's tensor.reshape of run-time sizes becomes,
# is a view of its first operand: the second is its shape)
VIEWS = ("memref.expand_shape", "memref.collapse_shape", "memref.subview", "memref.cast",
         "memref.reinterpret_cast", "memref.reshape")

# integer ops on sizes (all >= 0, so signed and unsigned agree), with `memref.dim` and
# `affine.apply` the ops computing sizes from a function's arguments: the CUDA launch plan
# evaluates them on the host (cuda/host_sizes.py), dg-plan-workspace clones them
SIZE_ARITH = ("arith.addi", "arith.subi", "arith.muli", "arith.divui", "arith.divsi",
              "arith.floordivsi", "arith.ceildivui", "arith.ceildivsi", "arith.remui",
              "arith.remsi", "arith.minui", "arith.minsi", "arith.maxui", "arith.maxsi")
SIZE_OPS = ("memref.dim", "affine.apply", *SIZE_ARITH, "arith.index_cast",
            "arith.index_castui")

# per buffer dim: the loop dim indexing it, None for the constant index 0, or (GPU kernels'
# inputs only, `cpu_kernels.parse(affine_ins=True)`) another affine expression of the dims
Access = tuple


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
                work.extend(_derived(user))
    return ops, deallocs


def _derived(op: ir.Operation) -> list[ir.Value]:
    """The results of `op` (which uses a buffer) that carry the buffer on: all but its
    sizes, which are numbers (a buffer sized by another's dim does not touch it)."""
    if op.name == "memref.dim":
        return []
    if op.name == "memref.extract_strided_metadata":
        return [op.results[0]]
    return list(op.results)


def first_in_block(ops: list[ir.Operation], last: bool = False) -> ir.Operation:
    """The one of `ops` (non-empty, all in one block) that comes first (`last`: last), in
    one scan."""
    found = ops[0]
    for op in ops[1:]:
        if found.is_before_in_block(op) if last else op.is_before_in_block(found):
            found = op
    return found


def last_in_block(ops: list[ir.Operation]) -> ir.Operation:
    return first_in_block(ops, last=True)


def dynamic_offset(t: ir.Type) -> ir.Type:
    """`t` with its offset dynamic when it is a strided memref: the type an outlined
    function takes it as, so that the same code over slices at different offsets (the
    time steps of an unrolled RNN) is one function."""
    if not isinstance(t, ir.MemRefType) or not isinstance(t.layout, ir.StridedLayoutAttr):
        return t
    layout = ir.StridedLayoutAttr(t.layout)
    dynamic = ir.ShapedType.get_dynamic_stride_or_offset()
    if layout.offset == dynamic:
        return t
    return ir.MemRefType.get(list(t.shape), t.element_type,
                             ir.StridedLayoutAttr.get(dynamic, list(layout.strides)),
                             t.memory_space)


def passed_as(values: list[ir.Value], types: list[ir.Type]) -> list[ir.Value]:
    """`values` as arguments of parameters of `types` (at the current insertion point):
    `memref.cast` where a type differs (a slice's offset made dynamic)."""
    return [v if t == v.type else memref.CastOp(t, v).result for v, t in zip(values, types)]


def static_memref(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType) and t.has_static_shape


def static_layout(t: ir.MemRefType) -> Optional[tuple[list[int], int]]:
    """(strides, offset) of a statically shaped memref whose strides and offset are static
    too, else None."""
    if not t.has_static_shape:
        return None
    strides, offset = t.get_strides_and_offset()
    if any(t.is_dynamic_stride_or_offset(v) for v in [*strides, offset]):
        return None
    return list(strides), offset


def contiguous_memref(t: ir.Type) -> bool:
    """A statically shaped memref with row-major strides and offset 0."""
    return row_major_offset(t) == 0


def dense_memref(t: ir.Type) -> bool:
    """A memref whose elements lie row-major from offset 0, of any sizes: contiguous, or
    of the identity layout (what bufferization gives function arguments)."""
    if not isinstance(t, ir.MemRefType):
        return False
    layout = ir.MemRefType(t).layout
    return contiguous_memref(t) or (
        isinstance(layout, ir.AffineMapAttr)
        and ir.AffineMapAttr(layout).value == ir.AffineMap.get_identity(ir.MemRefType(t).rank))


def row_major_offset(t: ir.Type) -> Optional[int]:
    """The static offset of a statically shaped memref with row-major strides (a
    contiguous block somewhere in its buffer: one part of a split), else None."""
    if not static_memref(t):
        return None
    layout = static_layout(t)
    if layout is None:
        return None
    strides, offset = layout
    expected, acc = [], 1
    for size in reversed(t.shape):
        expected.insert(0, acc)
        acc *= size
    return offset if strides == expected or t.rank == 0 else None


def row_local(acc: Optional[Access]) -> bool:
    """Is the buffer's dim 0 indexed by loop dim 0 (each row touches only its own row)?"""
    return acc is not None and len(acc) > 0 and acc[0] == 0


def row_conflict(group, op, sizes=None) -> bool:
    """Would running loop op `op` row by row with the loop ops of `group` change what any
    of them reads? (Loop ops expose `buffers()`: (buffer, access, writes?) triples.)
    `sizes` (a `loops.SizeClasses`) proves views of run-time sizes keep rows."""
    for b, acc_b, writes_b in op.buffers():
        root = buffer_root(b)
        for member in group:
            for a, acc_a, writes_a in member.buffers():
                if buffer_root(a) != root or not (writes_a or writes_b):
                    continue
                if not (row_local(acc_a) and row_local(acc_b)) or \
                        (a != b and not (keeps_rows(a, sizes) and keeps_rows(b, sizes))):
                    return True
    return False


def keeps_rows(v: ir.Value, sizes=None) -> bool:
    """Is `v` its buffer, or a view of it that only merges dims after dim 0 or slices them
    (a concatenation's part), so view row i is buffer row i? With `sizes`, views of
    run-time sizes too (`_keeps_rows_dynamic`)."""
    while not isinstance(v.owner, ir.Block) and v.owner.operation.name in VIEWS:
        view = v.owner.operation
        if sizes is not None and not (ir.MemRefType(v.type).has_static_shape and
                                      ir.MemRefType(view.operands[0].type).has_static_shape):
            if not _keeps_rows_dynamic(view, sizes):
                return False
        elif view.name == "memref.subview":
            attrs = view.attributes
            source = ir.MemRefType(view.operands[0].type)
            if len(view.operands) > 1 or ir.MemRefType(v.type).rank != source.rank or \
                    list(ir.DenseI64ArrayAttr(attrs["static_offsets"]))[0] != 0 or \
                    list(ir.DenseI64ArrayAttr(attrs["static_sizes"]))[0] != source.shape[0] or \
                    list(ir.DenseI64ArrayAttr(attrs["static_strides"]))[0] != 1:
                return False
        elif view.name == "memref.collapse_shape":
            first = ir.ArrayAttr(view.attributes["reassociation"])[0]
            if [ir.IntegerAttr(d).value for d in ir.ArrayAttr(first)] != [0]:
                return False
        else:
            return False
        v = view.operands[0]
    return True


def _keeps_rows_dynamic(view: ir.Operation, sizes) -> bool:
    """`keeps_rows` for a view of run-time sizes: a subview at offset 0 and step 1 in dim
    0 whose dim 0 is its source's, a collapse or expand that keeps dim 0 apart, or a
    reshape of a contiguous buffer whose dim 0 is its source's (each then holds the same
    number of elements per row); dims equal as `sizes` proves them."""
    source, result = view.operands[0], view.results[0]
    st, rt = ir.MemRefType(source.type), ir.MemRefType(result.type)
    if not st.rank or not rt.rank:
        return False

    def same_rows() -> bool:
        if st.is_static_dim(0) or rt.is_static_dim(0):
            return st.is_static_dim(0) and rt.is_static_dim(0) and st.shape[0] == rt.shape[0]
        return sizes.same((source, 0), (result, 0))
    if view.name == "memref.subview":
        attrs = view.attributes
        return rt.rank == st.rank and \
            list(ir.DenseI64ArrayAttr(attrs["static_offsets"]))[0] == 0 and \
            list(ir.DenseI64ArrayAttr(attrs["static_strides"]))[0] == 1 and same_rows()
    if view.name in ("memref.collapse_shape", "memref.expand_shape"):
        first = ir.ArrayAttr(view.attributes["reassociation"])[0]
        return [ir.IntegerAttr(d).value for d in ir.ArrayAttr(first)] == [0]
    if view.name == "memref.reshape":
        return same_rows()  # (a reshape's source and result are contiguous)
    if view.name == "memref.cast":
        return rt.rank == st.rank and same_rows()
    return False


def zero_fill_of(op: ir.Operation, root: ir.Value) -> bool:
    """Is `op` a linalg.fill of zeros over all of buffer `root`?"""
    if not zero_fill(op):
        return False
    out = op.operands[1]
    return buffer_root(out) == root and math.prod(out.type.shape) == math.prod(root.type.shape)


def zero_fill(op: ir.Operation) -> bool:
    """Is `op` a linalg.fill of zeros (into whatever view it fills)?"""
    if op.name != "linalg.fill":
        return False
    value = op.operands[0].owner
    return not isinstance(value, ir.Block) and value.operation.name == "arith.constant" and \
        ir.FloatAttr(value.operation.attributes["value"]).value == 0.0


def reads_only(op: ir.Operation, root: ir.Value) -> bool:
    """Does `op` (a top-level op touching buffer `root`) only read it?"""
    if op.name == "memref.copy":
        return buffer_root(op.operands[1]) != root
    if op.name in ("linalg.generic", "linalg.matmul", "linalg.batch_matmul", "linalg.transpose"):
        outs = [op.operands[1]] if op.name == "linalg.transpose" else list(op.opview.outputs)
        return all(buffer_root(v) != root for v in outs)
    return False


def touching_before(root: ir.Value, op: ir.Operation) -> list[ir.Operation] | None:
    """The ops of `op`'s block before `op` that touch buffer `root`, last first; None when
    the buffer escapes."""
    touching = touching_ops(root, op.block)
    if touching is None:
        return None
    # MLIR's own block order (cached in the block), not an index of the block's ops per
    # call: that was quadratic in a graph's matmuls (0.4 s on a 6-layer GPT-2)
    earlier = list({o: None for o in touching[0] if o.is_before_in_block(op)})
    return sorted(earlier, key=functools.cmp_to_key(
        lambda x, y: 0 if x == y else (1 if x.is_before_in_block(y) else -1)))


def zero_init(op: ir.Operation, out: ir.Value) -> ir.Operation | None:
    """The op that zeroes all of `op`'s output `out` just before it (nothing touches the
    output in between): a zero fill of it, or a copy of a zero-filled buffer into it.
    A library call that overwrites `out` (a gemm with beta = 0, a convolution) makes
    that op dead."""
    root = buffer_root(out)
    earlier = touching_before(root, op) if math.prod(out.type.shape) == \
        math.prod(root.type.shape) else None
    if not earlier:
        return None
    init = earlier[0]
    if zero_fill_of(init, root):
        return init
    if init.name != "memref.copy" or buffer_root(init.operands[1]) != root or \
            math.prod(init.operands[1].type.shape) != math.prod(root.type.shape):
        return None
    # the copied buffer holds zeros: its last writer before the copy is a zero fill
    source = buffer_root(init.operands[0])
    writers = [o for o in touching_before(source, init) or [] if not reads_only(o, source)]
    return init if writers and zero_fill_of(writers[0], source) else None


def erase_init(init: ir.Operation) -> None:
    """Erase a zero fill or copy (and the zero-filled buffer, if a copy was its last use)."""
    source = buffer_root(init.operands[0]) if init.name == "memref.copy" else None
    init.erase()
    if source is None or isinstance(source.owner, ir.Block) or \
            source.owner.operation.name != "memref.alloc":
        return
    users = [u.owner.operation for u in source.uses]
    if all(u.name in ("linalg.fill", "memref.dealloc") for u in users):
        erase_buffer(source)


def erase_buffer(buf: ir.Value) -> None:
    for u in list(buf.uses):
        u.owner.operation.erase()  # deallocs
    buf.owner.operation.erase()


def overwrites(op: ir.Operation, buf: ir.Value) -> bool:
    """Does `op` write every element of `buf` without reading it (so `buf`'s earlier
    contents are dead once `op` runs)?"""
    if op.name not in ("linalg.generic", "linalg.fill", "linalg.transpose", "linalg.copy") or \
            list(op.operands).count(buf) != 1 or op.operands[len(op.operands) - 1] != buf:
        return False
    if op.name != "linalg.generic":
        return True
    g = op.opview
    if len(g.outputs) != 1 or any(str(t) != "#linalg.iterator_type<parallel>"
                                  for t in g.iterator_types):
        return False
    out_map = ir.AffineMapAttr(g.indexing_maps[len(g.indexing_maps) - 1]).value
    body = g.regions[0].blocks[0]
    return out_map == ir.AffineMap.get_identity(out_map.n_dims) and \
        not list(body.arguments[len(body.arguments) - 1].uses)


def untouched_between(buf: ir.Value, first: ir.Operation, last: ir.Operation) -> bool:
    """Does no op strictly between `first` and `last` (one block) use `buf`'s memory, itself
    or in its regions? Reading `buf` at `last` instead of `first` (or writing it at
    `first`) is then the same. Follows the buffer's uses, not the block's ops: a big
    entry block has thousands (MobileViT's dg-matmul-to-blas: 0.28 s in 147 scans)."""
    if first.block != last.block or not first.is_before_in_block(last):
        return False
    block = first.block
    seen, work = set(), [buffer_root(buf)]
    while work:
        for use in work.pop().uses:
            user = use.owner.operation
            if user in seen or user.name == "memref.dim":  # (a size, not an element)
                continue
            seen.add(user)
            top = _in_block(user, block)
            if top is None:
                return False
            if top != first and top != last and first.is_before_in_block(top) \
                    and top.is_before_in_block(last):
                return False
            work.extend(user.results)
    return True

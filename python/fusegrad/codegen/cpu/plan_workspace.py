"""dg-plan-workspace: an entry's temporaries share one workspace, packed by liveness.

Bufferization's deallocation frees every temporary at the end of its function,
so all of a backward's temporaries are live at once (137 MiB in a small LLaMA's
backward), and each is a fresh `malloc`: with glibc's defaults, large blocks
are mmapped, so every call page-faults them in again. Eager PyTorch frees an
intermediate after its last use; a compiler knows every buffer's lifetime
ahead of time and can do better than a general allocator.

This pass gives each public entry function one trailing argument, its
workspace (`memref<N x i8>`), and turns each statically shaped `memref.alloc`
at the top level of the entry into a `memref.view` of the workspace at a
fixed offset. Offsets come from the buffers' live ranges (first to last
top-level op that touches the buffer or anything derived from it): buffers
live at the same time never overlap; greedy by size, largest first, each at
the lowest offset that fits (TFLite's arena planner). The runtime passes one
buffer per thread, kept between calls (`runtime.cpu`), so steady-state calls
neither allocate nor fault. The module attribute `WORKSPACES_ATTR` maps each
such entry to its workspace size in bytes.

Temporaries of run-time sizes (a program compiled for every size) are planned too, or
each call would `malloc` them, all live at once, and with glibc's defaults page-fault
them in again (a transformer layer's training step at run-time sizes: 12K faults per
step, 1.3x the static program's time). Their sizes are computed at the entry's start
(the size ops feeding their allocs, cloned there). They are packed at the size hints
first; in the order of that layout, each then goes above the buffers live with it that
lie below it there, at an offset computed from the sizes: no two live buffers overlap
at any sizes, and at the hints the layout is as tight as a static one (a transformer
layer's backward: 27 MiB, 36 when each went above every buffer live with it). Such
an entry's workspace is `memref<?xi8>`, whose size is the buffer the runtime passes
(`GROWING_ATTR` names these entries): its first HEADER bytes hold the bytes the call
needs, which the entry writes first; when they exceed what it was given, it runs on a
`malloc`ed block of that size instead, and the runtime grows its buffer for the calls
that follow. `WORKSPACES_ATTR` holds the bytes such an entry needs before those of
run-time size. A size read from a temporary or a reshape of one (a row kernel's partial
sums over a collapsed buffer) is computed from the sizes it comes from; reading it does
not extend the temporary's live range. Before this, a transformer layer's backward at
run-time sizes left 19 temporaries to `malloc` (9 MiB more at its step's peak than the
static program); kernels still allocate their row buffers of run-time width.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, memref, scf

from ...dialects.types import TensorSpec, dtype_of
from ...dialects.core import is_public
from ..common.loops import DEFAULT_SIZE_HINT
from ..common.memrefs import SIZE_OPS, contiguous_memref, touching_ops


log = logging.getLogger(__name__)

WORKSPACES_ATTR = "dg.workspaces"
GROWING_ATTR = "dg.growing_workspaces"  # entries whose workspace holds run-time sizes
ALIGNMENT = 64  # bytes: what bufferization asks of allocs, a cache line, an AVX-512 vector
HEADER = ALIGNMENT  # a growing workspace's first bytes: the i64 bytes its call needs


@dataclass
class _Buffer:
    alloc: ir.Operation
    deallocs: list[ir.Operation]
    start: int  # first and last top-level op that touch it
    end: int
    size: int  # bytes, rounded up to ALIGNMENT (of a run-time size: at the size hints)
    offset: int = -1
    dynamic: bool = False  # of run-time size: offset and size are computed by the entry


def _element_bytes(t: ir.MemRefType) -> Optional[int]:
    if isinstance(t.element_type, ir.IndexType):  # a reshape's shape: 64-bit hosts only
        return 8
    try:
        return TensorSpec((), dtype_of(t.element_type)).nbytes
    except TypeError:  # an element type dg has no dtype for
        return None


def _aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


def _buffer(alloc: ir.Operation, position: dict) -> Optional[_Buffer]:
    """The live range of a top-level alloc; None when it cannot be planned (strided
    type, escapes through a return, freed elsewhere or more than once)."""
    t = ir.MemRefType(alloc.results[0].type)
    item = _element_bytes(t)
    if item is None:
        return None
    if alloc.operands:  # run-time sizes: row-major, sized by its operands
        layout = t.layout
        if not isinstance(layout, ir.AffineMapAttr) or \
                layout.value != ir.AffineMap.get_identity(t.rank) or \
                len(alloc.operands) != sum(ir.ShapedType.is_dynamic_size(d) for d in t.shape):
            return None
        dims = [DEFAULT_SIZE_HINT if ir.ShapedType.is_dynamic_size(d) else d for d in t.shape]
    elif contiguous_memref(t):
        dims = list(t.shape)
    else:
        return None
    touching = touching_ops(alloc.results[0], alloc.block)
    if touching is None or len(touching[1]) != 1 or not touching[0]:
        return None
    ops, deallocs = touching
    touched = [position[op] for op in ops]
    nbytes = item
    for d in dims:
        nbytes *= d
    return _Buffer(alloc, deallocs, min(touched), max(touched), _aligned(nbytes),
                   dynamic=bool(alloc.operands))


def pack(buffers: list[_Buffer]) -> int:
    """Assign offsets so that buffers with overlapping live ranges never overlap in
    memory; returns the workspace size."""
    placed: list[_Buffer] = []
    for b in sorted(buffers, key=lambda b: (-b.size, b.start)):
        offset = 0
        for other in sorted((p for p in placed if p.start <= b.end and b.start <= p.end),
                            key=lambda p: p.offset):
            if other.offset - offset >= b.size:
                break
            offset = max(offset, other.offset + other.size)
        b.offset = offset
        placed.append(b)
    return max((b.offset + b.size for b in placed), default=0)


class _StartValues:
    """Index values of an entry computed again at its start (before `first`): the size
    ops feeding them, down to the entry's arguments, cloned there."""

    def __init__(self, block: ir.Block) -> None:
        self.block = block
        self.first = block.operations[0]
        self.cloned: dict = {}

    def value(self, v: ir.Value) -> Optional[ir.Value]:
        """`v` at the start, or None when it depends on more than sizes (a loaded value)."""
        if isinstance(v.owner, ir.Block):
            return v if v.owner == self.block else None
        if v in self.cloned:
            return self.cloned[v]
        op = v.owner.operation
        if op.name not in ("arith.constant", *SIZE_OPS) or op.regions or len(op.results) != 1:
            return None
        if op.name == "memref.dim" and not isinstance(op.operands[0].owner, ir.Block):
            k = self._constant(op.operands[1])
            found = None if k is None else self._dim(op.operands[0], k)
            if found is None:
                return None
        else:
            operands = [self.value(o) for o in op.operands]
            if any(o is None for o in operands):
                return None
            clone = op.clone(ir.InsertionPoint(self.first))
            for i, o in enumerate(operands):
                clone.operands[i] = o
            found = clone.results[0]
        self.cloned[v] = found
        return found

    def _dim(self, buffer: ir.Value, k: int) -> Optional[ir.Value]:
        """Dim `k` of `buffer` (an alloc, or a reshape of one or of an argument) at the
        start: an alloc's size operand, a collapse's product of the dims it merges, an
        expand's output size."""
        t = ir.MemRefType(buffer.type)
        if not ir.ShapedType.is_dynamic_size(t.shape[k]):
            with ir.InsertionPoint(self.first), buffer.location:
                return _index(t.shape[k])
        if isinstance(buffer.owner, ir.Block):
            if buffer.owner != self.block:
                return None
            with ir.InsertionPoint(self.first), buffer.location:
                return memref.DimOp(buffer, _index(k)).result
        source = buffer.owner.operation
        at = sum(ir.ShapedType.is_dynamic_size(d) for d in t.shape[:k])
        if source.name == "memref.alloc":
            return self.value(source.operands[at])
        if source.name == "memref.expand_shape":  # its operands: the source, output sizes
            return self.value(source.operands[1 + at])
        if source.name == "memref.collapse_shape":
            group = ir.ArrayAttr(source.attributes["reassociation"])[k]
            dims = [self._dim(source.operands[0], ir.IntegerAttr(j).value) for j in group]
            if any(d is None for d in dims):
                return None
            with ir.InsertionPoint(self.first), buffer.location:
                product = dims[0]
                for d in dims[1:]:
                    product = arith.muli(product, d)
            return product
        return None

    @staticmethod
    def _constant(v: ir.Value) -> Optional[int]:
        if isinstance(v.owner, ir.Block) or v.owner.operation.name != "arith.constant":
            return None
        return ir.IntegerAttr(v.owner.operation.attributes["value"]).value


def _bytes_at_start(b: _Buffer, start: _StartValues) -> Optional[ir.Value]:
    """The bytes of `b` (run-time sizes), rounded up to ALIGNMENT, computed at the start."""
    t = ir.MemRefType(b.alloc.results[0].type)
    sizes = [start.value(v) for v in b.alloc.operands]
    if any(v is None for v in sizes):
        return None
    with ir.InsertionPoint(start.first), b.alloc.location:
        dynamic = iter(sizes)
        nbytes = _index(_element_bytes(t))
        for d in t.shape:
            dim = next(dynamic) if ir.ShapedType.is_dynamic_size(d) else _index(d)
            nbytes = arith.muli(nbytes, dim)
        rounded = arith.addi(nbytes, _index(ALIGNMENT - 1))
        return arith.muli(arith.divui(rounded, _index(ALIGNMENT)), _index(ALIGNMENT))


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _replace(b: _Buffer, workspace: ir.Value, offset: ir.Value) -> None:
    """`b`'s alloc -> a view of `workspace` at `offset` (its deallocs go)."""
    with ir.InsertionPoint(b.alloc), b.alloc.location:
        view = memref.ViewOp(b.alloc.results[0].type, workspace, offset,
                             list(b.alloc.operands)).result
    b.alloc.results[0].replace_all_uses_with(view)
    for d in b.deallocs:
        d.erase()
    b.alloc.erase()


def _add_workspace_argument(fn: ir.Operation, workspace_type: ir.Type) -> ir.Value:
    workspace = fn.regions[0].blocks[0].add_argument(workspace_type, fn.location)
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    fn.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([*ftype.inputs, workspace_type], ftype.results))
    return workspace


def _erase_unused_allocs(block: ir.Block) -> None:
    """Allocs only freed (the library passes read some operands in place and leave the
    buffer the copy went to): each would be a malloc and a free per call for nothing."""
    for op in list(block.operations):
        op = op.operation
        if op.name == "memref.alloc" and all(
                u.owner.operation.name == "memref.dealloc" for u in op.results[0].uses):
            for u in list(op.results[0].uses):
                u.owner.operation.erase()
            op.erase()


def _plan(fn: ir.Operation) -> tuple[int, bool]:
    """Move `fn`'s temporaries into a workspace argument; returns its size in bytes (for
    a growing one, GROWING_ATTR, what it needs at least) and whether it grows."""
    blocks = list(fn.regions[0].blocks)
    block = blocks[0]
    _erase_unused_allocs(block)
    ops = [op.operation for op in block.operations]
    position = {op: k for k, op in enumerate(ops)}
    buffers = [b for op in ops if op.name == "memref.alloc"
               for b in [_buffer(op, position)] if b is not None]
    if len(blocks) != 1:
        buffers = [b for b in buffers if not b.dynamic]
    start = _StartValues(block) if any(b.dynamic for b in buffers) else None
    dynamic_bytes = {}
    for b in buffers:
        if b.dynamic:
            nbytes = _bytes_at_start(b, start)
            if nbytes is not None:
                dynamic_bytes[b.alloc] = nbytes
    buffers = [b for b in buffers if not b.dynamic or b.alloc in dynamic_bytes]
    if not buffers:
        return 0, False
    static = [b for b in buffers if not b.dynamic]
    dynamic = [b for b in buffers if b.dynamic]
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    if not dynamic:
        total = pack(static)
        workspace = _add_workspace_argument(
            fn, ir.MemRefType.get([total], ir.IntegerType.get_signless(8)))
        for b in static:
            with ir.InsertionPoint(b.alloc), b.alloc.location:
                offset = _index(b.offset)
            _replace(b, workspace, offset)
        log.debug("@%s: %d temporaries, %d bytes allocated, workspace %d bytes", name,
                  len(buffers), sum(b.size for b in buffers), total)
        return total, False
    return _plan_growing(fn, static, dynamic, dynamic_bytes, start), True


def _plan_growing(fn: ir.Operation, static: list[_Buffer], dynamic: list[_Buffer],
                  dynamic_bytes: dict, start: _StartValues) -> int:
    """The workspace of an entry with temporaries of run-time sizes (module docstring):
    HEADER, the static ones packed, then each run-time one above the buffers live with
    it that lie below it in their layout at the size hints. Returns the bytes
    before the run-time ones: what a call needs at least."""
    i8 = ir.IntegerType.get_signless(8)
    workspace = _add_workspace_argument(
        fn, ir.MemRefType.get([ir.ShapedType.get_dynamic_size()], i8))
    static_end = HEADER + pack(static)
    placed: list[_Buffer] = []
    offsets: dict = {}  # dynamic alloc -> (offset value, end value)
    with ir.InsertionPoint(start.first), fn.location:
        base_offset = _index(static_end)
        total = base_offset
        pack(dynamic)  # the layout at the size hints orders them: each goes above those
        for b in sorted(dynamic, key=lambda b: (b.offset, b.start)):  # below it there
            offset = base_offset
            for p in placed:
                if p.start <= b.end and b.start <= p.end:
                    offset = arith.maxui(offset, offsets[p.alloc][1])
            end = arith.addi(offset, dynamic_bytes[b.alloc])
            offsets[b.alloc] = (offset, end)
            total = arith.maxui(total, end)
            placed.append(b)
        # the bytes this call needs, in the header of the buffer passed; a larger call
        # runs on a block of its own
        header = memref.ViewOp(ir.MemRefType.get([1], ir.IntegerType.get_signless(64)),
                               workspace, _index(0), []).result
        memref.StoreOp(arith.index_cast(ir.IntegerType.get_signless(64), total), header,
                       [_index(0)])
        capacity = memref.DimOp(workspace, _index(0)).result
        fits = arith.cmpi(arith.CmpIPredicate.ule, total, capacity)
        choice = scf.IfOp(fits, [workspace.type], has_else=True)
        with ir.InsertionPoint(choice.then_block):
            scf.YieldOp([workspace])
        with ir.InsertionPoint(choice.else_block):
            own = memref.AllocOp(workspace.type, [total], [])
            own.attributes["alignment"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                             ALIGNMENT)
            scf.YieldOp([own.result])
        memory = choice.results[0]
        static_offsets = {b.alloc: _index(HEADER + b.offset) for b in static}
    for b in static:
        _replace(b, memory, static_offsets[b.alloc])
    for b in dynamic:
        _replace(b, memory, offsets[b.alloc][0])
    block = fn.regions[0].blocks[0]
    with ir.InsertionPoint(block.operations[len(block.operations) - 1]), fn.location:
        own = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ugt, total, capacity))
        with ir.InsertionPoint(own.then_block):
            memref.DeallocOp(memory)
            scf.YieldOp([])
    log.debug("@%s: %d temporaries (%d of run-time sizes), workspace of %d bytes and those of "
              "run-time size", ir.StringAttr(fn.attributes["sym_name"]).value,
              len(static) + len(dynamic), len(dynamic), static_end)
    return static_end


def plan_workspace(module: ir.Operation) -> None:
    sizes, growing = {}, []
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and op.regions[0].blocks and is_public(op):
            size, grows = _plan(op)
            name = ir.StringAttr(op.attributes["sym_name"]).value
            if size:
                sizes[name] = size
            if grows:
                growing.append(name)
    if sizes:
        i64 = ir.IntegerType.get_signless(64)
        module.attributes[WORKSPACES_ATTR] = ir.DictAttr.get(
            {name: ir.IntegerAttr.get(i64, size) for name, size in sizes.items()})
    if growing:
        module.attributes[GROWING_ATTR] = ir.ArrayAttr.get(
            [ir.StringAttr.get(name) for name in growing])


def workspaces(module: ir.Operation) -> dict[str, int]:
    """Entry -> workspace bytes, as recorded by dg-plan-workspace (negated for a growing
    workspace: `runtime.cpu.CpuFunction`'s convention)."""
    if WORKSPACES_ATTR not in module.attributes:
        return {}
    attrs = ir.DictAttr(module.attributes[WORKSPACES_ATTR])
    growing = {ir.StringAttr(a).value for a in ir.ArrayAttr(module.attributes[GROWING_ATTR])} \
        if GROWING_ATTR in module.attributes else set()
    return {attrs[k].name: ir.IntegerAttr(attrs[k].attr).value *
            (-1 if attrs[k].name in growing else 1) for k in range(len(attrs))}

"""Run-time sizes in dg-gpu-kernels: a program compiled once for every size.

After bufferization such a program holds memrefs like `memref<?x1024xf32>`, whose `?`
sizes the host function reads (`memref.dim` of its arguments, allocations' size
operands, `arith` on them). The kernel templates take a loop op's sizes as extents:
an int where the size is static, else the host `index` value of the size (`extents`).
Grids are computed from them on the host, loop bounds in the kernels; the launch plan
turns each host size into an expression of the program's symbols
(`host_sizes.HostSizes`), which the runtime evaluates at every call's sizes. Static
sizes stay ints throughout, so static kernels are emitted exactly as before.

- `extents`: loop sizes (ints, `loops.DynSize`s) as extents, read on the host.
- `reshapes_as_casts`: a `memref.reshape` (of two run-time sizes in a group), whose
  shape the host stores into a buffer, becomes a `memref.reinterpret_cast` taking the
  stored values, so no shape buffer reaches device memory and a kernel recomputes
  the view from its sizes.
- `pass_sizes`: what a kernel takes of run-time sizes. The bare-pointer ABI converts
  only memrefs of static shape, so a buffer of run-time sizes is passed as a 0-d
  memref (its pointer) and viewed again inside the kernel at its sizes; each size a
  kernel uses is an i64 parameter, cast on the host (`gpu-launch-sink-index-computations`
  would sink a `memref.dim` into the kernel, where a bare pointer has no sizes).
"""
from __future__ import annotations

from typing import Sequence, Union

from mlir import ir
from mlir.dialects import arith, memref

from ...passes import PassError
from ..common.loops import DynSize, SizeClasses

# a loop size in a kernel template: an int, or the host `index` value of a run-time size
Extent = Union[int, ir.Value]


def index(size: Extent) -> ir.Value:
    """`size` as an `index` value (a constant at the insertion point when static)."""
    if isinstance(size, int):
        return arith.ConstantOp(ir.IndexType.get(), size).result
    return size


def product(sizes: Sequence[Extent]) -> Extent:
    """The product of `sizes`: an int when all are static."""
    static, values = 1, []
    for s in sizes:
        if isinstance(s, int):
            static *= s
        else:
            values.append(s)
    if not values:
        return static
    out = values[0]
    for v in values[1:]:
        out = arith.muli(out, v)
    return out if static == 1 else arith.muli(out, index(static))


def ceil_div(a: Extent, b: Extent) -> Extent:
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return arith.ceildivui(index(a), index(b))


def minimum(a: Extent, b: int) -> Extent:
    if isinstance(a, int):
        return min(a, b)
    return arith.minui(a, index(b))


def is_empty(size: Extent) -> bool:
    """Is `size` statically 0 (a loop of no iteration)?"""
    return isinstance(size, int) and size == 0


def extents(sizes: Sequence, read: dict) -> list[Extent]:
    """Loop sizes (ints, `DynSize`s) as extents, a run-time size read at the insertion
    point (on the host) from the first operand dim that has it: an allocation's size
    operand, else `memref.dim`. `read`: DynSize key -> its value, shared by the ops of
    one kernel, so that a size is one kernel parameter."""
    out: list[Extent] = []
    for size in sizes:
        if not isinstance(size, DynSize):
            out.append(size)
            continue
        if size.key not in read:
            read[size.key] = dim_value(*size.sources[0])
        out.append(read[size.key])
    return out


def dim_value(buffer: ir.Value, d: int) -> ir.Value:
    """The host value of dynamic dim `d` of `buffer`."""
    owner = buffer.owner
    if not isinstance(owner, ir.Block) and owner.operation.name == "memref.alloc":
        shape = ir.MemRefType(buffer.type).shape
        k = sum(ir.ShapedType.is_dynamic_size(s) for s in shape[:d])
        return owner.operation.operands[k]
    return memref.DimOp(buffer, index(d)).result


def reshapes_as_casts(block: ir.Block) -> None:
    """Each `memref.reshape` whose shape buffer is an allocation the host fills with one
    store per dim (dg-lower-to-linalg's reshape of run-time sizes) becomes a
    `memref.reinterpret_cast` of its (contiguous) source at the stored sizes; the shape
    buffer goes once nothing else reads it."""
    for op in [o.operation for o in block.operations if o.operation.name == "memref.reshape"]:
        source, shape = op.operands
        result = ir.MemRefType(op.results[0].type)
        stored = _stored_dims(shape, result.rank)
        if stored is None:
            raise PassError("dg-gpu-kernels: a memref.reshape whose shape is not stored by "
                            "the host, one store per dim: its sizes are unknown to the "
                            "launch plan", op.location)
        with ir.InsertionPoint(op), op.location:
            sizes = [s if not ir.ShapedType.is_dynamic_size(s) else stored[d]
                     for d, s in enumerate(result.shape)]
            strides = _row_major(sizes)
            cast = memref.ReinterpretCastOp(result, source, [], _values(sizes),
                                            _values(strides), [0], _static(sizes),
                                            _static(strides))
        op.results[0].replace_all_uses_with(cast.result)
        op.erase()
        users = [u.owner.operation for u in shape.uses]
        if all(u.name in ("memref.store", "memref.dealloc") for u in users):
            for u in users:
                u.erase()
            shape.owner.operation.erase()


def _stored_dims(shape: ir.Value, rank: int) -> list[ir.Value] | None:
    """The values the host stores at indices 0..rank-1 of shape buffer `shape` (an
    allocation), or None when they are not one store each."""
    owner = shape.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "memref.alloc":
        return None
    stored: dict[int, ir.Value] = {}
    for use in shape.uses:
        user = use.owner.operation
        if user.name != "memref.store":
            continue
        position = user.operands[2].owner
        if isinstance(position, ir.Block) or position.operation.name != "arith.constant":
            return None
        k = ir.IntegerAttr(position.operation.attributes["value"]).value
        if k in stored:
            return None
        stored[k] = user.operands[0]
    return [stored[k] for k in range(rank)] if sorted(stored) == list(range(rank)) else None


def _row_major(sizes: Sequence[Extent]) -> list[Extent]:
    """The strides of a contiguous buffer of `sizes` (at the insertion point)."""
    strides: list[Extent] = [1]
    for s in reversed(sizes[1:]):
        strides.insert(0, product([strides[0], s]))
    return strides


def _static(sizes: Sequence[Extent]) -> list[int]:
    dynamic = ir.ShapedType.get_dynamic_size()
    return [s if isinstance(s, int) else dynamic for s in sizes]


def _values(sizes: Sequence[Extent]) -> list[ir.Value]:
    return [s for s in sizes if not isinstance(s, int)]


def pass_sizes(launch: ir.Operation, sizes: SizeClasses) -> None:
    """Give a `gpu.launch` the run-time sizes it uses as kernel parameters: each buffer
    of run-time sizes it reads or writes as a 0-d memref of its pointer, viewed again
    at the top of the kernel at its sizes (row-major), and each host `index` value it
    uses (not a constant) as an i64, one per size the function's `sizes` prove equal.
    A static kernel uses neither, and is unchanged."""
    body = launch.regions[0].blocks[0]
    top = body.operations[0]
    captured = _captured(launch)
    for v in captured:
        if not isinstance(v.type, ir.MemRefType) or ir.MemRefType(v.type).has_static_shape:
            continue
        t = ir.MemRefType(v.type)
        if not (isinstance(t.layout, ir.AffineMapAttr) and
                t.layout.value == ir.AffineMap.get_identity(t.rank)):
            raise PassError(f"dg-gpu-kernels: a kernel reads a buffer of run-time sizes "
                            f"through a strided layout ({t}): only whole buffers become "
                            "kernel arguments", launch.location)
        with ir.InsertionPoint(launch), launch.location:
            dims = [s if not ir.ShapedType.is_dynamic_size(s) else dim_value(v, d)
                    for d, s in enumerate(t.shape)]
            pointer = memref.ReinterpretCastOp(ir.MemRefType.get([], t.element_type), v,
                                               [], [], [], [0], [], []).result
        with ir.InsertionPoint(top), launch.location:
            strides = _row_major(dims)
            view = memref.ReinterpretCastOp(t, pointer, [], _values(dims), _values(strides),
                                            [0], _static(dims), _static(strides)).result
        _replace_inside(launch, v, view)
    i64 = ir.IntegerType.get_signless(64)
    parameters: dict = {}  # size class -> its value in the kernel
    for v in _captured(launch):
        if not isinstance(v.type, ir.IndexType) or _constant(v):
            continue
        key = _size_class(v, sizes)
        if key not in parameters:
            with ir.InsertionPoint(launch), launch.location:
                parameter = arith.index_cast(i64, v)
            with ir.InsertionPoint.at_block_begin(body), launch.location:
                parameters[key] = arith.index_cast(ir.IndexType.get(), parameter)
        _replace_inside(launch, v, parameters[key])


def _size_class(v: ir.Value, sizes: SizeClasses) -> object:
    """What equal host sizes share: the class `sizes` puts `v` in (or its memref.dim's
    buffer dim in), else the buffer dim a memref.dim reads, else `v` itself."""
    owner = v.owner
    node = v
    if not isinstance(owner, ir.Block) and owner.operation.name == "memref.dim":
        d = owner.operation.operands[1].owner
        if not isinstance(d, ir.Block) and d.operation.name == "arith.constant":
            node = (owner.operation.operands[0],
                    ir.IntegerAttr(d.operation.attributes["value"]).value)
    return sizes.find(node) if node in sizes.parent else node


def _constant(v: ir.Value) -> bool:
    return not isinstance(v.owner, ir.Block) and v.owner.operation.name == "arith.constant"


def _captured(launch: ir.Operation) -> list[ir.Value]:
    """The values the launch's body uses that are defined outside it, in order of use."""
    defined: set = set()
    found: list = []

    def visit(op: ir.Operation) -> None:
        for v in op.operands:
            if v not in defined and v not in found:
                found.append(v)
        for region in op.regions:
            for block in region.blocks:
                defined.update(block.arguments)
                for inner in block.operations:
                    visit(inner.operation)
        defined.update(op.results)

    for region in launch.regions:
        for block in region.blocks:
            defined.update(block.arguments)
            for op in block.operations:
                visit(op.operation)
    return [v for v in found if v not in defined]


def _replace_inside(launch: ir.Operation, old: ir.Value, new: ir.Value) -> None:
    """Use `new` for `old` in the launch's body (and nowhere else)."""
    def visit(op: ir.Operation) -> ir.WalkResult:
        for i, v in enumerate(list(op.operands)):
            if v == old:
                op.operands[i] = new
        return ir.WalkResult.ADVANCE

    for op in launch.regions[0].blocks[0].operations:
        op.operation.walk(visit)

"""Small IR builders shared by the dg lowering rules and the fusion lowering.

They emit at the current `ir.InsertionPoint` and speak plain dtype names
(`f32`, `i64`, `i1`, ...), so a lowering rule reads like the math it does.
The central one is `generic`: a `linalg.generic` whose body is produced by a
Python function on the block's scalar arguments; single-op lowering and fused
kernels both build their loops with it.

This module imports only `mlir` (and `fusegrad.dialects.types` lazily), so the
op-family modules in `dialects/` can use it from their lowering rules.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from mlir import ir
from mlir.dialects import arith, linalg, tensor

from ..runtime.abi import as_dim as abi_dim
from .sizes import mixed, size_value

Body = Callable[[list[ir.Value]], Sequence[ir.Value]]
Dim = Any  # int | a symbolic size (runtime.abi.Dim)


def element_type(dtype: str) -> ir.Type:
    from ..dialects.types import element_type as _element_type
    return _element_type(dtype)


def is_float_type(t: ir.Type) -> bool:
    return isinstance(t, (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type))


def const(dtype: str | ir.Type, value: float | int | bool) -> ir.Value:
    """A scalar `arith.constant` of `dtype` (NaN/inf allowed for floats; i1 takes bools)."""
    t = element_type(dtype) if isinstance(dtype, str) else dtype
    if is_float_type(t):
        return arith.ConstantOp(t, ir.FloatAttr.get(t, float(value))).result
    if isinstance(t, ir.IndexType):
        return arith.ConstantOp(t, ir.IntegerAttr.get(t, int(value))).result
    width = ir.IntegerType(t).width
    v = int(value)
    if width == 1:
        v = 1 if v else 0
    else:  # wrap into the signed range the attribute expects
        v = (v + (1 << (width - 1))) % (1 << width) - (1 << (width - 1))
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, v)).result


def index_const(value: int) -> ir.Value:
    return const(ir.IndexType.get(), value)


def index(value: Dim) -> ir.Value:
    """An `index` value: a constant, or a symbolic size's value in the function."""
    if not isinstance(value, int):
        from .sizes import size_value
        return size_value(value)
    return const(ir.IndexType.get(), value)


def tensor_type(shape: Sequence[Dim], element: ir.Type) -> ir.RankedTensorType:
    """The dg tensor type of `shape` (symbolic dims named by its encoding)."""
    from ..dialects.types import tensor_type as _tensor_type
    return _tensor_type(shape, element)


def dims(x: ir.Value) -> tuple[Dim, ...]:
    """The shape of tensor `x`, symbolic dims as size expressions."""
    from ..dialects.types import TensorSpec
    return TensorSpec.from_mlir(x.type).shape


def empty(shape: Sequence[Dim], dtype: str | ir.Type) -> ir.Value:
    """`tensor.empty` of `shape` (its symbolic sizes computed in the function)."""
    t = element_type(dtype) if isinstance(dtype, str) else dtype
    if all(isinstance(d, int) for d in shape):
        return tensor.EmptyOp(list(shape), t).result
    _, values = mixed(shape)
    return ir.Operation.create("tensor.empty", results=[tensor_type(shape, t)],
                               operands=values).result


def fill(value: ir.Value, init: ir.Value) -> ir.Value:
    """`linalg.fill` of `init` with the scalar `value`."""
    return linalg.fill(value, outs=[init])


def full(shape: Sequence[Dim], dtype: str, value: float | int | bool) -> ir.Value:
    """A tensor filled with a constant: `linalg.fill(tensor.empty)`."""
    return fill(const(dtype, value), empty(shape, dtype))


def identity_map(rank: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(rank)


def generic(inputs: Sequence[ir.Value], inits: Sequence[ir.Value],
            maps: Sequence[ir.AffineMap], iterators: Sequence[str], body: Body) -> list[ir.Value]:
    """A `linalg.generic` over `inputs` -> `inits` whose body is `body(scalars)`.

    `maps` has one affine map per input then per init; `iterators` holds
    "parallel"/"reduction" per loop. `body` receives the block arguments
    (input scalars, then the current output values) with the insertion point
    inside the body, and returns one scalar per init (yielded).
    """
    it_attr = ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{i}>")
                                for i in iterators])
    op = linalg.GenericOp([v.type for v in inits], list(inputs), list(inits),
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]), it_attr)
    arg_types = [ir.RankedTensorType(v.type).element_type for v in [*inputs, *inits]]
    block = op.regions[0].blocks.append(*arg_types)
    with ir.InsertionPoint(block):
        results = list(body(list(block.arguments)))
        linalg.YieldOp(results)
    return list(op.results)


def elementwise(inputs: Sequence[ir.Value], out_shape: Sequence[Dim], out_dtypes: Sequence[str],
                body: Body) -> list[ir.Value]:
    """All-parallel `linalg.generic` with identity maps: `body(input scalars)` per element."""
    rank = len(out_shape)
    inits = [empty(out_shape, d) for d in out_dtypes]
    n_in = len(inputs)
    return generic(inputs, inits, [identity_map(rank)] * (n_in + len(inits)),
                   ["parallel"] * rank, lambda args: body(args[:n_in]))


def loop_index(dim: int) -> ir.Value:
    """`linalg.index` of loop `dim` (inside a generic body)."""
    return linalg.IndexOp(dim).result


def index_cast(value: ir.Value, to: str | ir.Type) -> ir.Value:
    """index <-> integer cast (signed)."""
    t = element_type(to) if isinstance(to, str) else to
    return arith.IndexCastOp(t, value).result


def _i64_array(values: Sequence[int]) -> ir.DenseI64ArrayAttr:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def _reassociation(groups: Sequence[Sequence[int]]) -> ir.ArrayAttr:
    i64 = ir.IntegerType.get_signless(64)
    return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g])
                             for g in groups])


def _with_shape(x: ir.Value, shape: Sequence[Dim]) -> ir.RankedTensorType:
    return tensor_type(shape, ir.RankedTensorType(x.type).element_type)


def collapse(x: ir.Value, groups: Sequence[Sequence[int]]) -> ir.Value:
    """`tensor.collapse_shape`: result dim i is the product of operand dims groups[i]."""
    shape = list(dims(x))
    out = []
    for g in groups:
        n = 1
        for d in g:
            n *= shape[d]
        out.append(n)
    return tensor.CollapseShapeOp(_with_shape(x, out), x, _reassociation(groups)).result


def expand(x: ir.Value, groups: Sequence[Sequence[int]], shape: Sequence[Dim]) -> ir.Value:
    """`tensor.expand_shape` into `shape`; operand dim i becomes dims groups[i]. A group
    of two symbolic sizes (`s0*s1` into `s0, s1`) is a `tensor.reshape` instead: MLIR's
    memref lowering of expand_shape takes one dynamic size per group (and aborts the
    process on more)."""
    static, values = mixed(shape)
    if any(sum(not isinstance(abi_dim(shape[d]), int) for d in g) > 1 for g in groups):
        index = ir.IndexType.get()
        sizes = [size_value(d) if not isinstance(abi_dim(d), int) else index_const(d)
                 for d in shape]
        shape_tensor = tensor.FromElementsOp(
            ir.RankedTensorType.get([len(shape)], index), sizes).result
        return tensor.ReshapeOp(_with_shape(x, shape), x, shape_tensor).result
    return tensor.ExpandShapeOp(_with_shape(x, shape), x, _reassociation(groups), values,
                                _i64_array(static)).result


def reshape(x: ir.Value, shape: Sequence[Dim]) -> ir.Value:
    """Row-major reshape: collapse to 1-D, then expand (0-d ends use empty reassociations).
    With symbolic sizes, only the dims that change are collapsed and expanded
    (`_reshape_groups`): canonicalize folds the 1-D round trip of static shapes into
    that, but not of run-time sizes, and bufferization then copies a strided view (one
    third of a fused QKV projection) to collapse it."""
    src = list(dims(x))
    if src == list(shape):
        return x
    groups = _reshape_groups(src, list(shape)) if src and shape and any(
        not isinstance(abi_dim(d), int) for d in (*src, *shape)) else None
    if groups is not None:
        src_groups, dst_groups = groups
        if any(len(g) != 1 for g in src_groups):
            x = collapse(x, src_groups)
        if any(len(g) != 1 for g in dst_groups):
            x = expand(x, dst_groups, shape)
        return x
    if not src:
        x = expand(x, [], [1])
    elif len(src) > 1:
        x = collapse(x, [list(range(len(src)))])
    if not shape:
        return collapse(x, [])
    if len(shape) > 1:
        return expand(x, [list(range(len(shape)))], shape)
    return x


def _reshape_groups(src: list, dst: list) -> tuple[list, list] | None:
    """Paired groups of consecutive dims of `src` and `dst` with equal products (each
    group one dim on at least one side), or None when the sizes do not prove them. The
    side to grow is chosen with the symbols at distinct primes; a group closes only
    where the products are equal as expressions."""
    import sympy

    from ..runtime.abi import eval_dim
    names = sorted({str(s) for d in (*src, *dst) if not isinstance(abi_dim(d), int)
                    for s in abi_dim(d).free_symbols})
    primes = dict(zip(names, sympy.primerange(1009, 10 ** 6)))

    def value(d) -> int:
        return eval_dim(abi_dim(d), primes)
    src_groups: list = []
    dst_groups: list = []
    i = j = 0
    while i < len(src) and j < len(dst):
        gs, gd = [i], [j]
        ps, pd = abi_dim(src[i]), abi_dim(dst[j])
        i, j = i + 1, j + 1
        while value(ps) != value(pd):
            if value(ps) < value(pd) and i < len(src):
                ps, i = ps * abi_dim(src[i]), i + 1
                gs.append(i - 1)
            elif value(pd) < value(ps) and j < len(dst):
                pd, j = pd * abi_dim(dst[j]), j + 1
                gd.append(j - 1)
            else:
                return None
        if sympy.expand(ps - pd) != 0:
            return None
        src_groups.append(gs)
        dst_groups.append(gd)
    # trailing size-1 dims join the last group
    if any(abi_dim(d) != 1 for d in src[i:]) or any(abi_dim(d) != 1 for d in dst[j:]):
        return None
    src_groups[-1] += list(range(i, len(src)))
    dst_groups[-1] += list(range(j, len(dst)))
    return src_groups, dst_groups


def extract_slice(x: ir.Value, offsets: Sequence[Dim], sizes: Sequence[Dim],
                  strides: Sequence[int]) -> ir.Value:
    (static_offsets, offset_values), (static_sizes, size_values) = mixed(offsets), mixed(sizes)
    return tensor.ExtractSliceOp(_with_shape(x, sizes), x, offset_values, size_values, [],
                                 _i64_array(static_offsets), _i64_array(static_sizes),
                                 _i64_array(strides)).result


def insert_slice(x: ir.Value, dest: ir.Value, offsets: Sequence[Dim],
                 strides: Sequence[int] | None = None) -> ir.Value:
    """Insert all of `x` into `dest` at `offsets` (element strides `strides`)."""
    sizes = list(dims(x))
    strides = list(strides) if strides is not None else [1] * len(sizes)
    (static_offsets, offset_values), (static_sizes, size_values) = mixed(offsets), mixed(sizes)
    return tensor.InsertSliceOp(x, dest, offset_values, size_values, [],
                                _i64_array(static_offsets), _i64_array(static_sizes),
                                _i64_array(strides)).result


def extract(x: ir.Value, indices: Sequence[ir.Value]) -> ir.Value:
    return tensor.ExtractOp(x, list(indices)).result


def insert(scalar: ir.Value, dest: ir.Value, indices: Sequence[ir.Value]) -> ir.Value:
    return tensor.InsertOp(scalar, dest, list(indices)).result

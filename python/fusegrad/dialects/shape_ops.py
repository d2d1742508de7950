"""Data-movement dg ops: broadcast, reshape, transpose, slice, reverse, pad, concatenate."""
from __future__ import annotations


from .core import (Attr, Kind, ShapeError, define, equal, holds, lowering, reference_rule, require,
                   shape_rule)
from .reduction import check_dims
from .lazy_torch import torch

define("broadcast_in_dim", ("x",), attrs={"dims": Attr.I64S}, kind=Kind.BROADCAST,
       summary="operand dim i becomes result dim dims[i] (size 1 or equal); other result dims are new")
define("reshape", ("x",), kind=Kind.VIEW, summary="row-major reshape to the result type")
define("transpose", ("x",), attrs={"perm": Attr.I64S}, kind=Kind.VIEW,
       summary="result dim i is operand dim perm[i]")
define("slice", ("x",), attrs={"start": Attr.I64S, "limit": Attr.I64S, "stride": Attr.I64S},
       kind=Kind.VIEW, summary="x[start:limit:stride] per dim (stride >= 1)")
define("reverse", ("x",), attrs={"dims": Attr.I64S}, kind=Kind.VIEW, summary="flip along dims")
define("pad", ("x",), attrs={"low": Attr.I64S, "high": Attr.I64S, "interior": Attr.I64S,
                             "value": Attr.F64},
       kind=Kind.DATA_MOVEMENT,
       summary="pad with `value`: low/high edges and `interior` elements between neighbours")
define("concatenate", ("lhs", "rhs"), attrs={"dim": Attr.I64}, kind=Kind.DATA_MOVEMENT,
       summary="join two operands along dim (Builder.concat chains more); binary because IRDL "
               "variadics force equal types")


def _gaps(n):
    """Gaps between n elements (a symbolic size is at least 1)."""
    return max(n - 1, 0) if isinstance(n, int) else n - 1


@shape_rule("broadcast_in_dim")
def _broadcast_shape(ins, attrs, hint, *, op):
    (x,) = ins
    if hint is None:
        raise ShapeError("dg.broadcast_in_dim needs the result shape")
    out = hint[0]
    dims = tuple(attrs["dims"])
    if len(dims) != x.rank:
        raise ShapeError(f"dg.broadcast_in_dim: dims has {len(dims)} entries for an operand of "
                         f"rank {x.rank}")
    check_dims(dims, out.rank, "dg.broadcast_in_dim")
    if list(dims) != sorted(dims):
        raise ShapeError(f"dg.broadcast_in_dim: dims {list(dims)} must be increasing; "
                         "transpose explicitly")
    for i, d in enumerate(dims):
        if x.shape[i] != 1 and holds(equal(x.shape[i], out.shape[d])) is not True:
            raise ShapeError(f"dg.broadcast_in_dim: operand dim {i} of size {x.shape[i]} cannot "
                             f"broadcast to result dim {d} of size {out.shape[d]}")
    return [out.with_dtype(x.dtype)]


@shape_rule("reshape")
def _reshape_shape(ins, attrs, hint, *, op):
    (x,) = ins
    if hint is None:
        raise ShapeError("dg.reshape needs the result shape")
    out = hint[0].with_dtype(x.dtype)
    if holds(equal(out.numel, x.numel)) is not True:
        raise ShapeError(f"dg.reshape: cannot reshape {x.numel} elements {list(x.shape)} into "
                         f"{out.numel} elements {list(out.shape)}")
    return [out]


@shape_rule("transpose")
def _transpose_shape(ins, attrs, hint, *, op):
    (x,) = ins
    perm = tuple(attrs["perm"])
    if sorted(perm) != list(range(x.rank)):
        raise ShapeError(f"dg.transpose: perm {list(perm)} is not a permutation of rank {x.rank}")
    return [x.with_shape(x.shape[p] for p in perm)]


@shape_rule("slice")
def _slice_shape(ins, attrs, hint, *, op):
    (x,) = ins
    start, limit, stride = (tuple(attrs[k]) for k in ("start", "limit", "stride"))
    if not len(start) == len(limit) == len(stride) == x.rank:
        raise ShapeError(f"dg.slice: start/limit/stride need {x.rank} entries each")
    shape = []
    for d, (s, l, st) in enumerate(zip(start, limit, stride)):
        if st < 1:
            raise ShapeError(f"dg.slice: stride {st} in dim {d} must be >= 1")
        require(holds(0 <= s) is not False and holds(s <= l) is not False
                and holds(l <= x.shape[d]) is not False,
                f"dg.slice: bounds [{s}, {l}) out of range for dim {d} of size {x.shape[d]}")
        shape.append((l - s + st - 1) // st)
    return [x.with_shape(shape)]


@shape_rule("reverse")
def _reverse_shape(ins, attrs, hint, *, op):
    (x,) = ins
    check_dims(attrs["dims"], x.rank, "dg.reverse")
    return [x]


@shape_rule("pad")
def _pad_shape(ins, attrs, hint, *, op):
    (x,) = ins
    low, high, interior = (tuple(attrs[k]) for k in ("low", "high", "interior"))
    if not len(low) == len(high) == len(interior) == x.rank:
        raise ShapeError(f"dg.pad: low/high/interior need {x.rank} entries each")
    for amount in low + high + interior:
        require(amount >= 0, "dg.pad: padding amounts must be non-negative; use dg.slice to crop")
    return [x.with_shape(lo + hi + n + _gaps(n) * it
                         for n, lo, hi, it in zip(x.shape, low, high, interior))]


@shape_rule("concatenate")
def _concat_shape(ins, attrs, hint, *, op):
    first = ins[0]
    (dim,) = check_dims([attrs["dim"]], first.rank, "dg.concatenate")
    for i, t in enumerate(ins[1:], 1):
        if t.dtype != first.dtype or t.rank != first.rank or any(
                a != b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != dim):
            raise ShapeError(f"dg.concatenate: operand #{i} {t} does not match operand #0 "
                             f"{first} outside dim {dim}")
    size = sum(t.shape[dim] for t in ins)
    return [first.with_shape(size if k == dim else s for k, s in enumerate(first.shape))]


@reference_rule("broadcast_in_dim")
def _broadcast_ref(x, *, op, attrs, out):
    shape = [1] * len(out[0].shape)
    for i, d in enumerate(attrs["dims"]):
        shape[d] = x.shape[i]
    return [x.reshape(shape).expand(out[0].shape).contiguous()]


@reference_rule("reshape")
def _reshape_ref(x, *, op, attrs, out):
    return [x.reshape(out[0].shape).clone()]


@reference_rule("transpose")
def _transpose_ref(x, *, op, attrs, out):
    return [x.permute(*attrs["perm"]).contiguous()]


@reference_rule("slice")
def _slice_ref(x, *, op, attrs, out):
    idx = tuple(slice(s, l, st) for s, l, st in zip(attrs["start"], attrs["limit"], attrs["stride"]))
    return [x[idx].contiguous()]


@reference_rule("reverse")
def _reverse_ref(x, *, op, attrs, out):
    return [torch.flip(x, list(attrs["dims"])) if attrs["dims"] else x.clone()]


@reference_rule("pad")
def _pad_ref(x, *, op, attrs, out):
    res = torch.full(out[0].shape, pad_value(out[0].dtype, attrs["value"]), dtype=x.dtype)
    idx = tuple(slice(lo, lo + (n - 1) * (it + 1) + 1 if n else lo, it + 1)
                for n, lo, it in zip(x.shape, attrs["low"], attrs["interior"]))
    res[idx] = x
    return [res]


@reference_rule("concatenate")
def _concat_ref(*xs, op, attrs, out):
    return [torch.cat(xs, attrs["dim"])]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
@lowering("broadcast_in_dim")
def _broadcast_lower(op, operands, *, op_name, attrs, out):
    """A generic reading operand dim i at result dim dims[i] (constant 0 for size-1 dims)."""
    from mlir import ir
    from ..conversion import linalg_builders as lb
    (x,) = operands
    o = out[0]
    xshape = lb.dims(x)
    exprs = [ir.AffineConstantExpr.get(0) if xshape[i] != o.shape[d] else ir.AffineDimExpr.get(d)
             for i, d in enumerate(attrs["dims"])]
    in_map = ir.AffineMap.get(o.rank, 0, exprs)
    return lb.generic([x], [lb.empty(o.shape, o.dtype)], [in_map, lb.identity_map(o.rank)],
                      ["parallel"] * o.rank, lambda a: [a[0]])


@lowering("reshape")
def _reshape_lower(op, operands, *, op_name, attrs, out):
    from ..conversion import linalg_builders as lb
    return [lb.reshape(operands[0], out[0].shape)]


@lowering("transpose")
def _transpose_lower(op, operands, *, op_name, attrs, out):
    from mlir.dialects import linalg
    from ..conversion import linalg_builders as lb
    o = out[0]
    if list(attrs["perm"]) == list(range(o.rank)):
        return [operands[0]]
    return [linalg.transpose(operands[0], outs=[lb.empty(o.shape, o.dtype)],
                             permutation=list(attrs["perm"])).results[0]]


@lowering("slice")
def _slice_lower(op, operands, *, op_name, attrs, out):
    from ..conversion import linalg_builders as lb
    return [lb.extract_slice(operands[0], attrs["start"], out[0].shape, attrs["stride"])]


@lowering("reverse")
def _reverse_lower(op, operands, *, op_name, attrs, out):
    """A generic reading index size-1-d along the flipped dims."""
    from mlir import ir
    from ..conversion import linalg_builders as lb
    (x,) = operands
    o = out[0]
    if any(not isinstance(o.shape[d], int) for d in attrs["dims"]):
        # an affine map has no symbolic sizes: the body reads x at size-1-d itself
        from mlir.dialects import arith
        from ..conversion.sizes import size_value

        def body(a):
            idx = [lb.loop_index(d) for d in range(o.rank)]
            for d in attrs["dims"]:
                idx[d] = arith.subi(size_value(o.shape[d] - 1), idx[d])
            return [lb.extract(x, idx)]
        return lb.generic([], [lb.empty(o.shape, o.dtype)], [lb.identity_map(o.rank)],
                          ["parallel"] * o.rank, body)
    exprs = [ir.AffineConstantExpr.get(o.shape[d] - 1) - ir.AffineDimExpr.get(d)
             if d in attrs["dims"] else ir.AffineDimExpr.get(d) for d in range(o.rank)]
    in_map = ir.AffineMap.get(o.rank, 0, exprs)
    return lb.generic([x], [lb.empty(o.shape, o.dtype)], [in_map, lb.identity_map(o.rank)],
                      ["parallel"] * o.rank, lambda a: [a[0]])


def pad_value(dtype, value):
    """dg.pad/full's f64 value as a Python value of `dtype`: ints truncate and saturate
    (+-inf is the dtype's extreme: a max's identity), i1 is value != 0."""
    from .types import is_float
    if is_float(dtype):
        return value
    if dtype == "i1":
        return value != 0
    bits = int(dtype[1:])
    low, high = -2 ** (bits - 1), 2 ** (bits - 1) - 1
    return low if value <= low else high if value >= high else int(value)


@lowering("pad")
def _pad_lower(op, operands, *, op_name, attrs, out):
    """Fill the result with `value`, insert the operand with stride interior+1 at `low`."""
    from ..conversion import linalg_builders as lb
    o = out[0]
    filled = lb.full(o.shape, o.dtype, pad_value(o.dtype, attrs["value"]))
    return [lb.insert_slice(operands[0], filled, attrs["low"], [i + 1 for i in attrs["interior"]])]


def concatenated_parts(x, dim: int) -> list:
    """The parts `x` was concatenated from along `dim`, if it is a concatenation's lowering
    (insert_slices into a tensor.empty that tile it along `dim`), else [x].

    dg.concatenate is binary and n-ary concatenations arrive as trees of them: lowered one
    by one, each level copied its operands into a buffer of its own, and in a recurrent
    graph (a GRU's 64 time steps stacked, their gradients split and joined) the thousands
    of insert_slices into shared buffers made bufferization's analysis quadratic."""
    from mlir import ir
    shape = ir.RankedTensorType(x.type).shape

    def producer(value) -> str:
        return "" if isinstance(value.owner, ir.Block) else value.owner.operation.name

    parts, value = [], x
    while producer(value) == "tensor.insert_slice":
        insert = value.owner.operation.opview
        if list(insert.offsets) or list(insert.sizes) or list(insert.strides):
            return [x]  # dynamic
        offsets, sizes = list(insert.static_offsets), list(insert.static_sizes)
        if any(s != 1 for s in insert.static_strides) or \
                any(offsets[d] != 0 or sizes[d] != shape[d] for d in range(len(shape)) if d != dim):
            return [x]
        parts.append((offsets[dim], sizes[dim], insert.source))
        value = insert.dest
    if not parts or producer(value) != "tensor.empty":
        return [x]
    parts.sort(key=lambda p: p[0])
    end = 0
    for start, size, _ in parts:
        if start != end:
            return [x]  # overlapping or leaving a gap: not a concatenation
        end += size
    return [source for *_, source in parts] if end == shape[dim] else [x]


@lowering("concatenate")
def _concat_lower(op, operands, *, op_name, attrs, out):
    from mlir import ir
    from ..conversion import linalg_builders as lb
    o, dim = out[0], attrs["dim"]
    result = lb.empty(o.shape, o.dtype)
    offset = 0
    for x in [part for operand in operands for part in concatenated_parts(operand, dim)]:
        offsets = [offset if d == dim else 0 for d in range(o.rank)]
        result = lb.insert_slice(x, result, offsets)
        offset += lb.dims(x)[dim]
    return [result]


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .builder import spec  # noqa: E402
from .core import jvp_rule, vjp_rule  # noqa: E402


def reshape_to(b, x, shape):
    """dg.reshape unless `x` already has `shape`."""
    return x if spec(x).shape == tuple(shape) else b.reshape(x, shape=shape)


def _zeros_if_none(b, t, like):
    return b.full_like(like, 0.0) if t is None else t


@jvp_rule("broadcast_in_dim", "reshape", "transpose", "slice", "reverse", "pad")
def _linear_jvp(b, ins, outs, tangents, *, op, attrs):
    """These ops are linear: the tangent goes through the op itself (pad pads with zero)."""
    (t,) = tangents
    if t is None:
        return [None]
    if op == "pad":
        attrs = {**attrs, "value": 0.0}
    return [b.create(op, (t,), shape=spec(outs[0]).shape, **attrs)]


@vjp_rule("broadcast_in_dim")
def _broadcast_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None]
    x_shape, out_shape, dims = spec(ins[0]).shape, spec(outs[0]).shape, attrs["dims"]
    summed = [d for d in range(len(out_shape)) if d not in dims]
    summed += [d for i, d in enumerate(dims) if x_shape[i] == 1 and out_shape[d] != 1]
    if summed:
        g = b.reduce_sum(g, dims=sorted(summed))
    return [reshape_to(b, g, x_shape)]


@vjp_rule("reshape")
def _reshape_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    return [None if g is None else b.reshape(g, shape=spec(ins[0]).shape)]


@vjp_rule("transpose")
def _transpose_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None]
    perm = attrs["perm"]
    inverse = [perm.index(i) for i in range(len(perm))]
    return [b.transpose(g, perm=inverse)]


@vjp_rule("slice")
def _slice_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None]
    x_shape, out_shape = spec(ins[0]).shape, spec(outs[0]).shape
    start, stride = attrs["start"], attrs["stride"]
    # the sliced elements land at start + k * stride; everything else gets zero
    high = [size - s - (n + _gaps(n) * (st - 1))
            for size, s, st, n in zip(x_shape, start, stride, out_shape)]
    return [b.pad(g, low=start, high=high, interior=[st - 1 for st in stride], value=0.0)]


@vjp_rule("reverse")
def _reverse_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    return [None if g is None else b.reverse(g, dims=attrs["dims"])]


@vjp_rule("pad")
def _pad_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None]
    low, interior = attrs["low"], attrs["interior"]
    limit = [lo + _gaps(n) * (it + 1) + (1 if n else 0)
             for lo, it, n in zip(low, interior, spec(ins[0]).shape)]
    return [b.slice(g, start=low, limit=limit, stride=[it + 1 for it in interior])]


@vjp_rule("concatenate")
def _concat_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None] * len(ins)
    dim, shape = attrs["dim"], spec(outs[0]).shape
    grads, offset = [], 0
    for x in ins:
        size = spec(x).shape[dim]
        start = [offset if d == dim else 0 for d in range(len(shape))]
        limit = [offset + size if d == dim else s for d, s in enumerate(shape)]
        grads.append(b.slice(g, start=start, limit=limit, stride=[1] * len(shape)))
        offset += size
    return grads


@jvp_rule("concatenate")
def _concat_jvp(b, ins, outs, tangents, *, op, attrs):
    if all(t is None for t in tangents):
        return [None]
    return [b.concatenate(*[_zeros_if_none(b, t, x) for t, x in zip(tangents, ins)],
                          dim=attrs["dim"])]

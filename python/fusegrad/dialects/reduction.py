"""Reductions over a set of dims; the reduced dims are removed from the result.

`dg.evenly_read(x, value)` is `value`, a 0-d value of x (its max, min or median),
differentiated as read from every element of x equal to it: eager's rule for
`max()`, `min()`, `median()` and `nanmedian()` without a dim, which shares the
gradient evenly among tied elements and, where the value is NaN, among the NaNs
(amax's rule, `dg.reduce_max`'s, gives every element of such a slice NaN). The value
itself is computed by other ops; after differentiation the op is its `value`
(`dg-drop-stop-gradients`).
"""
from __future__ import annotations

import functools

from .core import Attr, Kind, ShapeError, define, lowering, reference_rule, shape_rule
from .types import TensorSpec
from .lazy_torch import torch

REDUCTIONS = {
    "reduce_sum": "sum over dims",
    "reduce_max": "maximum over dims (NaN-propagating)",
    "reduce_min": "minimum over dims (NaN-propagating)",
}
ARG_REDUCTIONS = {
    "argmax": "index (i64) of the first maximum along dim",
    "argmin": "index (i64) of the first minimum along dim",
}

for _name, _summary in REDUCTIONS.items():
    define(_name, ("x",), attrs={"dims": Attr.I64S}, kind=Kind.REDUCTION, summary=_summary)
for _name, _summary in ARG_REDUCTIONS.items():
    define(_name, ("x",), attrs={"dim": Attr.I64}, kind=Kind.REDUCTION, summary=_summary)
define("evenly_read", ("x", "value"), kind=Kind.REDUCTION,
       summary="value (0-d), whose derivative is shared evenly among the elements of x "
               "equal to it (NaN matching NaN)")


def check_dims(dims, rank: int, what: str) -> tuple[int, ...]:
    dims = tuple(dims)
    for d in dims:
        if not 0 <= d < rank:
            raise ShapeError(f"{what}: dim {d} out of range for rank {rank}")
    if len(set(dims)) != len(dims):
        raise ShapeError(f"{what}: repeated dim in {list(dims)}")
    return dims


@shape_rule(*REDUCTIONS)
def _reduce_shape(ins, attrs, hint, *, op):
    (x,) = ins
    dims = check_dims(attrs["dims"], x.rank, f"dg.{op}")
    if op == "reduce_sum" and x.dtype == "i1":
        raise ShapeError("dg.reduce_sum does not take i1 operands; convert first")
    return [x.with_shape(s for i, s in enumerate(x.shape) if i not in dims)]


@shape_rule(*ARG_REDUCTIONS)
def _argreduce_shape(ins, attrs, hint, *, op):
    (x,) = ins
    (dim,) = check_dims([attrs["dim"]], x.rank, f"dg.{op}")
    if x.shape[dim] == 0:
        raise ShapeError(f"dg.{op}: cannot reduce an empty dim {dim}")
    return [TensorSpec(tuple(s for i, s in enumerate(x.shape) if i != dim), "i64")]


@shape_rule("evenly_read")
def _evenly_read_shape(ins, attrs, hint, *, op):
    x, value = ins
    if value.rank != 0 or value.dtype != x.dtype:
        raise ShapeError(f"dg.evenly_read: value must be a 0-d {x.dtype}, got {value}")
    return [value]


@reference_rule(*REDUCTIONS)
def _reduce_ref(x, *, op, attrs, out):
    dims = list(attrs["dims"])
    if not dims:
        return [x.clone()]
    if op == "reduce_sum":
        return [torch.sum(x, dims).to(x.dtype)]
    fn = torch.amax if op == "reduce_max" else torch.amin
    return [fn(x, dims)]


@reference_rule(*ARG_REDUCTIONS)
def _argreduce_ref(x, *, op, attrs, out):
    fn = torch.argmax if op == "argmax" else torch.argmin
    return [fn(x, attrs["dim"])]


def _ties_ref(x, value):
    """Which elements of x equal `value` (NaN matching NaN), and how many."""
    tied = (x == value) | (x.isnan() & value.isnan())
    return tied, tied.sum().to(x.dtype)


@functools.cache
def _evenly_read_function():
    """`value`, with eager's derivatives (evenly_distribute_backward), for torch's autograd
    in reverse and forward mode."""
    class EvenlyRead(torch.autograd.Function):
        @staticmethod
        def forward(x, value):
            return value.clone()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.ties = _ties_ref(*(t.detach() for t in inputs))  # constants of x

        @staticmethod
        def backward(ctx, grad):
            tied, count = ctx.ties
            return torch.where(tied, grad / count, torch.zeros_like(grad)), None

        @staticmethod
        def jvp(ctx, x_tangent, value_tangent):
            tied, count = ctx.ties
            return torch.where(tied, x_tangent, torch.zeros_like(x_tangent)).sum() / count
    return EvenlyRead


@reference_rule("evenly_read")
def _evenly_read_ref(x, value, *, op, attrs, out):
    return [_evenly_read_function().apply(x, value)]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
def _reduction_init(op, dtype):
    """Identity of the reduction: 0, or the lowest/highest value (+-inf for floats)."""
    from .types import is_float
    if op == "reduce_sum":
        return 0
    lowest = op in ("reduce_max", "argmax")
    if is_float(dtype):
        return float("-inf") if lowest else float("inf")
    if dtype == "i1":
        return not lowest
    bits = int(dtype[1:])
    return -(1 << (bits - 1)) if lowest else (1 << (bits - 1)) - 1


def accumulator_dtype(op: str, dtype: str) -> str:
    """The dtype a reduction accumulates in: sums of 16-bit floats in f32, as eager's (in
    bf16 a variance of 4096 values of ~1 came out 2.0: its lanes stopped adding where
    bf16's spacing grew past the terms), rounded once at the end."""
    return "f32" if op == "reduce_sum" and dtype in ("f16", "bf16") else dtype


def widen(x, dtype: str):
    """`x` (a scalar) extended to the accumulator `dtype` when that is wider."""
    from mlir import ir
    from mlir.dialects import arith
    from ..conversion import linalg_builders as lb
    return x if str(x.type) == dtype or not isinstance(x.type, (ir.BF16Type, ir.F16Type)) \
        else arith.extf(lb.element_type(dtype), x)


def round_to(acc, dtype: str):
    """The accumulated tensor `acc` in the reduction's result `dtype`."""
    from mlir import ir
    from mlir.dialects import arith
    from ..conversion import linalg_builders as lb
    shape = lb.dims(acc)
    if str(ir.RankedTensorType(acc.type).element_type) == dtype:
        return acc
    return lb.elementwise([acc], shape, [dtype],
                          lambda a: [arith.truncf(lb.element_type(dtype), a[0])])[0]


def _reduction_maps(rank, reduced):
    from mlir import ir
    from ..conversion import linalg_builders as lb
    kept = [ir.AffineDimExpr.get(d) for d in range(rank) if d not in reduced]
    iterators = ["reduction" if d in reduced else "parallel" for d in range(rank)]
    return lb.identity_map(rank), ir.AffineMap.get(rank, 0, kept), iterators


@lowering(*REDUCTIONS)
def _reduce_lower(op, operands, *, op_name, attrs, out):
    """A generic with reduction iterators over `dims` into a filled init; combiner = the
    scalar rule of add/max/min (so max/min propagate NaN). 16-bit float sums accumulate
    in f32 (`accumulator_dtype`)."""
    from mlir import ir
    from ..conversion import linalg_builders as lb
    from .core import lookup
    (x,) = operands
    dims = tuple(attrs["dims"])
    if not dims:
        return [x]
    o = out[0]
    rank = ir.RankedTensorType(x.type).rank
    in_map, out_map, iterators = _reduction_maps(rank, dims)
    acc = accumulator_dtype(op_name, o.dtype)
    init = lb.full(o.shape, acc, _reduction_init(op_name, acc))
    combine = lookup({"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min"}[op_name])
    (total,) = lb.generic([x], [init], [in_map, out_map], iterators, lambda a: [combine.scalar(
        [widen(a[0], acc), a[1]], op=combine.name, attrs={}, in_dtypes=[acc] * 2,
        out_dtype=acc)])
    return [round_to(total, o.dtype)]


@lowering(*ARG_REDUCTIONS)
def _argreduce_lower(op, operands, *, op_name, attrs, out):
    """A generic with two outputs (best value, its index). The candidate replaces the best
    when strictly better, or when it is NaN and the best is not: first index on ties and
    NaN counts as the extreme, like torch."""
    from mlir import ir
    from mlir.dialects import arith
    from ..conversion import linalg_builders as lb
    from .types import dtype_of, is_float
    (x,) = operands
    dim = attrs["dim"]
    xt = ir.RankedTensorType(x.type)
    dt, o = dtype_of(xt.element_type), out[0]
    in_map, out_map, iterators = _reduction_maps(xt.rank, (dim,))
    best = lb.full(o.shape, dt, _reduction_init(op_name, dt))
    best_idx = lb.full(o.shape, "i64", 0)
    is_max = op_name == "argmax"

    def body(a):
        v, acc, acc_idx = a
        idx = lb.index_cast(lb.loop_index(dim), "i64")
        if is_float(dt):
            better = arith.cmpf(arith.CmpFPredicate.OGT if is_max else arith.CmpFPredicate.OLT,
                                v, acc)
            v_nan = arith.cmpf(arith.CmpFPredicate.UNO, v, v)
            acc_nan = arith.cmpf(arith.CmpFPredicate.UNO, acc, acc)
            nan_wins = arith.andi(v_nan, arith.xori(acc_nan, lb.const("i1", True)))
            take = arith.ori(better, nan_wins)
        else:
            pred = ("ugt" if is_max else "ult") if dt == "i1" else ("sgt" if is_max else "slt")
            take = arith.cmpi(getattr(arith.CmpIPredicate, pred), v, acc)
        return [arith.select(take, v, acc), arith.select(take, idx, acc_idx)]

    return [lb.generic([x], [best, best_idx], [in_map, out_map, out_map], iterators, body)[1]]


@lowering("evenly_read")
def _evenly_read_lower(op, operands, *, op_name, attrs, out):
    return [operands[1]]


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .builder import spec  # noqa: E402
from .core import jvp_rule, vjp_rule  # noqa: E402


def _unreduce(b, v, x_shape, dims):
    """Broadcast a reduced value back over the reduced `dims` of `x_shape`."""
    kept = [d for d in range(len(x_shape)) if d not in dims]
    return b.broadcast_in_dim(v, shape=x_shape, dims=kept)


def _extremum_weights(b, x, out, dims):
    """amax/amin gradient weights: ties share evenly, mask / count (PyTorch's rule)."""
    shape = spec(x).shape
    hit = b.convert(b.compare(x, _unreduce(b, out, shape, dims), direction="eq"),
                    dtype=spec(x).dtype)
    count = b.reduce_sum(hit, dims=dims)
    return b.div(hit, _unreduce(b, count, shape, dims))


@vjp_rule(*REDUCTIONS)
def _reduce_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None]
    dims = tuple(attrs["dims"])
    if not dims:
        return [g]
    spread = _unreduce(b, g, spec(ins[0]).shape, dims)
    if op == "reduce_sum":
        return [spread]
    return [b.mul(spread, _extremum_weights(b, ins[0], outs[0], dims))]


@jvp_rule(*REDUCTIONS)
def _reduce_jvp(b, ins, outs, tangents, *, op, attrs):
    (t,) = tangents
    dims = tuple(attrs["dims"])
    if t is None or not dims:
        return [t]
    if op != "reduce_sum":
        t = b.mul(t, _extremum_weights(b, ins[0], outs[0], dims))
    return [b.reduce_sum(t, dims=dims)]


@vjp_rule(*ARG_REDUCTIONS)
def _argreduce_vjp(b, ins, outs, cts, *, op, attrs):
    return [None]


@jvp_rule(*ARG_REDUCTIONS)
def _argreduce_jvp(b, ins, outs, tangents, *, op, attrs):
    return [None]


def _ties(b, x, value):
    """(the elements of x equal to the 0-d `value`, NaN matching NaN; their count, 0-d)."""
    s = spec(x)
    spread = b.broadcast_in_dim(value, shape=s.shape, dims=[])
    nan = b.compare(spread, spread, direction="ne")
    tied = b.create("or", [b.compare(x, spread, direction="eq"),
                           b.create("and", [nan, b.compare(x, x, direction="ne")])])
    return tied, b.reduce_sum(b.convert(tied, dtype=s.dtype), dims=list(range(s.rank)))


@vjp_rule("evenly_read")
def _evenly_read_vjp(b, ins, outs, cts, *, op, attrs):
    """g / count to each tied element, selected (as eager's masked_fill: an infinite g
    leaves the others 0)."""
    (g,) = cts
    if g is None:
        return [None, None]
    x, value = ins
    tied, count = _ties(b, x, value)
    share = b.broadcast_in_dim(b.div(g, count), shape=spec(x).shape, dims=[])
    return [b.select(tied, share, b.full_like(x, 0.0)), None]


@jvp_rule("evenly_read")
def _evenly_read_jvp(b, ins, outs, tangents, *, op, attrs):
    """The mean of the tied elements' tangents (the VJP's transpose; eager's forward mode
    counts no NaN as tied, and gives a NaN value a NaN tangent)."""
    t = tangents[0]
    if t is None:
        return [None]
    x, value = ins
    tied, count = _ties(b, x, value)
    total = b.reduce_sum(b.select(tied, t, b.full_like(t, 0.0)), dims=list(range(spec(x).rank)))
    return [b.div(total, count)]

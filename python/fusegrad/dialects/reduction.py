"""Reductions over a set of dims; the reduced dims are removed from the result."""
from __future__ import annotations


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

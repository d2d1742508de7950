"""Reductions over a set of dims; the reduced dims are removed from the result."""
from __future__ import annotations

import torch

from .core import Attr, Kind, ShapeError, define, reference_rule, shape_rule
from .types import TensorSpec

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

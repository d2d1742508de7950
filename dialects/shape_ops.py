"""Data-movement dg ops: broadcast, reshape, transpose, slice, reverse, pad, concatenate."""
from __future__ import annotations

import torch

from .core import Attr, Kind, ShapeError, define, reference_rule, shape_rule
from .reduction import check_dims

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
define("concatenate", ("*xs",), attrs={"dim": Attr.I64}, kind=Kind.DATA_MOVEMENT,
       summary="join operands along dim")


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
        if x.shape[i] not in (1, out.shape[d]):
            raise ShapeError(f"dg.broadcast_in_dim: operand dim {i} of size {x.shape[i]} cannot "
                             f"broadcast to result dim {d} of size {out.shape[d]}")
    return [out.with_dtype(x.dtype)]


@shape_rule("reshape")
def _reshape_shape(ins, attrs, hint, *, op):
    (x,) = ins
    if hint is None:
        raise ShapeError("dg.reshape needs the result shape")
    out = hint[0].with_dtype(x.dtype)
    if out.numel != x.numel:
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
        if not 0 <= s <= l <= x.shape[d]:
            raise ShapeError(f"dg.slice: bounds [{s}, {l}) out of range for dim {d} of size "
                             f"{x.shape[d]}")
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
    if min(low + high + interior, default=0) < 0:
        raise ShapeError("dg.pad: padding amounts must be non-negative; use dg.slice to crop")
    return [x.with_shape(lo + hi + n + max(n - 1, 0) * it
                         for n, lo, hi, it in zip(x.shape, low, high, interior))]


@shape_rule("concatenate")
def _concat_shape(ins, attrs, hint, *, op):
    if not ins:
        raise ShapeError("dg.concatenate needs at least one operand")
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
    res = torch.full(out[0].shape, attrs["value"], dtype=x.dtype)
    idx = tuple(slice(lo, lo + (n - 1) * (it + 1) + 1 if n else lo, it + 1)
                for n, lo, it in zip(x.shape, attrs["low"], attrs["interior"]))
    res[idx] = x
    return [res]


@reference_rule("concatenate")
def _concat_ref(*xs, op, attrs, out):
    return [torch.cat(xs, attrs["dim"])]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)

"""Scans: cumsum, cumprod, cummax/cummin and logcumsumexp, each one dg.scan, whose
combiners follow eager's CPU kernels (accumulation, NaN and infinities) and whose
gradients are eager's (dialects/scan.py)."""
from __future__ import annotations

from typing import Any

from mlir import ir

from ...dialects.builder import spec
from ...dialects.types import is_float
from .emit import Emit, Unsupported, aten, cast, handles, norm_dim


def _scanned(em: Emit, x: ir.Value, dim: int, combiner: str) -> list[ir.Value]:
    """x scanned along `dim` (a 0-d tensor is its own scan; eager's index is 0)."""
    s = spec(x)
    if s.rank == 0:
        return [x, em.b.full(shape=(), dtype="i64", value=0.0)][:len(em.out)]
    return em.b.scan(x, dim=norm_dim(dim, s.rank), combiner=combiner, reverse=0)


@handles(aten.cumsum.default, aten.cumprod.default)
def _cumsum(em: Emit, x: ir.Value, dim: int, dtype: Any = None) -> ir.Value:
    """In the result's dtype, as eager casts before it scans (a bool or int32 input sums
    in int64)."""
    combiner = "add" if em.node.target is aten.cumsum.default else "mul"
    return _scanned(em, cast(em, x, em.out0.dtype), dim, combiner)[0]


@handles(aten.cummax.default, aten.cummin.default)
def _cummax(em: Emit, x: ir.Value, dim: int) -> list[ir.Value]:
    """Values and indices; booleans scan as integers (the same order)."""
    combiner = "max" if em.node.target is aten.cummax.default else "min"
    dtype = spec(x).dtype
    values, indices = _scanned(em, cast(em, x, "i8" if dtype == "i1" else dtype), dim, combiner)
    return [cast(em, values, dtype), indices]


@handles(aten.logcumsumexp.default)
def _logcumsumexp(em: Emit, x: ir.Value, dim: int) -> ir.Value:
    if not is_float(spec(x).dtype):
        raise Unsupported("logcumsumexp of an integer tensor")
    return _scanned(em, x, dim, "logaddexp")[0]

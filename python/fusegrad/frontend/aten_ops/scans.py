"""Scans: cumsum (triangular matmuls), cumprod, cummax/cummin and logcumsumexp (scans
of `_scan`)."""
from __future__ import annotations

import math
from typing import Any

from mlir import ir

from ...dialects.builder import spec
from ...dialects.types import is_float
from .emit import (
    Emit, Unsupported, _opmath, _running_sum, _scan, aten, cast, full_as, handles, is_size,
    norm_dim, reshape, scalar_like,
)
from .shapes import _permute, _unpermute


@handles(aten.cumsum.default)
def _cumsum(em: Emit, x: ir.Value, dim: int, dtype: Any = None) -> ir.Value:
    out = em.out0
    s = spec(x)
    x = cast(em, x, out.dtype)
    if s.rank == 0:
        return x
    d = norm_dim(dim, s.rank)
    n = s.shape[d]
    if not is_float(out.dtype):  # no BLAS for integer matmuls: log2(n) rounds of adds
        return _running_sum(em, x, d)
    # 16-bit floats sum in f32, as eager's (block partials rounded to bf16 were 3x
    # further from the exact sums)
    acc = _opmath(out.dtype)
    x = cast(em, x, acc)
    finite = _finite(em, x)
    z = em.b.select(finite, x, full_as(em, x, 0.0))
    others = s.numel // (n if is_size(n) else max(n, 1))
    if d == s.rank - 1:  # rows: no data moves
        rows = reshape(em, z, (others, n))
        sums = reshape(em, _prefix_sums(em, rows, acc, axis=1), s.shape)
    else:  # the scanned dim first: the permute moves whole runs of the dims after it
        perm = [d] + [k for k in range(s.rank) if k != d]
        cols = reshape(em, _permute(em, z, perm), (n, others))
        sums = _prefix_sums(em, cols, acc, axis=0)
        sums = _unpermute(em, reshape(em, sums, [s.shape[k] for k in perm]), perm)
    return cast(em, _with_nonfinite_prefixes(em, x, sums, d), out.dtype)


def _finite(em: Emit, x: ir.Value) -> ir.Value:
    b = em.b
    return b.compare(b.abs(x), full_as(em, x, math.inf), direction="lt")  # NaN: false


def _with_nonfinite_prefixes(em: Emit, x: ir.Value, sums: ir.Value, d: int) -> ir.Value:
    """`sums`, the prefix sums along d of x's finite elements, made what eager's running
    sums are from the first NaN or infinity on: NaN after a NaN or after infinities of
    both signs, else that infinity. Taken from the first positions of each kind (row
    reductions), not from the matmul, which multiplies every element by the triangle's
    zeros too (0 * inf is NaN: every earlier sum of the row came out NaN). The fix-up is
    a constant to autodiff: gradients flow as through the finite sums (an infinite
    element's own gradient is 0; eager's, the sum of the later cotangents)."""
    b = em.b
    s = spec(x)
    n = s.shape[d]
    position = b.iota(shape=s.shape, dtype="i32", dim=d)  # AVX2 has no vector i64 min
    kept = [k for k in range(s.rank) if k != d]

    def reached(found: ir.Value) -> ir.Value:
        """Whether the row has had a `found` element up to each position."""
        first = b.reduce_min(b.select(found, position, scalar_like(em, position, n)), dims=[d])
        return b.compare(position, b.broadcast_in_dim(first, shape=s.shape, dims=kept),
                         direction="ge")
    nan = reached(b.compare(x, x, direction="ne"))
    plus = reached(b.compare(x, full_as(em, x, math.inf), direction="eq"))
    minus = reached(b.compare(x, full_as(em, x, -math.inf), direction="eq"))
    nan = b.create("or", [nan, b.create("and", [plus, minus])])
    special = b.select(nan, full_as(em, x, math.nan),
                       b.select(plus, full_as(em, x, math.inf), full_as(em, x, -math.inf)))
    fix = b.select(b.create("or", [nan, b.create("or", [plus, minus])]), b.sub(special, sums),
                   full_as(em, x, 0.0))
    return b.add(sums, b.stop_gradient(fix))


# prefix sums up to this long are one matmul with an n x n triangular matrix
CUMSUM_DIRECT_MAX = 128


def _prefix_sums(em: Emit, x: ir.Value, dtype: str, axis: int) -> ir.Value:
    """Inclusive prefix sums along `axis` of the 2-D `x`, as matmuls with triangular
    matrices of ones (no scan op: the matmul's derivative and kernels serve): x @ U for
    rows (axis 1), L @ x for columns (axis 0). Up to CUMSUM_DIRECT_MAX long, one [n, n]
    matrix: O(n^2) work per row, fine for what models use it on (position ids and masks
    along a sequence). Longer, in blocks of b ~ 2 sqrt(n): the sums within each block
    ([b, b]) plus its carry, the exclusive prefix sum of the block totals ([n/b, n/b]),
    O(n^1.5) work. A 1024 x 1024 cumsum took 22 ms as one matmul, 21x eager's; in
    blocks of 64, 1.8 ms along rows and 2.7 ms along columns (eager: 1.0 and 6.1 ms);
    blocks of 32 or 16 were slower (smaller matmuls)."""
    shape = spec(x).shape
    n, m = shape[axis], shape[1 - axis]
    # a symbolic length: one [n, n] matrix (blocks of a size fitting every n are to come)
    if is_size(n) or n <= CUMSUM_DIRECT_MAX:
        return _triangle_matmul(em, x, n, dtype, axis, strict=False)
    b = 2 << math.ceil(math.log2(math.isqrt(n)))
    nb = -(-n // b)
    if nb * b != n:
        high = [0, nb * b - n] if axis else [nb * b - n, 0]
        x = em.b.pad(x, low=[0, 0], high=high, interior=[0, 0], value=0.0)
    if axis:  # [m, nb, b]: blocks are rows of b
        within = reshape(em, _triangle_matmul(em, reshape(em, x, (m * nb, b)), b, dtype, 1,
                                              strict=False), (m, nb, b))
        carry_dims = [0, 1]
    else:  # [nb, b, m]: blocks of b rows side by side as [b, nb * m] for one matmul
        side = reshape(em, _permute(em, reshape(em, x, (nb, b, m)), [1, 0, 2]), (b, nb * m))
        within = _triangle_matmul(em, side, b, dtype, 0, strict=False)
        within = _permute(em, reshape(em, within, (b, nb, m)), [1, 0, 2])
        carry_dims = [0, 2]
    full = spec(within).shape
    start = [0, 0, b - 1] if axis else [0, b - 1, 0]
    totals = reshape(em, em.b.slice(within, start=start, limit=full, stride=[1, 1, 1]),
                     (m, nb) if axis else (nb, m))
    carries = _triangle_matmul(em, totals, nb, dtype, axis, strict=True)
    sums = em.b.add(within, em.b.broadcast_in_dim(carries, shape=full, dims=carry_dims))
    sums = reshape(em, sums, (m, nb * b) if axis else (nb * b, m))
    if nb * b != n:
        sums = em.b.slice(sums, start=[0, 0], limit=list(shape), stride=[1, 1])
    return sums


def _triangle_matmul(em: Emit, x: ir.Value, n: int, dtype: str, axis: int,
                     strict: bool) -> ir.Value:
    """(Exclusive when `strict`) prefix sums of length-n `axis` of 2-D `x` as one matmul."""
    i = em.b.iota(shape=(n, n), dtype="i64", dim=0)
    j = em.b.iota(shape=(n, n), dtype="i64", dim=1)
    # rows: x @ U, U[i, j] = i <= j; columns: L @ x, L[i, j] = j <= i
    direction = ("lt" if strict else "le") if axis else ("gt" if strict else "ge")
    ones = cast(em, em.b.compare(i, j, direction=direction), dtype)
    return em.b.matmul(x, ones) if axis else em.b.matmul(ones, x)


@handles(aten.cumprod.default)
def _cumprod(em: Emit, x: ir.Value, dim: int, dtype: Any = None) -> ir.Value:
    """Plain multiplications, so the gradient needs no division (zeros included)."""
    out = em.out0
    s = spec(x)
    y = cast(em, x, _opmath(out.dtype))
    if s.rank == 0 or s.numel == 0:
        return cast(em, y, out.dtype)
    (y,) = _scan(em, [y], norm_dim(dim, s.rank), [1.0], lambda e, l: [em.b.mul(e[0], l[0])])
    return cast(em, y, out.dtype)


@handles(aten.cummax.default, aten.cummin.default)
def _cummax(em: Emit, x: ir.Value, dim: int) -> list[ir.Value]:
    """A scan of (value, index) pairs in eager's order: an element replaces the running
    extreme when it is at least as large (small), or NaN, unless the running one is NaN:
    the last of equal extremes wins, and the first NaN stays until the next."""
    s = spec(x)
    b = em.b
    if s.dtype == "i1":
        raise Unsupported(f"{em.node.target._overloadpacket.__name__} of a bool tensor")
    index = b.full(shape=s.shape, dtype="i64", value=0.0)
    if s.rank == 0 or s.numel == 0:
        return [x, index]
    d = norm_dim(dim, s.rank)
    index = b.iota(shape=s.shape, dtype="i64", dim=d)
    largest = em.node.target is aten.cummax.default

    def combine(earlier: list, later: list) -> list:
        (ev, ei), (lv, li) = earlier, later
        beats = b.compare(lv, ev, direction="ge" if largest else "le")
        if is_float(s.dtype):
            nan_e, nan_l = b.compare(ev, ev, direction="ne"), b.compare(lv, lv, direction="ne")
            beats = b.create("or", [nan_l, b.create("and", [b.create("not", [nan_e]), beats])])
        # before the start (index -1) nothing: no value of the dtype is an identity for
        # both rules (int64's extremes are not even f64 pad values)
        start = b.compare(ei, full_as(em, ei, 0.0), direction="lt")
        beats = b.create("or", [start, beats])
        return [b.select(beats, lv, ev), b.select(beats, li, ei)]
    return _scan(em, [x, index], d, [0.0, -1.0], combine)


@handles(aten.logcumsumexp.default)
def _logcumsumexp(em: Emit, x: ir.Value, dim: int) -> ir.Value:
    """A scan of log(exp(a) + exp(b)) = hi + log1p(exp(lo - hi)), hi the larger: exact for
    any range of values (a running-max shift would underflow the early terms), and its
    gradient splits a tie in half, as the softmax weights do."""
    b = em.b
    s = spec(x)
    if not is_float(s.dtype):
        raise Unsupported("logcumsumexp of an integer tensor")
    y = cast(em, x, _opmath(s.dtype))
    if s.rank == 0 or s.numel == 0:
        return cast(em, y, em.out0.dtype)

    def combine(earlier: list, later: list) -> list:
        (e,), (l,) = earlier, later
        first = b.compare(e, l, direction="ge")
        hi, lo = b.select(first, e, l), b.select(first, l, e)
        # infinite hi: inf - inf would be NaN; the result is hi itself
        infinite = b.compare(b.abs(hi), full_as(em, hi, math.inf), direction="eq")
        gap = b.select(infinite, full_as(em, hi, 0.0), b.sub(lo, hi))
        return [b.add(hi, b.log1p(b.exp(gap)))]
    (y,) = _scan(em, [y], norm_dim(dim, s.rank), [-math.inf], combine)
    return cast(em, y, em.out0.dtype)

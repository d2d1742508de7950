"""Reductions and sorting: sum, mean, prod, var/std, norms and distances, amax/argmax,
any/all, topk, sort (a bitonic network; by rank along a symbolic dim), median/kthvalue,
histc and searchsorted."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
from mlir import ir

from ...dialects.builder import spec
from ...dialects.types import from_torch_dtype, is_float, torch_dtype
from .emit import (
    Emit, Unsupported, _opmath, aten, cast, coerce, decided, full_as, handles, is_size,
    norm_dim, norm_dims, reshape, size_value, slice_dim, to_bool,
)
from .shapes import _permute, _unpermute


def _keep(em: Emit, r: ir.Value) -> ir.Value:
    return reshape(em, r, em.out0.shape)


@handles(aten.sum.dim_IntList, aten.sum.default)
def _sum(em: Emit, x: ir.Value, dim: Any = None, keepdim: bool = False, *,
         dtype: Any = None) -> ir.Value:
    out = em.out0
    ct = _opmath(out.dtype)
    y = cast(em, x, ct)
    r = em.b.reduce_sum(y, dims=norm_dims(dim, spec(x).rank))
    return cast(em, _keep(em, r), out.dtype)


@handles(aten.mean.dim, aten.mean.default)
def _mean(em: Emit, x: ir.Value, dim: Any = None, keepdim: bool = False, *,
          dtype: Any = None) -> ir.Value:
    out = em.out0
    ct = _opmath(out.dtype)
    dims = norm_dims(dim, spec(x).rank)
    count = math.prod(spec(x).shape[d] for d in dims)
    r = em.b.reduce_sum(cast(em, x, ct), dims=dims)
    r = em.b.div(r, size_value(em, count, spec(r).dtype, spec(r).shape) if is_size(count)
                 else full_as(em, r, float(count)))
    return cast(em, _keep(em, r), out.dtype)


@handles(aten.prod.default, aten.prod.dim_int)
def _prod(em: Emit, x: ir.Value, dim: int | None = None, keepdim: bool = False, *,
          dtype: Any = None) -> ir.Value:
    """The reduced elements as the last dim of a 2-D [kept, reduced] array, halved by
    multiplying its two halves until one column is left: plain multiplications, so the
    gradient needs no division (zeros included) and no product reduction op."""
    out = em.out0
    s = spec(x)
    y = cast(em, x, _opmath(out.dtype))
    dims = norm_dims(dim, s.rank)
    kept = [k for k in range(s.rank) if k not in dims]
    rows = math.prod(s.shape[k] for k in kept)
    n = math.prod(s.shape[k] for k in dims)
    if n == 0:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=1.0)
    y = reshape(em, _permute(em, y, kept + dims), (rows, n))
    while n > 1:
        if n % 2:
            y = em.b.pad(y, low=[0, 0], high=[0, 1], interior=[0, 0], value=1.0)
            n += 1
        half = n // 2
        y = em.b.mul(em.b.slice(y, start=[0, 0], limit=[rows, half], stride=[1, 1]),
                     em.b.slice(y, start=[0, half], limit=[rows, n], stride=[1, 1]))
        n = half
    return cast(em, reshape(em, y, out.shape), out.dtype)


# the normalization layers, whose decompositions take their statistics through var_mean:
# hot in training, they keep f32 squares (eager's layer and group norm kernels accumulate
# in f32 too; its CPU batch norm, in double, does not overflow near 1e19). By name: the
# overload a traced node records can be another object than `aten`'s for the same op
# (OpOverload compares by identity), and the check then never matched
_NORMALIZATION_LAYERS = frozenset(str(op) for op in (
    aten.native_layer_norm.default, aten.native_group_norm.default,
    aten.native_batch_norm.default, aten._native_batch_norm_legit.default,
    aten._native_batch_norm_legit.no_stats, aten._native_batch_norm_legit_functional.default))


def _squares_dtype(em: Emit, dtype: str) -> str:
    """The dtype a variance squares and sums its deviations in: f64, as eager's var and
    std accumulate in double (in f32 the squares of deviations past 2^64, values near
    1e19, overflowed, and those below 2^-75 underflowed: a std of values near 1e-25 was
    0), except for a normalization layer's statistics (`_NORMALIZATION_LAYERS`). f64 costs
    a row var_mean of 256 x 768 on one CPU thread 27 -> 38 us (eager's: 2.3 ms)."""
    if str(em.node.meta.get("original_aten")) in _NORMALIZATION_LAYERS:
        return dtype
    return "f64"


def _variance(em: Emit, x: ir.Value, dims: list[int], correction: float,
              squares: str) -> tuple[ir.Value, ir.Value]:
    """(var in dtype `squares`, mean in x's) of float x over dims, both without the
    reduced dims: the mean, then the deviations from it squared and summed."""
    b = em.b
    s = spec(x)
    count = math.prod(s.shape[d] for d in dims)
    rest = tuple(n for i, n in enumerate(s.shape) if i not in dims)
    if is_size(count):  # symbolic sizes: the counts as tensors
        import sympy
        c = int(correction) if float(correction).is_integer() else correction
        mean = b.div(b.reduce_sum(x, dims=dims), size_value(em, count, s.dtype, rest))
        divisor = size_value(em, sympy.Max(count - c, 0), squares, rest)
    else:
        mean = b.div(b.reduce_sum(x, dims=dims), b.full(shape=rest, dtype=s.dtype,
                                                        value=float(count)))
        divisor = b.full(shape=rest, dtype=squares, value=float(max(count - correction, 0)))
    kept = [1 if i in dims else n for i, n in enumerate(s.shape)]
    centered = b.sub(cast(em, x, squares),
                     b.broadcast_to(reshape(em, cast(em, mean, squares), kept), s.shape))
    return b.div(b.reduce_sum(b.mul(centered, centered), dims=dims), divisor), mean


def _moments(em: Emit, x: ir.Value, dim: Any, correction: Any,
             root: bool) -> tuple[ir.Value, ir.Value]:
    """(var, or std with `root`; mean) over dims, both without the reduced dims, in x's
    dtype: the mean in f32 for 16-bit floats, as eager's (rounding the mean and each square
    to f16 lands 10x further from the exact variance), the rest in `_squares_dtype`."""
    dtype = spec(x).dtype
    if not is_float(dtype):
        raise Unsupported(f"{em.node.target._overloadpacket.__name__} of an integer tensor")
    squares = _squares_dtype(em, _opmath(dtype))
    var, mean = _variance(em, cast(em, x, _opmath(dtype)), *_var_args(x, dim, correction),
                          squares)
    return cast(em, _norm_root(em, var, 2.0) if root else var, dtype), cast(em, mean, dtype)


def _var_args(x: ir.Value, dim: Any, correction: Any, unbiased: Any = None) -> tuple[list[int], float]:
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return norm_dims(dim, spec(x).rank), float(correction)


@handles(aten.var.correction, aten.std.correction)
def _var_std(em: Emit, x: ir.Value, dim: Any = None, *, correction: Any = None,
             keepdim: bool = False) -> ir.Value:
    spread, _ = _moments(em, x, dim, correction, root=em.node.target is aten.std.correction)
    return _keep(em, spread)


def _norm_root(em: Emit, s: ir.Value, p: float) -> ir.Value:
    """s ** (1/p) for s >= 0, whose gradient is 0 where s is 0 (eager's rule for a norm or
    std of zeros), not 0/0: the root reads 1 there, and a select returns 0."""
    b = em.b
    zero = b.compare(s, full_as(em, s, 0.0), direction="eq")
    safe = b.select(zero, full_as(em, s, 1.0), s)
    root = b.sqrt(safe) if p == 2.0 else b.pow(safe, full_as(em, safe, 1.0 / p))
    return b.select(zero, full_as(em, s, 0.0), root)


@handles(aten.linalg_vector_norm.default)
def _vector_norm(em: Emit, x: ir.Value, ord: float = 2.0, dim: Any = None,
                 keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    """torch's decomposition, sum(|x|**p) ** (1/p), with eager's gradient at a zero norm."""
    out = em.out0
    ct = _opmath(out.dtype)
    x = coerce(em, x, ct, spec(x).shape)
    dims = norm_dims(dim, spec(x).rank)
    if spec(x).rank == 0:
        x, dims = reshape(em, x, (1,)), [0]
    return cast(em, reshape(em, _p_norm(em, x, float(ord), dims), out.shape), out.dtype)


def _p_norm(em: Emit, x: ir.Value, p: float, dims: Sequence[int]) -> ir.Value:
    """The p-norm of float `x` over `dims` (dropped), with eager's gradient at 0."""
    b = em.b
    if p == 2.0:  # the common case: x * x, no abs
        return _norm_root(em, b.reduce_sum(b.mul(x, x), dims=dims), p)
    if p == 0.0:
        return b.reduce_sum(b.convert(b.compare(x, full_as(em, x, 0.0), direction="ne"),
                                      dtype=spec(x).dtype), dims=dims)
    a = b.abs(x)
    if math.isinf(p):
        return b.reduce_max(a, dims=dims) if p > 0 else b.reduce_min(a, dims=dims)
    if p == 1.0:
        return b.reduce_sum(a, dims=dims)
    return _norm_root(em, b.reduce_sum(b.pow(a, full_as(em, a, p)), dims=dims), p)


@handles(aten._cdist_forward.default)
def _cdist(em: Emit, x1: ir.Value, x2: ir.Value, p: float,
           compute_mode: int | None = None) -> ir.Value:
    """p-norms of the row differences [.., P, R, M] over M (what eager's kernel does below
    25 rows; cdist itself takes the matmul form for p = 2 beyond that)."""
    out = em.out0
    ct = _opmath(out.dtype)
    *batch, rows1, rows2 = out.shape
    m = spec(x1).shape[-1]

    def spread(x: ir.Value, at: int) -> ir.Value:
        s = spec(x).shape
        kept = [1] * (len(batch) - (len(s) - 2)) + list(s[:-1])
        kept.insert(len(batch) + at, 1)
        return em.b.broadcast_to(reshape(em, cast(em, x, ct), (*kept, m)),
                                 (*batch, rows1, rows2, m))
    diff = em.b.sub(spread(x1, 1), spread(x2, 0))
    return cast(em, _p_norm(em, diff, float(p), [len(batch) + 2]), out.dtype)


@handles(aten._pdist_forward.default)
def _pdist(em: Emit, x: ir.Value, p: float = 2.0) -> ir.Value:
    """p-norms of the differences of rows i < j (eager's order), the pairs gathered by
    constant row tables."""
    out = em.out0
    n, m = spec(x).shape
    if out.numel == 0:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=0.0)
    first, second = torch.triu_indices(n, n, offset=1)
    rows = [em.b.index_select(x, em.b.constant(t.to(torch.int64)), dim=0) for t in (first, second)]
    diff = em.b.sub(*(cast(em, r, _opmath(out.dtype)) for r in rows))
    return cast(em, _p_norm(em, diff, float(p), [1]), out.dtype)


@handles(aten.var_mean.correction, aten.std_mean.correction)
def _var_std_mean(em: Emit, x: ir.Value, dim: Any = None, *, correction: Any = None,
                  keepdim: bool = False) -> list[ir.Value]:
    spread, mean = _moments(em, x, dim, correction,
                            root=em.node.target is aten.std_mean.correction)
    return [reshape(em, spread, em.out[0].shape), reshape(em, mean, em.out[1].shape)]


def _minmax(dg_op: str) -> Callable:
    def handler(em: Emit, x: ir.Value, dim: Any = None, keepdim: bool = False) -> ir.Value:
        r = em.b.create(dg_op, [x], dims=norm_dims(dim, spec(x).rank))
        return _keep(em, r)
    return handler


def _read_evenly(em: Emit, x: ir.Value, value: ir.Value) -> ir.Value:
    """`value`, a 0-d value of float `x`, with eager's gradient for max(), min(), median()
    and nanmedian() without a dim: shared by the elements equal to it, the NaNs where it
    is NaN (`dg.evenly_read`)."""
    return em.b.evenly_read(x, value) if is_float(spec(x).dtype) else value


def _extremum(dg_op: str) -> Callable:
    """max()/min() without a dim: eager's gradient is `_read_evenly`'s, not amax's (which
    gives every element NaN where the result is NaN)."""
    def handler(em: Emit, x: ir.Value) -> ir.Value:
        return _read_evenly(em, x, em.b.create(dg_op, [x], dims=list(range(spec(x).rank))))
    return handler


handles(aten.amax.default)(_minmax("reduce_max"))
handles(aten.amin.default)(_minmax("reduce_min"))
handles(aten.max.default)(_extremum("reduce_max"))
handles(aten.min.default)(_extremum("reduce_min"))


def _any_all(dg_op: str) -> Callable:
    def handler(em: Emit, x: ir.Value, dim: Any = None, keepdim: bool = False) -> ir.Value:
        s = spec(x)
        if s.numel == 0:
            raise Unsupported("any/all of an empty tensor")
        r = em.b.create(dg_op, [to_bool(em, x, s.shape)], dims=norm_dims(dim, s.rank))
        return cast(em, _keep(em, r), em.out0.dtype)
    return handler


handles(aten.any.default, aten.any.dim, aten.any.dims)(_any_all("reduce_max"))
handles(aten.all.default, aten.all.dim, aten.all.dims)(_any_all("reduce_min"))


def _arg_reduce(dg_op: str) -> Callable:
    def handler(em: Emit, x: ir.Value, dim: int | None = None, keepdim: bool = False) -> ir.Value:
        s = spec(x)
        if dim is None or s.rank == 0:
            x, dim = reshape(em, x, (s.numel,)), 0
        r = em.b.create(dg_op, [x], dim=norm_dim(dim, spec(x).rank))
        return _keep(em, r)
    return handler


handles(aten.argmax.default)(_arg_reduce("argmax"))
handles(aten.argmin.default)(_arg_reduce("argmin"))


def _value_and_index(arg_op: str) -> Callable:
    def handler(em: Emit, x: ir.Value, dim: int, keepdim: bool = False) -> list[ir.Value]:
        s = spec(x)
        if s.rank == 0:
            return [x, em.b.full(shape=(), dtype="i64", value=0.0)]
        d = norm_dim(dim, s.rank)
        index = em.b.create(arg_op, [x], dim=d)
        # the value at the index, not the reduction: eager's gradient goes to that one
        # element, where a reduction's would be shared by tied maxima
        kept = tuple(1 if i == d else n for i, n in enumerate(s.shape))
        values = em.b.gather(x, reshape(em, index, kept), dim=d)
        return [reshape(em, values, em.out[0].shape), reshape(em, index, em.out[1].shape)]
    return handler


handles(aten.max.dim)(_value_and_index("argmax"))
handles(aten.min.dim)(_value_and_index("argmin"))

# topk unrolls one selection round per k: a mixture-of-experts router (k of 2-8 over
# 8-256 experts) is a few reductions; a larger k is a sort
TOPK_MAX_K = 16


@handles(aten.topk.default)
def _topk(em: Emit, x: ir.Value, k: int, dim: int = -1, largest: bool = True,
          sorted: bool = True) -> list[ir.Value]:
    """k rounds of arg-max (arg-min) over the elements not taken yet (beyond TOPK_MAX_K
    rounds, a sort), in a stable sort's order: NaN is the largest value, ties go to the
    lower index (eager's CPU topk leaves ties in its selection algorithm's order, which
    no cheap rule reproduces: frontend.md). A round whose best is the
    masking value itself (every remaining element is -inf, or +inf / NaN for the
    smallest; for integers the row's extreme) takes the first remaining element
    instead, non-NaN before NaN. The values
    are a gather of the chosen indices, so their gradient is the gather's."""
    s = spec(x)
    if s.rank == 0:
        if k != 1:
            raise Unsupported(f"topk of k={k} from a 0-d tensor")
        return [x, em.b.full(shape=(), dtype="i64", value=0.0)]
    d = norm_dim(dim, s.rank)
    if is_size(s.shape[d]):  # k rounds over a dim of symbolic size, or a sort by rank
        if k < 1 or not decided(em, k <= s.shape[d], "topk's k in range"):
            raise Unsupported(f"topk with k={k} of {s.shape[d]} (compiled for 1 <= k <= "
                              "the dim's size)")
        if k > TOPK_MAX_K and s.dtype != "i1":
            values, indices = _sort_by_rank(em, x, d, descending=largest)
            return [slice_dim(em, v, d, 0, k) for v in (values, indices)]
    elif k > TOPK_MAX_K and k <= s.shape[d] <= SORT_MAX_N:
        values, indices = _sort(em, x, d, descending=largest)
        return [slice_dim(em, v, d, 0, k) for v in (values, indices)]
    elif not 1 <= k <= min(s.shape[d], TOPK_MAX_K):
        raise Unsupported(f"topk with k={k} of {s.shape[d]} (compiled for 1 <= k <= "
                          f"{TOPK_MAX_K}, or a sort of up to {SORT_MAX_N})")
    if s.dtype == "i1":
        raise Unsupported("topk of a bool tensor")
    kept = tuple(1 if i == d else n for i, n in enumerate(s.shape))
    where = em.b.iota(shape=s.shape, dtype="i64", dim=d)
    taken_none = em.b.full(shape=s.shape, dtype="i1", value=1.0)
    if is_float(s.dtype):
        masking = full_as(em, x, float("-inf") if largest else float("inf"))
        # NaN is the largest: the smallest rounds leave it out of the arg-min
        number = em.b.compare(x, x, direction="eq")
    else:  # the row's own extreme (an i64 bound has no exact float attribute)
        extreme = em.b.create("reduce_min" if largest else "reduce_max", [x], dims=[d])
        masking = em.b.broadcast_in_dim(extreme, shape=s.shape,
                                        dims=[i for i in range(s.rank) if i != d])
        number = taken_none
    remaining, chosen = taken_none, []
    for _ in range(k):
        numbers_left = em.b.create("and", [remaining, number])
        candidate = remaining if largest else numbers_left
        masked = em.b.select(candidate, x, masking)
        best = reshape(em, em.b.create("argmax" if largest else "argmin", [masked], dim=d),
                       kept)
        # the first remaining element, a number if one is left
        score = em.b.add(cast(em, remaining, "f32"), cast(em, numbers_left, "f32"))
        first = reshape(em, em.b.argmax(score, dim=d), kept)
        valid = em.b.compare(em.b.gather(cast(em, candidate, "f32"), best, dim=d),
                             em.b.full(shape=kept, dtype="f32", value=0.5), direction="gt")
        index = em.b.select(valid, best, first)
        chosen.append(index)
        spread = em.b.broadcast_in_dim(reshape(em, index, [n for i, n in enumerate(kept)
                                                           if i != d]),
                                       shape=s.shape, dims=[i for i in range(s.rank) if i != d])
        remaining = em.b.create("and", [remaining, em.b.compare(where, spread, direction="ne")])
    indices = chosen[0] if k == 1 else em.b.concat(chosen, dim=d)
    return [em.b.gather(x, indices, dim=d), indices]


# sorts along dims up to this long are compiled (a bitonic network of
# log2(n) (log2(n) + 1) / 2 compare-exchange stages: 91 for 8192)
SORT_MAX_N = 8192


@handles(aten.sort.default, aten.sort.stable)
def _sort(em: Emit, x: ir.Value, dim: int = -1, descending: bool = False, *,
          stable: bool | None = None) -> list[ir.Value]:
    """A bitonic sorting network over (key, index) pairs, in the order of a stable sort
    (eager's on the CPU): ties keep their index order and NaN is the largest value. The
    dim goes last, padded to a power of two with elements that sort after everything.
    Each stage compares every element with its partner j places away (the two halves
    of [.., groups, 2, j]) and keeps or swaps the pair by its group's direction. The
    values are a gather of the sorted indices, so their gradient is the gather's."""
    s = spec(x)
    if s.rank == 0:
        return [x, em.b.full(shape=(), dtype="i64", value=0.0)]
    d = norm_dim(dim, s.rank)
    n = s.shape[d]
    if is_size(n):
        return _sort_by_rank(em, x, d, descending)
    if n > SORT_MAX_N:
        raise Unsupported(f"sort along a dim of {n} elements (compiled up to {SORT_MAX_N})")
    if n <= 1 or s.numel == 0:
        return [x, em.b.full(shape=s.shape, dtype="i64", value=0.0)]
    keys, perm = _keys_last(em, x, d)
    rows = s.numel // n
    keys = reshape(em, keys, (rows, n))
    size = 1 << (n - 1).bit_length()
    if size != n:
        keys = em.b.pad(keys, low=[0, 0], high=[0, size - n], interior=[0, 0], value=0.0)
    index = em.b.iota(shape=(rows, size), dtype="i64", dim=1)
    k = 2
    while k <= size:
        j = k // 2
        while j:
            keys, index = _compare_exchange(em, keys, index, n, k, j, descending)
            j //= 2
        k *= 2
    if size != n:
        index = em.b.slice(index, start=[0, 0], limit=[rows, n], stride=[1, 1])
    moved = [s.shape[k] for k in perm]
    index = _unpermute(em, reshape(em, index, moved), perm)
    return [em.b.gather(x, index, dim=d), index]


@handles(aten.median.default, aten.median.dim, aten.nanmedian.default, aten.nanmedian.dim,
         aten.kthvalue.default)
def _order_statistic(em: Emit, x: ir.Value, *args: Any) -> list[ir.Value] | ir.Value:
    """An element at a position of the stably sorted dim: median the lower middle one, or
    the first NaN where there is one (NaN sorts last, so that is the position after the
    numbers); nanmedian the lower middle of the numbers; kthvalue the k-th (NaN the
    largest). Along a dim it is a gather, so the gradient goes to that element, as
    eager's; without one eager shares it among the elements equal to it
    (`_read_evenly`)."""
    b = em.b
    target = em.node.target
    name = target._overloadpacket.__name__
    if target is aten.kthvalue.default:
        k, dim = args[0], args[1] if len(args) > 1 else -1
    else:
        k, dim = None, args[0] if args else None
    s = spec(x)
    if dim is None:
        x, d = reshape(em, x, (s.numel,)), 0
    else:
        d = norm_dim(dim, s.rank) if s.rank else 0
    if spec(x).rank == 0:
        x = reshape(em, x, (1,))
    values, index = _sort(em, x, d)
    shape = list(spec(x).shape)
    n = shape[d]
    if n == 0:
        raise Unsupported(f"{name} of an empty dim")
    at = [*shape[:d], 1, *shape[d + 1:]]
    if k is not None:
        position = b.full(shape=at, dtype="i64", value=float(k - 1))
    else:
        numbers = cast(em, b.create("not", [b.compare(x, x, direction="ne")]), "i64")
        count = reshape(em, b.reduce_sum(numbers, dims=[d]), at)
        if name == "median":
            middle = b.full(shape=at, dtype="i64", value=float((n - 1) // 2))
            position = b.select(b.compare(count, full_as(em, count, float(n)), direction="lt"),
                                count, middle)
        else:  # the lower middle of the numbers: (count - 1) // 2, 0 when all are NaN
            position = b.div(b.max(b.sub(count, full_as(em, count, 1.0)),
                                   full_as(em, count, 0.0)), full_as(em, count, 2.0))
    value = b.gather(values, position, dim=d)
    where = b.gather(index, position, dim=d)
    if dim is None:
        value = _read_evenly(em, x, reshape(em, value, ()))
    results = [reshape(em, value, em.out[0].shape)]
    if len(em.out) > 1:
        results.append(reshape(em, where, em.out[1].shape))
    return results if len(results) > 1 else results[0]


def _compare_exchange(em: Emit, keys: ir.Value, index: ir.Value, n: int, k: int, j: int,
                      descending: bool) -> tuple[ir.Value, ir.Value]:
    """One bitonic stage: elements i and i + j of each group of 2j, in increasing order
    where bit k of i is clear (decreasing where set)."""
    b = em.b
    rows, size = spec(keys).shape
    groups = size // (2 * j)
    split = (rows, groups, 2, j)

    def halves(v: ir.Value) -> tuple[ir.Value, ir.Value]:
        v = reshape(em, v, split)
        first = b.slice(v, start=[0, 0, 0, 0], limit=[rows, groups, 1, j], stride=[1] * 4)
        second = b.slice(v, start=[0, 0, 1, 0], limit=[rows, groups, 2, j], stride=[1] * 4)
        return first, second
    ka, kb = halves(keys)
    ia, ib = halves(index)
    increasing = [((g * 2 * j) & k) == 0 for g in range(groups)]
    direction = b.broadcast_in_dim(b.constant(torch.tensor(increasing)),
                                   shape=spec(ka).shape, dims=[1])
    swap = b.select(direction, _sorts_before(em, kb, ib, ka, ia, n, descending),
                    _sorts_before(em, ka, ia, kb, ib, n, descending))
    joined = [reshape(em, b.concat([b.select(swap, hi, lo), b.select(swap, lo, hi)], dim=2),
                      (rows, size)) for lo, hi in ((ka, kb), (ia, ib))]
    return joined[0], joined[1]


def _keys_last(em: Emit, x: ir.Value, d: int) -> tuple[ir.Value, list[int]]:
    """The sort keys: `x` with dim `d` moved last (bools as i32), and that permutation."""
    s = spec(x)
    perm = [k for k in range(s.rank) if k != d] + [d]
    keys = _permute(em, x, perm)
    return (cast(em, keys, "i32") if s.dtype == "i1" else keys), perm


def _sort_by_rank(em: Emit, x: ir.Value, d: int, descending: bool) -> list[ir.Value]:
    """A stable sort along a dim of symbolic size, where no network can be laid out: each
    element's place is the count of the elements that sort before it (`_comes_before`:
    every element against every other one, fused into the count as searchsorted's), and
    the sorted indices are the scatter of the positions to those places. O(n^2) work
    per row, O(n) memory: what a mixture-of-experts router sorts (a token-expert pair
    per selected expert) is small. The values are a gather of the indices, as
    `_sort`'s."""
    b = em.b
    keys, perm = _keys_last(em, x, d)
    moved = tuple(spec(keys).shape)
    last = len(moved) - 1
    pairs = (*moved, moved[-1])  # [..., i, j]: element i against element j
    key_i = b.broadcast_in_dim(keys, shape=pairs, dims=list(range(last + 1)))
    key_j = b.broadcast_in_dim(keys, shape=pairs, dims=[*range(last), last + 1])
    at_i = b.iota(shape=pairs, dtype="i64", dim=last)
    at_j = b.iota(shape=pairs, dtype="i64", dim=last + 1)
    j_first = _comes_before(em, key_j, at_j, key_i, at_i, descending)
    place = b.reduce_sum(cast(em, j_first, "i64"), dims=[last + 1])
    positions = b.iota(shape=moved, dtype="i64", dim=last)
    order = b.scatter(b.full(shape=moved, dtype="i64", value=0.0), place, positions, dim=last)
    index = _unpermute(em, order, perm)
    return [b.gather(x, index, dim=d), index]


def _comes_before(em: Emit, ka: ir.Value, ia: ir.Value, kb: ir.Value, ib: ir.Value,
                  descending: bool) -> ir.Value:
    """Whether element (ka, ia) comes before (kb, ib) in a stable sort: by key (NaN the
    largest), then by index."""
    b = em.b

    def both(x, y):
        return b.create("and", (x, y))

    def either(x, y):
        return b.create("or", (x, y))
    if is_float(spec(ka).dtype):
        nan_a, nan_b = (b.compare(v, v, direction="ne") for v in (ka, kb))
        if descending:
            ahead = either(b.compare(ka, kb, direction="gt"),
                           both(nan_a, b.create("not", (nan_b,))))
        else:
            ahead = either(b.compare(ka, kb, direction="lt"),
                           both(nan_b, b.create("not", (nan_a,))))
        tie = either(b.compare(ka, kb, direction="eq"), both(nan_a, nan_b))
    else:
        ahead = b.compare(ka, kb, direction="gt" if descending else "lt")
        tie = b.compare(ka, kb, direction="eq")
    return either(ahead, both(tie, b.compare(ia, ib, direction="lt")))


def _sorts_before(em: Emit, ka: ir.Value, ia: ir.Value, kb: ir.Value, ib: ir.Value, n: int,
                  descending: bool) -> ir.Value:
    """Whether element (ka, ia) comes before (kb, ib): padding (index >= n) last, then
    `_comes_before`."""
    b = em.b
    limit = full_as(em, ia, float(n))
    pad_a, pad_b = (b.compare(i, limit, direction="ge") for i in (ia, ib))
    same_kind = b.compare(pad_a, pad_b, direction="eq")
    return b.select(same_kind, _comes_before(em, ka, ia, kb, ib, descending), pad_b)


@handles(aten.histc.default)
def _histc(em: Emit, x: ir.Value, bins: int = 100, min: float = 0, max: float = 0) -> ir.Value:
    """Counts per bin as a comparison of every element's bin with every bin, summed:
    O(elements x bins), fine for the router statistics it serves (a mixture of experts'
    tokens per expert). Bins as eager's: (x - lo) / (hi - lo) * bins truncated, x == hi
    in the last bin, out-of-range values and NaN in none; min == max takes the data's
    range (widened by 1 each way if that is a single value)."""
    b = em.b
    s = spec(x)
    if not is_float(s.dtype):
        raise Unsupported(f"histc of {s.dtype}")
    ct = _opmath(s.dtype)
    flat = reshape(em, cast(em, x, ct), (s.numel,))
    if min == max:
        lo, hi = (reshape(em, b.create(op, [flat], dims=[0]), (1,))
                  for op in ("reduce_min", "reduce_max"))
        if min != 0 or max != 0:  # eager: equal bounds other than 0, 0 widen them
            lo = b.full(shape=(1,), dtype=ct, value=float(min) - 1)
            hi = b.full(shape=(1,), dtype=ct, value=float(max) + 1)
        else:
            same = b.compare(lo, hi, direction="eq")
            one = b.full(shape=(1,), dtype=ct, value=1.0)
            lo, hi = b.select(same, b.sub(lo, one), lo), b.select(same, b.add(hi, one), hi)
        lo, hi = (b.broadcast_to(v, (s.numel,)) for v in (lo, hi))
    else:
        lo = b.full(shape=(s.numel,), dtype=ct, value=float(min))
        hi = b.full(shape=(s.numel,), dtype=ct, value=float(max))
    scaled = b.mul(b.div(b.sub(flat, lo), b.sub(hi, lo)), full_as(em, flat, float(bins)))
    index = b.convert(b.floor(scaled), dtype="i64")
    last = b.full(shape=(s.numel,), dtype="i64", value=float(bins - 1))
    index = b.select(b.compare(flat, hi, direction="eq"), last, index)
    inside = b.create("and", (b.compare(flat, lo, direction="ge"),
                               b.compare(flat, hi, direction="le")))
    index = b.select(inside, index, b.full(shape=(s.numel,), dtype="i64", value=-1.0))
    grid = (s.numel, bins)
    hits = b.compare(b.broadcast_in_dim(index, shape=grid, dims=[0]),
                     b.iota(shape=grid, dtype="i64", dim=1), direction="eq")
    return cast(em, b.reduce_sum(cast(em, hits, ct), dims=[0]), em.out0.dtype)


@handles(aten.bucketize.Tensor, aten.bucketize.Scalar)
def _bucketize(em: Emit, x: Any, boundaries: ir.Value, *, out_int32: bool = False,
               right: bool = False) -> ir.Value:
    return _search_sorted(em, boundaries, x, right)


@handles(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def _searchsorted(em: Emit, sorted_sequence: ir.Value, x: Any, *, out_int32: bool = False,
                  right: bool = False, side: str | None = None,
                  sorter: ir.Value | None = None) -> ir.Value:
    if sorter is not None:
        sorted_sequence = em.b.gather(sorted_sequence, sorter, dim=spec(sorted_sequence).rank - 1)
    return _search_sorted(em, sorted_sequence, x, right if side is None else side == "right")


def _search_sorted(em: Emit, seq: ir.Value, x: Any, right: bool) -> ir.Value:
    """Where each value would go in the sorted last dim of `seq`: the count of the
    elements it comes after, compared as eager's binary search compares (not b >= x, or
    not b > x for `right`, so NaN values go last), every value with every element
    (values x elements work, fused into the count). Same as eager's search for any
    sequence without NaN (eager's result with NaN in the sequence depends on where its
    search looks)."""
    b = em.b
    out = em.out0
    ss = spec(seq)
    ct = ss.dtype if not isinstance(x, ir.Value) else \
        from_torch_dtype(torch.promote_types(torch_dtype(ss.dtype), torch_dtype(spec(x).dtype)))
    shape = (*out.shape, ss.shape[-1])
    r = len(out.shape)
    values = b.broadcast_in_dim(coerce(em, x, ct, out.shape), shape=shape, dims=list(range(r)))
    lead = list(range(r - 1)) if ss.rank > 1 else []
    elements = b.broadcast_in_dim(cast(em, seq, ct), shape=shape, dims=[*lead, r])
    before = b.create("not", [b.compare(elements, values, direction="gt" if right else "ge")])
    return cast(em, b.reduce_sum(cast(em, before, "i64"), dims=[r]), out.dtype)

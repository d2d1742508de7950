"""Indexing: gather/scatter (scatter_reduce, index_reduce), embedding and
embedding_bag, advanced indexing (index, index_put) and masked_scatter."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.fx
from mlir import ir

from ...dialects.builder import spec
from ...dialects.types import is_float
from .emit import (
    _BOOL_ARITH, Emit, Unavailable, Unsupported, _opmath, _running_sum, aten, broadcast_shapes,
    cast, coerce, full_as, handles, norm_dim, reshape, scalar_like, to_bool,
)
from .shapes import _permute, _unpermute


def _wrap_negative(em: Emit, idx: ir.Value, size: int) -> ir.Value:
    b = em.b
    neg = b.compare(idx, full_as(em, idx, 0.0), direction="lt")
    return b.select(neg, b.add(idx, scalar_like(em, idx, size)), idx)


@handles(aten.gather.default)
def _gather(em: Emit, x: ir.Value, dim: int, index: ir.Value, *, sparse_grad: bool = False) -> ir.Value:
    s = spec(x)
    if s.rank == 0:
        return reshape(em, em.b.gather(reshape(em, x, (1,)), reshape(em, index, (1,)), dim=0),
                       em.out0.shape)
    return em.b.gather(x, index, dim=norm_dim(dim, s.rank))


@handles(aten.index_select.default)
def _index_select(em: Emit, x: ir.Value, dim: int, index: ir.Value) -> ir.Value:
    s = spec(x)
    if s.rank == 0:
        return reshape(em, x, em.out0.shape)
    idx = reshape(em, index, (spec(index).numel,))
    return reshape(em, em.b.index_select(x, idx, dim=norm_dim(dim, s.rank)), em.out0.shape)


@handles(aten.scatter_add.default, aten.scatter.src, aten.scatter.value)
def _scatter(em: Emit, x: ir.Value, dim: int, index: ir.Value, src: Any) -> ir.Value:
    """scatter_add, or scatter (of a tensor or a scalar): in order, so of repeated
    indices the last one stays, as eager's CPU kernel does."""
    op = "scatter_add" if em.node.target is aten.scatter_add.default else "scatter"
    s = spec(x)
    if spec(index).numel == 0:
        return x
    ishape = spec(index).shape
    if not isinstance(src, ir.Value):
        src = em.b.full(shape=ishape, dtype=s.dtype, value=float(src))
    if s.rank == 0:
        r = em.b.create(op, [reshape(em, x, (1,)), reshape(em, index, (1,)),
                             reshape(em, src, (1,))], dim=0)
        return reshape(em, r, s.shape)
    src = cast(em, src, s.dtype)
    if spec(src).shape != ishape:
        src = em.b.slice(src, start=[0] * s.rank, limit=list(ishape), stride=[1] * s.rank)
    return em.b.create(op, [x, index, src], dim=norm_dim(dim, s.rank))


# scatter_reduce's combining reductions: the dg op and its identity
_SCATTER_COMBINE = {"amax": ("scatter_max", float("-inf")), "amin": ("scatter_min", float("inf")),
                    "prod": ("scatter_mul", 1.0)}


@handles(aten.scatter_reduce.two)
def _scatter_reduce(em: Emit, x: ir.Value, dim: int, index: ir.Value, src: ir.Value,
                    reduce: str, *, include_self: bool = True) -> ir.Value:
    """sum and mean (a graph network's aggregations) by scatter_adds of the values and of
    their counts; amax/amin/prod by dg.scatter_max/min/mul, from the reduction's identity
    where x is left out. Positions no index reaches keep x."""
    s = spec(x)
    b = em.b
    if spec(index).numel == 0:
        return x
    if s.rank == 0:
        one = [reshape(em, v, (1,)) for v in (x, index, src)]
        return reshape(em, _scatter_reduce(em, *one[:1], 0, *one[1:], reduce,
                                           include_self=include_self), ())
    if reduce == "mean" and not is_float(s.dtype):
        raise Unsupported("scatter_reduce mean of an integer tensor (eager floors it)")
    if s.dtype == "i1":  # a sum of booleans is their or, a product their and
        reduce = {"sum": "amax", "prod": "amin"}.get(reduce, reduce)
    d = norm_dim(dim, s.rank)
    ishape = spec(index).shape
    src = cast(em, src, s.dtype)
    if spec(src).shape != ishape:
        src = b.slice(src, start=[0] * s.rank, limit=list(ishape), stride=[1] * s.rank)
    count_dtype = s.dtype if is_float(s.dtype) else "i64"
    counts = b.create("scatter_add", [b.full(shape=s.shape, dtype=count_dtype, value=0.0), index,
                                      b.full(shape=ishape, dtype=count_dtype, value=1.0)], dim=d)
    reached = b.compare(counts, full_as(em, counts, 0.0), direction="gt")
    if reduce in _SCATTER_COMBINE:
        op, identity = _SCATTER_COMBINE[reduce]
        if s.dtype == "i1":
            identity = 0.0 if reduce == "amax" else 1.0
        base = x if include_self else b.select(reached, full_as(em, x, identity), x)
        return b.create(op, [base, index, src], dim=d)
    total = b.create("scatter_add", [b.full(shape=s.shape, dtype=s.dtype, value=0.0), index, src],
                     dim=d)
    if include_self:
        total = b.add(total, x)
        counts = b.add(counts, full_as(em, counts, 1.0))
    if reduce == "mean":
        total = b.div(total, b.max(counts, full_as(em, counts, 1.0)))
    return b.select(reached, total, x)


@handles(aten.index_reduce.default)
def _index_reduce(em: Emit, x: ir.Value, dim: int, index: ir.Value, source: ir.Value,
                  reduce: str, *, include_self: bool = True) -> ir.Value:
    """scatter_reduce with the 1-D index broadcast along `dim` over the source."""
    s, src = spec(x), spec(source)
    if s.rank == 0:
        return reshape(em, _index_reduce(em, reshape(em, x, (1,)), 0, index,
                                         reshape(em, source, (1,)), reduce,
                                         include_self=include_self), ())
    d = norm_dim(dim, s.rank)
    wide = em.b.broadcast_in_dim(reshape(em, index, (spec(index).numel,)), shape=src.shape,
                                 dims=[d])
    return _scatter_reduce(em, x, d, wide, source, reduce, include_self=include_self)


def _plain_weight_gradient(scale_grad_by_freq: bool, sparse: bool) -> None:
    """An embedding's options that change only its weight's gradient, which dg derives
    from the forward: scaled by frequency, or a sparse COO tensor (which SparseAdam
    requires; dg's gradients are dense). Such a lookup runs eagerly (it is one gather)."""
    if scale_grad_by_freq:
        raise Unsupported("scale_grad_by_freq=True")
    if sparse:
        raise Unsupported("sparse=True (its weight's gradient is a sparse tensor; fusegrad "
                          "computes dense ones)")


@handles(aten.embedding.default)
def _embedding(em: Emit, weight: ir.Value, indices: ir.Value, padding_idx: int = -1,
               scale_grad_by_freq: bool = False, sparse: bool = False) -> ir.Value:
    _plain_weight_gradient(scale_grad_by_freq, sparse)
    rows = em.b.index_select(weight, indices, dim=0)
    if padding_idx is None or padding_idx < 0:
        return rows
    # the padding row gets no gradient from the lookup (as eager's embedding_backward):
    # padding tokens read it through stop_gradient
    shape = spec(rows).shape
    is_pad = em.b.compare(indices, full_as(em, indices, float(padding_idx)), direction="eq")
    is_pad = em.b.broadcast_in_dim(is_pad, shape=shape, dims=list(range(len(shape) - 1)))
    return em.b.select(is_pad, em.b.stop_gradient(rows), rows)


# embedding_bag in max mode compares every bag with every index: at most this many
# bag x index x feature elements
EMBEDDING_BAG_MAX_GRID = 1 << 24


@handles(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def _embedding_bag(em: Emit, weight: ir.Value, indices: ir.Value, offsets: ir.Value,
                   scale_grad_by_freq: bool = False, mode: int = 0, sparse: bool = False,
                   per_sample_weights: ir.Value | None = None,
                   include_last_offset: bool = False, padding_idx: int = -1) -> list[Any]:
    """The looked-up rows summed into their bags by one scatter_add (sum, and mean divided
    by each bag's count), or, for max, each bag's rows selected from all rows (bags x
    indices x features work). A row's bag is the number of offsets at or before it,
    less one; padding_idx rows count in no bag; empty bags are 0, as eager's."""
    _plain_weight_gradient(scale_grad_by_freq, sparse)
    b = em.b
    out = em.out0
    acc = _opmath(out.dtype)  # 16-bit floats sum in f32, as eager's
    bags, dim = out.shape
    n = spec(indices).shape[0]
    rows = cast(em, b.index_select(weight, indices, dim=0), acc)
    counted = b.full(shape=(n,), dtype="i1", value=1.0) if padding_idx is None or \
        padding_idx < 0 else b.compare(indices, full_as(em, indices, float(padding_idx)),
                                       direction="ne")
    length = _equal_bags(em.node.args[2], n, bags, include_last_offset)
    if length:
        return [cast(em, _equal_bag_reduce(em, rows, counted, per_sample_weights, mode,
                                           length), out.dtype), *_embedding_bag_aux()]
    starts = offsets
    if include_last_offset:
        starts = b.slice(offsets, start=[0], limit=[bags], stride=[1])
    # a row's bag: the bag starts at or before it, less one (a scan of start marks)
    marks = b.create("scatter_add", [b.full(shape=(n + 1,), dtype="i64", value=0.0),
                                     cast(em, starts, "i64"),
                                     b.full(shape=(bags,), dtype="i64", value=1.0)], dim=0)
    marks = b.slice(marks, start=[0], limit=[n], stride=[1])
    bag = _running_sum(em, marks, 0)
    bag = b.sub(bag, full_as(em, bag, 1.0))
    if mode == 2:
        if n * bags * dim > EMBEDDING_BAG_MAX_GRID:
            raise Unsupported(f"embedding_bag max mode over {bags} bags x {n} indices x "
                              f"{dim} features (compiled up to {EMBEDDING_BAG_MAX_GRID})")
        cube, grid = (bags, n, dim), (bags, n)
        member = b.create("and", [b.compare(b.broadcast_in_dim(bag, shape=grid, dims=[1]),
                                            b.iota(shape=grid, dtype="i64", dim=0),
                                            direction="eq"),
                                  b.broadcast_in_dim(counted, shape=grid, dims=[1])])
        member = b.broadcast_in_dim(member, shape=cube, dims=[0, 1])
        candidates = b.select(member, b.broadcast_in_dim(rows, shape=cube, dims=[1, 2]),
                              b.full(shape=cube, dtype=acc, value=-math.inf))
        result = b.reduce_max(candidates, dims=[1])
        empty = b.compare(result, full_as(em, result, -math.inf), direction="eq")
        result = b.select(empty, full_as(em, result, 0.0), result)
    else:
        if per_sample_weights is not None:
            rows = b.mul(rows, b.broadcast_in_dim(cast(em, per_sample_weights, acc),
                                                  shape=(n, dim), dims=[0]))
        rows = b.select(b.broadcast_in_dim(counted, shape=(n, dim), dims=[0]), rows,
                        b.full(shape=(n, dim), dtype=acc, value=0.0))
        target = b.broadcast_in_dim(bag, shape=(n, dim), dims=[0])
        result = b.create("scatter_add", [b.full(shape=(bags, dim), dtype=acc, value=0.0),
                                          target, rows], dim=0)
        if mode == 1:
            ones = cast(em, counted, "i64")
            count = b.create("scatter_add", [b.full(shape=(bags,), dtype="i64", value=0.0), bag,
                                             ones], dim=0)
            count = b.max(count, full_as(em, count, 1.0))
            result = b.div(result, b.broadcast_in_dim(cast(em, count, acc),
                                                      shape=(bags, dim), dims=[0]))
    return [cast(em, result, out.dtype), *_embedding_bag_aux()]


def _embedding_bag_aux() -> list[Unavailable]:
    """embedding_bag's other results, for eager's backward only."""
    return [Unavailable(f"embedding_bag's {what}")
            for what in ("offset2bag", "bag_size", "max_indices")]


def _equal_bags(offsets: Any, n: int, bags: int, include_last_offset: bool) -> int | None:
    """The common bag length when the offsets are `arange(0, n, length)` in the graph
    (EmbeddingBag's 2-d input), else None."""
    if not isinstance(offsets, torch.fx.Node) or offsets.target is not aten.arange.start_step:
        return None
    start, end, step = (list(offsets.args) + [1])[:3]
    if not all(isinstance(v, int) for v in (start, end, step)) or start != 0 or step <= 0:
        return None
    count = bags + 1 if include_last_offset else bags
    if len(range(start, end, step)) != count or bags * step != n:
        return None
    return step


def _equal_bag_reduce(em: Emit, rows: ir.Value, counted: ir.Value,
                      per_sample_weights: ir.Value | None, mode: int, length: int) -> ir.Value:
    """Bags of `length` consecutive rows: a reduction over [bags, length, dim], fused and
    threaded like any other, instead of a scatter."""
    b = em.b
    bags, dim = em.out0.shape
    dtype = spec(rows).dtype
    cube = (bags, length, dim)
    keep = b.broadcast_in_dim(reshape(em, counted, (bags, length)), shape=cube, dims=[0, 1])
    rows = reshape(em, rows, cube)
    if mode == 2:
        best = b.reduce_max(b.select(keep, rows, b.full(shape=cube, dtype=dtype,
                                                          value=-math.inf)), dims=[1])
        return b.select(b.compare(best, full_as(em, best, -math.inf), direction="eq"),
                        full_as(em, best, 0.0), best)
    if per_sample_weights is not None:
        rows = b.mul(rows, b.broadcast_in_dim(
            reshape(em, cast(em, per_sample_weights, dtype), (bags, length)),
            shape=cube, dims=[0, 1]))
    total = b.reduce_sum(b.select(keep, rows, b.full(shape=cube, dtype=dtype, value=0.0)),
                         dims=[1])
    if mode != 1:
        return total
    count = b.reduce_sum(cast(em, reshape(em, counted, (bags, length)), dtype), dims=[1])
    count = b.max(count, full_as(em, count, 1.0))
    return b.div(total, b.broadcast_in_dim(count, shape=(bags, dim), dims=[0]))


@dataclass(frozen=True)
class _Linearised:
    """x[indices] as one index_select: the indexed dims moved to the front and merged
    (`flat`), one i64 index per picked element (`linear`, `idx_shape` flattened), and
    where PyTorch puts the picked dims in the result."""

    flat: ir.Value  # [prod(indexed dims)] + rest dims
    linear: ir.Value  # [n]
    idx_shape: list[int]
    picked: list[int]
    rest: list[int]

    def result_perm(self) -> list[int] | None:
        """PyTorch keeps adjacent indexed dims in place: from [idx..., rest...] to the
        result's order, or None when that is already it."""
        adjacent = self.picked == list(range(self.picked[0], self.picked[-1] + 1))
        if not adjacent or self.picked[0] == 0:
            return None
        k, p = len(self.idx_shape), self.picked[0]
        return list(range(k, k + p)) + list(range(k)) + list(range(k + p, k + len(self.rest)))


def _linearise(em: Emit, x: ir.Value, indices: Sequence[ir.Value | None]) -> _Linearised:
    b = em.b
    s = spec(x)
    picked = [d for d, i in enumerate(indices) if i is not None]
    if any(spec(indices[d]).dtype in ("i1", "i8") for d in picked):
        raise Unsupported("boolean-mask indexing has a data-dependent shape")
    idx_shape = broadcast_shapes(em, *[spec(indices[d]).shape for d in picked])
    rest = [d for d in range(s.rank) if d not in picked]
    x = _permute(em, x, picked + rest)
    flat = reshape(em, x, [math.prod(s.shape[d] for d in picked)] + [s.shape[d] for d in rest])
    linear = None
    for d in picked:
        i = coerce(em, indices[d], "i64", idx_shape)
        i = _wrap_negative(em, i, s.shape[d])
        stride = math.prod(s.shape[e] for e in picked if e > d)
        if stride != 1:
            i = b.mul(i, scalar_like(em, i, stride))
        linear = i if linear is None else b.add(linear, i)
    linear = reshape(em, linear, (math.prod(idx_shape),))
    return _Linearised(flat, linear, idx_shape, picked, rest)


@handles(aten.index.Tensor)
def _index(em: Emit, x: ir.Value, indices: Sequence[ir.Value | None]) -> ir.Value:
    """Advanced indexing by integer tensors: linearise the indexed dims, index_select once."""
    s = spec(x)
    lin = _linearise(em, x, indices)
    r = em.b.index_select(lin.flat, lin.linear, dim=0)
    r = reshape(em, r, lin.idx_shape + [s.shape[d] for d in lin.rest])
    perm = lin.result_perm()
    return r if perm is None else _permute(em, r, perm)


@handles(aten.index_put.default)
def _index_put(em: Emit, x: ir.Value, indices: Sequence[ir.Value | None], values: ir.Value,
               accumulate: bool = False) -> ir.Value:
    """x with `values` added at x[indices] (index_add and `index_put_(..., accumulate=True)`)
    as one scatter_add over the linearised indexed dims, or stored there (`x[i] = v`) as
    one scatter: of repeated indices the last one stays, as eager's CPU kernel does."""
    b = em.b
    s = spec(x)
    masked = _broadcast_mask_put(em, x, indices, values, accumulate)
    if masked is not None:
        return masked
    lin = _linearise(em, x, indices)
    n, rest_shape = spec(lin.linear).shape[0], [s.shape[d] for d in lin.rest]
    perm = lin.result_perm()
    got = lin.idx_shape + rest_shape  # x[indices]'s shape, before PyTorch's permutation
    shown = got if perm is None else [got[p] for p in perm]
    v = coerce(em, values, s.dtype, shown)
    if perm is not None:
        v = _unpermute(em, v, perm)
    v = reshape(em, v, [n] + rest_shape)
    where = b.broadcast_in_dim(lin.linear, shape=[n] + rest_shape, dims=[0])
    out = b.create("scatter_add" if accumulate else "scatter", [lin.flat, where, v], dim=0)
    out = reshape(em, out, [s.shape[d] for d in lin.picked] + rest_shape)
    return _unpermute(em, out, lin.picked + lin.rest)


def _broadcast_mask_put(em: Emit, x: ir.Value, indices: Sequence[ir.Value | None],
                        values: ir.Value, accumulate: bool) -> ir.Value | None:
    """`x[mask] = v` (or `+=`) with a boolean mask over x's leading dims and a value that
    is the same for every selected element (no per-element leading dim): a select, with
    nothing data-dependent (Longformer marks its global tokens so). None otherwise."""
    s = spec(x)
    if len(indices) != 1 or indices[0] is None or spec(indices[0]).dtype not in ("i1", "i8"):
        return None
    mask = indices[0]
    k = spec(mask).rank
    if spec(mask).shape != s.shape[:k]:
        return None
    vs = spec(values)
    trailing = list(s.shape[k:])
    if vs.rank > len(trailing) + 1 or (vs.rank == len(trailing) + 1 and vs.shape[0] != 1):
        return None
    v = coerce(em, reshape(em, values, vs.shape[1:]) if vs.rank > len(trailing) else values,
               s.dtype, s.shape)
    where = em.b.broadcast_in_dim(to_bool(em, mask, spec(mask).shape), shape=s.shape,
                                  dims=list(range(k)))
    add = _BOOL_ARITH["add"] if s.dtype == "i1" else "add"
    return em.b.select(where, em.b.create(add, [x, v]) if accumulate else v, x)


@handles(aten.masked_scatter.default)
def _masked_scatter(em: Emit, x: ir.Value, mask: ir.Value, source: ir.Value) -> ir.Value:
    """Where the mask is set, the source's next element in order (a vision-language
    model's image features into its token embeddings): element i reads the source at the
    count of set elements before it (an integer scan), a gather whose gradient is the
    source's. More set elements than the source holds fail the gather's index check."""
    out = em.out0
    b = em.b
    n = out.numel
    flags = reshape(em, to_bool(em, mask, out.shape), (n,))
    count = _running_sum(em, cast(em, flags, "i64"), 0)
    position = b.max(b.sub(count, full_as(em, count, 1.0)), full_as(em, count, 0.0))
    # unset elements read position 0 (or the last one before them), which always exists
    # when the source is not empty: their value is not taken
    position = b.select(flags, position, b.full(shape=(n,), dtype="i64", value=0.0))
    src = reshape(em, cast(em, source, out.dtype), (spec(source).numel,))
    if spec(src).shape[0] == 0:
        src = b.full(shape=(1,), dtype=out.dtype, value=0.0)
    taken = b.index_select(src, position, dim=0)
    base = reshape(em, coerce(em, x, out.dtype, out.shape), (n,))
    return reshape(em, b.select(flags, taken, base), out.shape)

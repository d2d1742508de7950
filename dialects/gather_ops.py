"""Indexing dg ops: gather, index_select and scatter_add (indices are i32/i64)."""
from __future__ import annotations

import torch

from .core import Attr, Kind, ShapeError, define, reference_rule, shape_rule
from .reduction import check_dims

define("gather", ("x", "indices"), attrs={"dim": Attr.I64}, kind=Kind.GATHER,
       summary="torch.gather: out[i..] = x[i.. with i_dim := indices[i..]]; result shape = indices shape")
define("index_select", ("x", "indices"), attrs={"dim": Attr.I64}, kind=Kind.GATHER,
       summary="take along dim: result shape = x.shape[:dim] + indices.shape + x.shape[dim+1:]")
define("scatter_add", ("x", "indices", "src"), attrs={"dim": Attr.I64}, kind=Kind.GATHER,
       summary="torch.scatter_add: x with src[i..] added at x[i.. with i_dim := indices[i..]]")


def _check_indices(idx, what):
    if idx.dtype not in ("i32", "i64"):
        raise ShapeError(f"{what}: indices must be i32 or i64, got {idx.dtype}")


@shape_rule("gather")
def _gather_shape(ins, attrs, hint, *, op):
    x, idx = ins
    _check_indices(idx, "dg.gather")
    (dim,) = check_dims([attrs["dim"]], x.rank, "dg.gather")
    if idx.rank != x.rank:
        raise ShapeError(f"dg.gather: indices rank {idx.rank} differs from operand rank {x.rank}")
    for d in range(x.rank):
        if d != dim and idx.shape[d] > x.shape[d]:
            raise ShapeError(f"dg.gather: indices dim {d} of size {idx.shape[d]} exceeds operand "
                             f"size {x.shape[d]}")
    return [idx.with_dtype(x.dtype)]


@shape_rule("index_select")
def _index_select_shape(ins, attrs, hint, *, op):
    x, idx = ins
    _check_indices(idx, "dg.index_select")
    (dim,) = check_dims([attrs["dim"]], x.rank, "dg.index_select")
    return [x.with_shape(x.shape[:dim] + idx.shape + x.shape[dim + 1:])]


@shape_rule("scatter_add")
def _scatter_add_shape(ins, attrs, hint, *, op):
    x, idx, src = ins
    _check_indices(idx, "dg.scatter_add")
    (dim,) = check_dims([attrs["dim"]], x.rank, "dg.scatter_add")
    if src.dtype != x.dtype:
        raise ShapeError(f"dg.scatter_add: src dtype {src.dtype} differs from operand {x.dtype}")
    if idx.shape != src.shape:
        raise ShapeError(f"dg.scatter_add: indices shape {list(idx.shape)} differs from src "
                         f"shape {list(src.shape)}")
    if idx.rank != x.rank:
        raise ShapeError(f"dg.scatter_add: indices rank {idx.rank} differs from operand rank {x.rank}")
    for d in range(x.rank):
        if d != dim and idx.shape[d] > x.shape[d]:
            raise ShapeError(f"dg.scatter_add: indices dim {d} of size {idx.shape[d]} exceeds "
                             f"operand size {x.shape[d]}")
    return [x]


@reference_rule("gather")
def _gather_ref(x, idx, *, op, attrs, out):
    return [torch.gather(x, attrs["dim"], idx.long())]


@reference_rule("index_select")
def _index_select_ref(x, idx, *, op, attrs, out):
    dim = attrs["dim"]
    flat = torch.index_select(x, dim, idx.reshape(-1).long())
    return [flat.reshape(out[0].shape)]


@reference_rule("scatter_add")
def _scatter_add_ref(x, idx, src, *, op, attrs, out):
    return [torch.scatter_add(x, attrs["dim"], idx.long(), src)]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)

"""Views and data movement (view/reshape, as_strided, permute, expand, slice/select and
their scatters, unfold, cat, split, flip, pad, repeat) and the sources (full, arange,
eye)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from mlir import ir

from ...dialects.builder import spec
from ...dialects.types import is_float
from .emit import (
    Emit, Unsupported, _size_tensor, aten, cast, coerce, decided, full_as, handles, is_size,
    known, norm_dim,
    reshape, scalar_like, size_value, slice_dim,
)


@handles(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
         aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
         aten.flatten.using_ints, aten.unflatten.int, aten.view_copy.default,
         aten.squeeze_copy.default, aten.squeeze_copy.dim, aten.squeeze_copy.dims,
         aten.unsqueeze_copy.default)
def _reshape(em: Emit, x: ir.Value, *args: Any) -> ir.Value:
    return reshape(em, x, em.out0.shape)


# an as_strided of a non-contiguous view gathers at a constant index table of this many
# elements at most
AS_STRIDED_TABLE_MAX = 1 << 20


def _storage_positions(em: Emit, x: ir.Value, size: Sequence[int], stride: Sequence[int],
                       storage_offset: int | None) -> ir.Value | None:
    """The row-major index in `x` of each element of `as_strided(x, size, stride,
    storage_offset)` (shape `size`), or None where the view is all of `x` in order. For a
    contiguous `x` the indices are `offset + sum_i index_i * stride_i` computed from
    iotas; for a strided view (x.t(), x[1:]) a constant table maps them back to `x`'s
    elements."""
    val = em.node.args[0].meta.get("val")
    base = val.storage_offset() if isinstance(val, torch.Tensor) else 0
    offset = (base if storage_offset is None else storage_offset) - base
    numel = spec(x).numel
    contiguous = [math.prod(size[i + 1:]) for i in range(len(size))]
    dense = not isinstance(val, torch.Tensor) or val.is_contiguous()
    if dense and offset == 0 and math.prod(size) == numel and all(
            st == c for n, st, c in zip(size, stride, contiguous) if n != 1):
        return None
    count = math.prod(size)
    if not dense:
        return em.b.constant(_view_positions(val, size, stride, base + offset))
    last = offset + sum((n - 1) * st for n, st in zip(size, stride)) if count else offset
    if offset < 0 or any(st < 0 for st in stride) or (count and last >= numel):
        raise Unsupported(f"as_strided view outside its operand (offset {offset}, "
                          f"strides {list(stride)}, {numel} elements)")
    shape = tuple(size)
    index = em.b.full(shape=shape, dtype="i64", value=float(offset))
    for d, st in enumerate(stride):
        if size[d] != 1 and st != 0:
            step = em.b.full(shape=shape, dtype="i64", value=float(st))
            index = em.b.add(index, em.b.mul(em.b.iota(shape=shape, dtype="i64", dim=d), step))
    return index


@handles(aten.as_strided.default, aten.as_strided_copy.default)
def _as_strided(em: Emit, x: ir.Value, size: Sequence[int], stride: Sequence[int],
                storage_offset: int | None = None) -> ir.Value:
    """A view of `x`'s storage (diagonal, trace and einsum's repeated indices decompose
    to this): a reshape where it is the whole operand in order; else a gather of `x`'s
    elements at the view's storage positions."""
    index = _storage_positions(em, x, size, stride, storage_offset)
    if index is None:
        return reshape(em, x, em.out0.shape)
    flat = em.b.index_select(reshape(em, x, (spec(x).numel,)),
                             reshape(em, index, (math.prod(size),)), dim=0)
    return reshape(em, flat, em.out0.shape)


@handles(aten.as_strided_scatter.default)
def _as_strided_scatter(em: Emit, x: ir.Value, src: ir.Value, size: Sequence[int],
                        stride: Sequence[int], storage_offset: int | None = None) -> ir.Value:
    """`x` with `src` written into its view `as_strided(size, stride, storage_offset)`
    (functionalization's form of an in-place op on such a view: torch.func's jacrev of a
    linear layer on a 1-D input): a scatter of `src` at the view's positions."""
    out = em.out0
    index = _storage_positions(em, x, size, stride, storage_offset)
    src = coerce(em, src, out.dtype, tuple(size))
    if index is None:
        return reshape(em, src, out.shape)
    count = math.prod(size)
    flat = em.b.scatter(reshape(em, x, (spec(x).numel,)), reshape(em, index, (count,)),
                        reshape(em, src, (count,)), dim=0)
    return reshape(em, flat, out.shape)


def _view_positions(val: torch.Tensor, size: Sequence[int], stride: Sequence[int],
                    offset: int) -> torch.Tensor:
    """For each element of `as_strided(val, size, stride, offset)`, the row-major index
    of the element of `val` at the same storage position."""
    count = math.prod(size)
    if count > AS_STRIDED_TABLE_MAX:
        raise Unsupported(f"as_strided of a non-contiguous tensor into {count} elements "
                          f"(a gather table of {AS_STRIDED_TABLE_MAX} at most)")
    ends = [val.storage_offset() + sum((n - 1) * st for n, st in zip(val.shape, val.stride())),
            offset + sum((n - 1) * st for n, st in zip(size, stride))]
    storage = torch.arange(max(ends) + 1)
    table = torch.full_like(storage, -1)
    table[torch.as_strided(storage, val.shape, val.stride(), val.storage_offset()).flatten()] = \
        torch.arange(val.numel())
    index = torch.as_strided(table, size, stride, offset)
    if (index < 0).any():
        raise Unsupported("as_strided reading storage outside its operand's view")
    return index.contiguous()


@handles(aten.permute.default, aten.permute_copy.default)
def _permute(em: Emit, x: ir.Value, dims: Sequence[int]) -> ir.Value:
    rank = spec(x).rank
    perm = [norm_dim(d, rank) for d in dims]
    if perm == list(range(rank)):
        return x
    return em.b.transpose(x, perm=perm)


def _unpermute(em: Emit, x: ir.Value, dims: Sequence[int]) -> ir.Value:
    """Undo `_permute(em, ., dims)`: `x`'s dims back in their order before it."""
    return _permute(em, x, [list(dims).index(k) for k in range(len(dims))])


@handles(aten.transpose.int, aten.transpose_copy.int)
def _transpose(em: Emit, x: ir.Value, dim0: int, dim1: int) -> ir.Value:
    rank = spec(x).rank
    perm = list(range(rank))
    if rank:
        a, c = norm_dim(dim0, rank), norm_dim(dim1, rank)
        perm[a], perm[c] = perm[c], perm[a]
    return _permute(em, x, perm)


@handles(aten.expand.default, aten.expand_copy.default)
def _expand(em: Emit, x: ir.Value, size: Sequence[int], *, implicit: bool = False) -> ir.Value:
    return em.b.broadcast_to(x, em.out0.shape)


def _clamp_bounds(start: int | None, end: int | None, size: int,
                  em: Emit | None = None) -> tuple[int, int]:
    start = 0 if start is None else start
    end = size if end is None else end
    if em is not None and any(is_size(v) for v in (start, end, size)):
        return _clamp_symbolic(em, start, end, size)
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, end


# a slice bound this far out means "to the end" (x[1:] ends at INT64_MAX): no size reaches it
_UNBOUNDED = 1 << 62


def _clamp_symbolic(em: Emit, start: Any, end: Any, size: Any) -> tuple[Any, Any]:
    """`_clamp_bounds` on symbolic sizes or bounds: each comparison decided by the sizes'
    known facts (sympy's, the capture's ShapeEnv's); one that only their values decide is
    Unsupported."""
    def bound(v: Any) -> Any:
        if isinstance(v, int) and v >= _UNBOUNDED:
            return size
        if isinstance(v, int) and v <= -_UNBOUNDED:
            return 0
        if decided(em, v < 0, "a negative slice bound"):
            v = v + size
        if decided(em, v < 0, "the slice's start"):
            return 0
        return size if decided(em, v > size, "the slice's end") else v
    lo, hi = bound(start), bound(end)
    return lo, lo if decided(em, hi < lo, "whether the slice is empty") else hi


@handles(aten.slice.Tensor, aten.slice_copy.Tensor)
def _slice(em: Emit, x: ir.Value, dim: int = 0, start: int | None = None, end: int | None = None,
           step: int = 1) -> ir.Value:
    s = spec(x)
    d = norm_dim(dim, s.rank)
    lo, hi = _clamp_bounds(start, end, s.shape[d], em)
    return slice_dim(em, x, d, lo, hi, step)


@handles(aten.select.int, aten.select_copy.int)
def _select(em: Emit, x: ir.Value, dim: int, index: int) -> ir.Value:
    s = spec(x)
    d = norm_dim(dim, s.rank)
    i = index + s.shape[d] if decided(em, index < 0, "a negative index") else index
    return reshape(em, slice_dim(em, x, d, i, i + 1), em.out0.shape)


@handles(aten.slice_scatter.default)
def _slice_scatter(em: Emit, x: ir.Value, src: ir.Value, dim: int = 0, start: int | None = None,
                   end: int | None = None, step: int = 1) -> ir.Value:
    """x with `src` in its strided slice along dim: src padded into place (zeros between
    and around, interior for the step), then selected where a constant mask of the
    slice's positions is set; the gradient of each side is its select's."""
    out = em.out0
    d = norm_dim(dim, out.rank)
    size = out.shape[d]
    if any(is_size(v) for v in (start, end, size)):
        return _slice_scatter_symbolic(em, x, src, d, start, end, step)
    lo, hi = _clamp_bounds(start, end, size)
    count = len(range(lo, hi, step))
    shape = list(out.shape)
    shape[d] = count
    src = coerce(em, src, out.dtype, shape)
    if count == 0:
        return cast(em, x, out.dtype)
    if count == size:
        return src
    low, high, interior = [0] * out.rank, [0] * out.rank, [0] * out.rank
    low[d], interior[d] = lo, step - 1
    high[d] = size - (lo + (count - 1) * step + 1)
    placed = em.b.pad(src, low=low, high=high, interior=interior, value=0.0)
    taken = torch.zeros(size, dtype=torch.bool)
    taken[lo:hi:step] = True
    mask = em.b.broadcast_in_dim(em.b.constant(taken), shape=out.shape, dims=[d])
    return em.b.select(mask, placed, cast(em, x, out.dtype))


def _slice_scatter_symbolic(em: Emit, x: ir.Value, src: ir.Value, d: int, start: Any,
                            end: Any, step: int) -> ir.Value:
    """`_slice_scatter` along a dim of symbolic size, or with symbolic bounds: the mask of
    the slice's positions is computed (iota against the bounds' values), not a constant."""
    out = em.out0
    size = out.shape[d]
    lo, hi = _clamp_bounds(start, end, size, em)
    count = (hi - lo + step - 1) // step
    shape = list(out.shape)
    shape[d] = count
    src = coerce(em, src, out.dtype, shape)
    low, high, interior = [0] * out.rank, [0] * out.rank, [0] * out.rank
    low[d], interior[d] = lo, step - 1
    high[d] = size - (lo + (count - 1) * step + 1)
    placed = em.b.pad(src, low=low, high=high, interior=interior, value=0.0)
    b = em.b
    position = b.iota(shape=out.shape, dtype="i64", dim=d)

    def at(value: Any) -> ir.Value:
        scalar = _size_tensor(em, value) if is_size(value) else \
            b.full(shape=(), dtype="i64", value=float(value))
        return b.broadcast_in_dim(cast(em, scalar, "i64"), shape=out.shape, dims=[])
    mask = b.create("and", [b.compare(position, at(lo), direction="ge"),
                            b.compare(position, at(hi), direction="lt")])
    if step > 1:
        offset = b.sub(position, at(lo))
        on_step = b.compare(b.sub(offset, b.mul(b.div(offset, at(step)), at(step))),
                            at(0), direction="eq")
        mask = b.create("and", [mask, on_step])
    return b.select(mask, placed, cast(em, x, out.dtype))


@handles(aten.select_scatter.default)
def _select_scatter(em: Emit, x: ir.Value, src: ir.Value, dim: int, index: int) -> ir.Value:
    out = em.out0
    d = norm_dim(dim, out.rank)
    i = index + out.shape[d] if index < 0 else index
    shape = list(out.shape)
    shape[d] = 1
    return _slice_scatter(em, x, reshape(em, src, shape), d, i, i + 1)


@handles(aten.unfold.default, aten.unfold_copy.default)
def _unfold(em: Emit, x: ir.Value, dim: int, size: int, step: int) -> ir.Value:
    """Tensor.unfold (sliding windows along dim, as a new last dim): one strided slice per
    offset into the window, side by side; overlapping windows' gradients merge where the
    slices' pads overlap."""
    out = em.out0
    s = spec(x)
    if s.rank == 0:
        return reshape(em, x, out.shape)
    d = norm_dim(dim, s.rank)
    n = out.shape[d]
    if out.numel == 0:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=0.0)
    column = [*out.shape[:-1], 1]
    taps = [reshape(em, slice_dim(em, x, d, k, k + (n - 1) * step + 1, step), column)
            for k in range(size)]
    return em.b.concat(taps, dim=out.rank - 1)


@handles(aten.cat.default)
def _cat(em: Emit, tensors: Sequence[ir.Value], dim: int = 0) -> ir.Value:
    out = em.out0
    # a part of symbolic size that may be empty stays: concatenate reads none of it then
    parts = [cast(em, t, out.dtype) for t in tensors
             if known(em, spec(t).numel > 0) is not False and spec(t).rank == out.rank]
    if not parts:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=0.0)
    if len(parts) == 1:
        return parts[0]
    return em.b.concat(parts, dim=norm_dim(dim, out.rank))


@handles(aten.split_with_sizes.default, aten.split.Tensor,
         aten.split_with_sizes_copy.default, aten.split_copy.Tensor)
def _split(em: Emit, x: ir.Value, sizes: Any, dim: int = 0) -> list[ir.Value]:
    s = spec(x)
    d = norm_dim(dim, s.rank)
    if isinstance(sizes, int):
        n = s.shape[d]
        sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if sizes else [n]
    out, start = [], 0
    for size in sizes:
        out.append(slice_dim(em, x, d, start, start + size))
        start += size
    return out


@handles(aten.flip.default)
def _flip(em: Emit, x: ir.Value, dims: Sequence[int]) -> ir.Value:
    dims = sorted({norm_dim(d, spec(x).rank) for d in dims})
    return em.b.reverse(x, dims=dims) if dims else x


@handles(aten.constant_pad_nd.default)
def _pad(em: Emit, x: ir.Value, pad: Sequence[int], value: float = 0) -> ir.Value:
    s = spec(x)
    low, high = [0] * s.rank, [0] * s.rank
    for i in range(len(pad) // 2):
        d = s.rank - 1 - i
        low[d], high[d] = pad[2 * i], pad[2 * i + 1]
    if min(low + high) < 0:  # negative padding crops
        x = em.b.slice(x, start=[max(-lo, 0) for lo in low],
                       limit=[n - max(-hi, 0) for n, hi in zip(s.shape, high)],
                       stride=[1] * s.rank)
    if max(low + high, default=0) > 0:
        x = em.b.pad(x, low=[max(v, 0) for v in low], high=[max(v, 0) for v in high],
                     interior=[0] * s.rank, value=float(value))
    return x


@handles(aten.repeat.default)
def _repeat(em: Emit, x: ir.Value, repeats: Sequence[int]) -> ir.Value:
    s = spec(x)
    lead = len(repeats) - s.rank
    shape = [1] * lead + list(s.shape)
    x = reshape(em, x, shape)
    # broadcast [s0, s1, ...] to [r0, s0, r1, s1, ...] then merge each pair
    big = [v for r, n in zip(repeats, shape) for v in (r, n)]
    x = em.b.broadcast_in_dim(x, shape=big, dims=list(range(1, 2 * len(shape), 2)))
    return reshape(em, x, em.out0.shape)


# ------------------------------------------------------------------ sources
@handles(aten.full.default, aten.full_like.default, aten.zeros_like.default,
         aten.ones_like.default, aten.empty_like.default, aten.empty.memory_format,
         aten.empty_permuted.default, aten.empty_strided.default, aten.scalar_tensor.default,
         aten.zeros.default, aten.ones.default, aten.new_full.default, aten.new_zeros.default,
         aten.new_ones.default, aten.new_empty.default, aten.new_empty_strided.default,
         aten._efficientzerotensor.default)
def _full(em: Emit, *args: Any, **kwargs: Any) -> ir.Value:
    target = em.node.target
    value = 0.0
    if target in (aten.full.default, aten.full_like.default):
        value = args[1]
    elif target is aten.new_full.default:
        value = args[2]
    elif target is aten.scalar_tensor.default:
        value = args[0]
    elif target in (aten.ones_like.default, aten.ones.default, aten.new_ones.default):
        value = 1.0
    if isinstance(value, ir.Value):
        raise Unsupported("a tensor fill value")
    out = em.out0
    if is_size(value):  # torch.full((n,), seq_len)
        return size_value(em, value, out.dtype, out.shape)
    return em.b.full(shape=out.shape, dtype=out.dtype, value=float(value))


@handles(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(em: Emit, *args: Any, **kwargs: Any) -> ir.Value:
    nums = [a for a in args if isinstance(a, (int, float)) or is_size(a)]
    start, step = 0, 1
    if em.node.target is aten.arange.start_step:
        start, _, step = (nums + [1])[:3]
    elif em.node.target is aten.arange.start:
        start = nums[0]
    out = em.out0
    if out.numel == 0:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=0.0)
    ct = "f64" if is_float(out.dtype) else "i64"
    i = em.b.iota(shape=out.shape, dtype=ct, dim=0)
    r = em.b.add(em.b.mul(i, scalar_like(em, i, step)), scalar_like(em, i, start))
    return cast(em, r, out.dtype)


@handles(aten.eye.default, aten.eye.m)
def _eye(em: Emit, n: int, m: int | None = None, **kwargs: Any) -> ir.Value:
    out = em.out0
    i = em.b.iota(shape=out.shape, dtype="i64", dim=0)
    j = em.b.iota(shape=out.shape, dtype="i64", dim=1)
    return cast(em, em.b.compare(i, j, direction="eq"), out.dtype)

"""Neural-network ops: contractions (mm/bmm, convolution and its backward), attention,
grid sampling and pooling."""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Sequence

import torch
from mlir import ir

from ...dialects.builder import spec
from ...dialects.core import attrs_of
from ...dialects.types import is_float, torch_dtype
from ...transforms.autodiff.cotangent_sum import sum_cotangents
from .emit import (
    Emit, Unavailable, Unsupported, _clip, _opmath, aten, cast, decided, full_as, handles, known,
    reshape, slice_dim,
)
from .shapes import _permute


# ------------------------------------------------------------------ contractions
@handles(aten.mm.default, aten.bmm.default)
def _matmul(em: Emit, a: ir.Value, b: ir.Value) -> ir.Value:
    """A batch of products with one matrix broadcast over the batch (PyTorch's matmul of
    a non-contiguous 3-d input by a weight expands the weight) is one product of the
    stacked rows: the broadcast was materialized, [128, 256, 768] copies of an
    attention's in-projection under autocast, and its gradient a batch of products
    summed."""
    shared = _shared_matrix(b)
    if shared is not None:
        rows = reshape(em, a, (spec(a).numel // spec(a).shape[-1], spec(a).shape[-1]))
        return reshape(em, em.b.matmul(rows, shared), em.out0.shape)
    return em.b.matmul(a, b)


def _shared_matrix(b: ir.Value) -> ir.Value | None:
    """The 2-d matrix `b` broadcasts over its leading (batch) dims, else None."""
    op = None if isinstance(b.owner, ir.Block) else b.owner.operation
    if op is None or op.name != "dg.broadcast_in_dim" or spec(b).rank != 3:
        return None
    x = op.operands[0]
    return x if spec(x).rank == 2 and list(attrs_of(op)["dims"]) == [1, 2] else None


@handles(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _flash_attention(em: Emit, q: ir.Value, k: ir.Value, v: ir.Value, dropout_p: float = 0.0,
                     is_causal: bool = False, *, attn_mask: ir.Value | None = None,
                     scale: float | None = None) -> tuple[ir.Value, ir.Value]:
    """dg.attention (PyTorch's flash kernel on the CPU); the capture keeps this op only
    where that is exact and pays (decompositions.py)."""
    if dropout_p:
        raise Unsupported("attention with dropout (the capture decomposes it)")
    qs = spec(q)
    if attn_mask is None:
        mask = em.b.full(shape=(1, 1, 1, 1), dtype=qs.dtype, value=0.0)
    else:
        mask = attn_mask
        if spec(mask).dtype == "i1":  # True: attend
            shape = spec(mask).shape
            mask = em.b.select(mask, em.b.full(shape=shape, dtype=qs.dtype, value=0.0),
                               em.b.full(shape=shape, dtype=qs.dtype, value=float("-inf")))
        mask = reshape(em, mask, (1,) * (4 - spec(mask).rank) + spec(mask).shape)
    scale = 1.0 / math.sqrt(qs.shape[-1]) if scale is None else float(scale)
    k, v = (_repeat_heads(em, x, qs.shape[1]) for x in (k, v))
    return tuple(em.b.attention(q, k, v, mask, scale=scale, causal=int(bool(is_causal))))


@handles(torch.ops.fusegrad.attention.default)
def _fused_attention(em: Emit, q: ir.Value, k: ir.Value, v: ir.Value,
                     attn_mask: ir.Value | None, is_causal: bool, scale: float | None,
                     enable_gqa: bool) -> ir.Value:
    """dg.attention's out (PyTorch's fused kernel on CUDA); a CUDA capture records this op
    only where that is exact (frontend/cuda_attention.py)."""
    return _flash_attention(em, q, k, v, 0.0, is_causal, attn_mask=attn_mask, scale=scale)[0]


def _repeat_heads(em: Emit, x: ir.Value, heads: int) -> ir.Value:
    """Grouped-query attention's keys or values [B, Hk, S, E], each head repeated for the
    heads / Hk query heads that share it."""
    b, hk, s, e = spec(x).shape
    if hk == heads:
        return x
    group = em.b.broadcast_in_dim(x, shape=(b, hk, heads // hk, s, e), dims=[0, 1, 3, 4])
    return reshape(em, group, (b, heads, s, e))


@handles(aten.convolution.default)
def _convolution(em: Emit, x: ir.Value, w: ir.Value, bias: ir.Value | None, stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                 output_padding: Sequence[int], groups: int) -> ir.Value:
    """A transposed convolution is the input gradient of the forward convolution with the
    same weight whose input has the transposed one's output shape (output_padding only
    sets that shape): dg.conv2d_input_grad, with its rules and library call."""
    xs = spec(x)
    if xs.rank == 5:
        stride, padding, dilation = ([*v] * 3 if len(v) == 1 else list(v)
                                     for v in (stride, padding, dilation))
        conv3d = _transposed_conv3d if transposed else _conv3d
        y = conv3d(em, x, w, stride, padding, dilation, groups)
    elif xs.rank in (3, 4):
        out_shape = em.out0.shape
        if xs.rank == 3:
            out_shape = (out_shape[0], out_shape[1], 1, out_shape[2])
        (x, w), attrs = _as_conv2d(em, (x, w), stride, padding, dilation, groups)
        if transposed:
            y = _transposed_conv(em, x, w, out_shape, attrs)
        else:
            y = em.b.conv2d(x, w, **attrs)
    else:
        raise Unsupported(f"{xs.rank - 2}-d convolution (fusegrad supports 1-d, 2-d and 3-d)")
    y = reshape(em, y, em.out0.shape)
    if bias is not None:
        y = em.b.add(y, em.b.broadcast_in_dim(bias, shape=em.out0.shape, dims=[1]))
    return y


@handles(aten.convolution_backward.default)
def _convolution_backward(em: Emit, g: ir.Value, x: ir.Value, w: ir.Value, bias_sizes: Any,
                          stride: Sequence[int], padding: Sequence[int],
                          dilation: Sequence[int], transposed: bool,
                          output_padding: Sequence[int], groups: int,
                          output_mask: Sequence[bool]) -> list[ir.Value | None]:
    """What torch.func transforms trace for a convolution's derivative (per-sample
    gradients: vmap of grad): the input and weight gradients of a 1-d or 2-d convolution
    as dg's ops for them, the bias gradient as a sum."""
    rank = spec(x).rank
    if transposed or rank not in (3, 4):
        raise Unsupported(f"the derivative of a {'transposed ' if transposed else ''}"
                          f"{rank - 2}-d convolution (fusegrad maps those of 1-d and 2-d ones)")
    shapes = [spec(v).shape for v in (g, x, w)]
    (g, x, w), attrs = _as_conv2d(em, (g, x, w), stride, padding, dilation, groups)
    results: list[ir.Value | None] = [None, None, None]
    if output_mask[0]:
        dx = em.b.conv2d_input_grad(g, w, input_shape=list(spec(x).shape), **attrs)
        results[0] = reshape(em, dx, shapes[1])
    if output_mask[1]:
        dw = em.b.conv2d_weight_grad(x, g, weight_shape=list(spec(w).shape), **attrs)
        results[1] = reshape(em, dw, shapes[2])
    if output_mask[2]:
        results[2] = em.b.reduce_sum(g, dims=[0, 2, 3])
    return results


def _as_conv2d(em: Emit, values: Sequence[ir.Value], stride: Sequence[int],
               padding: Sequence[int], dilation: Sequence[int],
               groups: int) -> tuple[list[ir.Value], dict[str, Any]]:
    """A 1-d or 2-d convolution's tensors (input, weight, output gradient: all NC...) and
    dg.conv2d's attributes for it: a 1-d convolution is a 2-d one over height-1 images."""
    if spec(values[0]).rank == 3:
        values = [reshape(em, v, (*spec(v).shape[:2], 1, spec(v).shape[2])) for v in values]
        stride, padding, dilation = [1, *stride], [0, *padding], [1, *dilation]
    pairs = [list(v) * 2 if len(v) == 1 else list(v) for v in (stride, padding, dilation)]
    return list(values), dict(stride=pairs[0], padding=pairs[1], dilation=pairs[2],
                              groups=groups)


def _conv3d(em: Emit, x: ir.Value, w: ir.Value, stride: Sequence[int], padding: Sequence[int],
            dilation: Sequence[int], groups: int) -> ir.Value:
    """A 3-d convolution as one 2-d convolution over N*Do images of KD*C channels: each
    output depth's KD input depth slices side by side as channels (an im2col along depth
    only), so the weight is a transpose and a reshape, and dg.conv2d's rules and library
    call serve. Ungrouped, the taps are concatenated along the channel dim (tap-major),
    which dg-channels-last keeps channels-last from one convolution to the next; grouped,
    each channel's taps are adjacent so a group's channels stay together. Costs KD
    copies of the input (none beyond a transpose when KD = 1)."""
    n, c = spec(x).shape[:2]
    o, cg, kd, kh, kw = spec(w).shape
    do, ho, wo = em.out0.shape[2:]
    (sd, *st), (pd, *pad), (dd, *dil) = stride, padding, dilation
    if pd:
        x = em.b.pad(x, low=[0, 0, pd, 0, 0], high=[0, 0, pd, 0, 0], interior=[0] * 5, value=0.0)
    x = _permute(em, x, [0, 2, 1, 3, 4])  # [n, d, c, h, w]
    h, wd = spec(x).shape[3:]
    taps = [slice_dim(em, x, 1, t * dd, t * dd + (do - 1) * sd + 1, sd) for t in range(kd)]
    if groups == 1:
        cols = em.b.concat(taps, dim=2)
        w = _permute(em, w, [0, 2, 1, 3, 4])
    else:
        cols = em.b.concat([reshape(em, t, (n, do, c, 1, h, wd)) for t in taps], dim=3)
    cols = reshape(em, cols, (n * do, c * kd, h, wd))
    y = em.b.conv2d(cols, reshape(em, w, (o, cg * kd, kh, kw)), stride=st, padding=pad,
                    dilation=dil, groups=groups)
    return _permute(em, reshape(em, y, (n, do, o, ho, wo)), [0, 2, 1, 3, 4])


def _transposed_conv3d(em: Emit, x: ir.Value, w: ir.Value, stride: Sequence[int],
                       padding: Sequence[int], dilation: Sequence[int], groups: int) -> ir.Value:
    """The transpose of _conv3d's scheme: one 2-d transposed convolution of the N*D input
    depth slices into KD*C_out channels (each depth tap's contribution side by side), then
    each tap's slices placed at their output depths (zero pads strided by the stride,
    merged where they overlap as cotangent sums are) and summed, and the padding cropped
    (output_padding beyond the last tap adds zeros)."""
    b = em.b
    n, cin, d, h, wd = spec(x).shape
    _, cg, kd, kh, kw = spec(w).shape
    cout, do, ho, wo = em.out0.shape[1:]
    (sd, *st), (pd, *pad), (dd, *dil) = stride, padding, dilation
    slices = reshape(em, _permute(em, x, [0, 2, 1, 3, 4]), (n * d, cin, h, wd))
    w2 = reshape(em, _permute(em, w, [0, 2, 1, 3, 4]), (cin, kd * cg, kh, kw))  # tap-major
    z = _transposed_conv(em, slices, w2, (n * d, groups * kd * cg, ho, wo),
                         dict(stride=st, padding=pad, dilation=dil, groups=groups))
    z = _permute(em, reshape(em, z, (n, d, groups, kd, cg, ho, wo)), [0, 1, 3, 2, 4, 5, 6])
    z = reshape(em, z, (n, d, kd, cout, ho, wo))
    full = (d - 1) * sd + dd * (kd - 1) + 1
    placed = []
    for t in range(kd):
        tap = reshape(em, b.slice(z, start=[0, 0, t, 0, 0, 0], limit=[n, d, t + 1, cout, ho, wo],
                                  stride=[1] * 6), (n, d, cout, ho, wo))
        high = full - (t * dd + (d - 1) * sd + 1)
        placed.append((b.pad(tap, low=[0, t * dd, 0, 0, 0], high=[0, high, 0, 0, 0],
                             interior=[0, sd - 1, 0, 0, 0], value=0.0), b.loc))
    y = sum_cotangents(placed)
    end = min(pd + do, full)
    y = slice_dim(em, y, 1, pd, end)
    if pd + do > end:
        y = b.pad(y, low=[0] * 5, high=[0, pd + do - end, 0, 0, 0], interior=[0] * 5, value=0.0)
    return _permute(em, y, [0, 2, 1, 3, 4])


def _transposed_conv(em: Emit, x: ir.Value, w: ir.Value, out_shape: Sequence[int],
                     attrs: dict[str, Any]) -> ir.Value:
    """The input gradient of the forward convolution whose input has `out_shape`. Where
    output_padding reaches past the stride (it may when dilated), no forward convolution
    of that input has `x`'s shape: then the unpadded transposed convolution, cropped by
    the padding and extended with zeros."""
    h, wd = spec(x).shape[2:]
    kh, kw = spec(w).shape[2:]
    st, pad, dil = attrs["stride"], attrs["padding"], attrs["dilation"]
    fits = all((o + 2 * p - d * (k - 1) - 1) // s + 1 == i for o, p, d, k, s, i in zip(
        out_shape[2:], pad, dil, (kh, kw), st, (h, wd)))
    if fits:
        return em.b.conv2d_input_grad(x, w, input_shape=list(out_shape), **attrs)
    full = [(i - 1) * s + d * (k - 1) + 1 for i, s, d, k in zip((h, wd), st, dil, (kh, kw))]
    y = em.b.conv2d_input_grad(x, w, input_shape=[*out_shape[:2], *full],
                               **{**attrs, "padding": [0, 0]})
    ends = [min(p + o, f) for p, o, f in zip(pad, out_shape[2:], full)]
    y = em.b.slice(y, start=[0, 0, *pad], limit=[*out_shape[:2], *ends], stride=[1] * 4)
    short = [p + o - e for p, o, e in zip(pad, out_shape[2:], ends)]
    if any(short):
        y = em.b.pad(y, low=[0] * 4, high=[0, 0, *short], interior=[0] * 4, value=0.0)
    return y


# ------------------------------------------------------------------ sampling
@handles(aten.grid_sampler_2d.default)
def _grid_sampler_2d(em: Emit, x: ir.Value, grid: ir.Value, interpolation_mode: int,
                     padding_mode: int, align_corners: bool) -> ir.Value:
    """Bilinear (0) or nearest (1) sampling of `x` [N, C, H, W] at `grid` [N, Ho, Wo, 2]
    as eager computes it: coordinates unnormalized, then clipped (border, 1) or reflected
    (reflection, 2); each of the (up to four) neighbours a gather over the flattened
    image, weighted, and zero where it falls outside (zeros, 0). The gradient of the
    image flows through the gathers, that of the grid through the weights."""
    if interpolation_mode not in (0, 1):
        raise Unsupported("bicubic grid_sample")
    b = em.b
    n, c, h, w = spec(x).shape
    _, ho, wo, _ = spec(grid).shape
    ct = _opmath(spec(x).dtype)
    grid = cast(em, grid, ct)
    points = (n, ho * wo)

    def coordinate(axis: int, size: int) -> ir.Value:
        g = reshape(em, slice_dim(em, grid, 3, axis, axis + 1), points)
        one = full_as(em, g, 1.0)
        if align_corners:
            v = b.mul(b.div(b.add(g, one), full_as(em, g, 2.0)), full_as(em, g, size - 1.0))
        else:
            v = b.div(b.sub(b.mul(b.add(g, one), full_as(em, g, float(size))), one),
                      full_as(em, g, 2.0))
        if padding_mode == 2:
            v = _reflect(em, v, *((0.0, 2.0 * (size - 1)) if align_corners
                                  else (-1.0, 2.0 * size - 1)))
        if padding_mode:  # eager clips after reflecting too; no gradient at the bounds
            v = _clip(em, v, full_as(em, v, 0.0), full_as(em, v, size - 1.0), at_bounds=False)
        return v
    ix, iy = coordinate(0, w), coordinate(1, h)
    flat = reshape(em, cast(em, x, ct), (n, c, h * w))

    def tap(cx: ir.Value, cy: ir.Value, weight: ir.Value | None) -> ir.Value:
        """x at integer-valued coordinates (cx, cy), times weight, 0 outside the image."""
        inside = b.create("and", (
            b.create("and", (b.compare(cx, full_as(em, cx, 0.0), direction="ge"),
                             b.compare(cx, full_as(em, cx, w - 1.0), direction="le"))),
            b.create("and", (b.compare(cy, full_as(em, cy, 0.0), direction="ge"),
                             b.compare(cy, full_as(em, cy, h - 1.0), direction="le")))))
        where = b.add(b.mul(cy, full_as(em, cy, float(w))), cx)
        where = b.select(inside, where, full_as(em, where, 0.0))
        index = b.broadcast_in_dim(b.convert(where, dtype="i64"), shape=(n, c, ho * wo),
                                   dims=[0, 2])
        mask = cast(em, inside, ct)
        weight = mask if weight is None else b.mul(weight, mask)
        return b.mul(b.gather(flat, index, dim=2),
                     b.broadcast_in_dim(weight, shape=(n, c, ho * wo), dims=[0, 2]))
    if interpolation_mode == 1:  # nearest: round half to even, as nearbyint
        out = tap(b.round(ix), b.round(iy), None)
    else:
        x0, y0 = b.floor(ix), b.floor(iy)
        one = full_as(em, ix, 1.0)
        x1, y1 = b.add(x0, one), b.add(y0, one)
        east, south = b.sub(ix, x0), b.sub(iy, y0)  # weights of x1 and y1
        west, north = b.sub(x1, ix), b.sub(y1, iy)
        out = None
        for cx, wx in ((x0, west), (x1, east)):
            for cy, wy in ((y0, north), (y1, south)):
                term = tap(cx, cy, b.mul(wx, wy))
                out = term if out is None else b.add(out, term)
    return cast(em, reshape(em, out, (n, c, ho, wo)), em.out0.dtype)


def _reflect(em: Emit, v: ir.Value, twice_low: float, twice_high: float) -> ir.Value:
    """Eager's reflect_coordinates: v folded into [low, high] by reflections."""
    b = em.b
    if twice_low == twice_high:
        return full_as(em, v, 0.0)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    d = b.abs(b.sub(v, full_as(em, v, low)))
    flips = b.floor(b.div(d, full_as(em, v, span)))
    extra = b.sub(d, b.mul(flips, full_as(em, v, span)))
    even = b.compare(b.sub(flips, b.mul(b.floor(b.div(flips, full_as(em, v, 2.0))),
                                        full_as(em, v, 2.0))),
                     full_as(em, v, 0.0), direction="eq")
    return b.select(even, b.add(extra, full_as(em, v, low)),
                    b.add(b.sub(full_as(em, v, span), extra), full_as(em, v, low)))


# ------------------------------------------------------------------ pooling
def _batched(em: Emit, x: ir.Value, spatial: int) -> ir.Value:
    """`x` with its batch dim (unbatched inputs have none)."""
    s = spec(x)
    if s.rank == spatial + 1:
        return reshape(em, x, (1, *s.shape))
    if s.rank != spatial + 2:
        raise Unsupported(f"{spatial}-d pooling over a rank-{s.rank} input")
    return x


def _pool_geometry(kernel, stride, padding, dilation,
                   spatial: int) -> list[tuple[int, int, int, int]]:
    """(kernel, stride, padding, dilation) per spatial dim."""
    def per_dim(v, default):
        v = list(v) if v else list(default)
        return v * spatial if len(v) == 1 else v
    k = per_dim(kernel, None)
    return list(zip(k, per_dim(stride, k), per_dim(padding, [0]), per_dim(dilation, [1])))


def _overhang(em: Emit, h: Any, padding: int, ceil_mode: bool) -> Any:
    """The padding past the input that the last window reads (`h`: how far it ends past
    the input, after the padding before it): none where it provably ends inside. At
    symbolic sizes, where the sizes' parity decides between none and some of `padding`
    (ResNet's stem pool), all of `padding`: the windows read no further. Without
    `ceil_mode` the output size's floor keeps every window inside the padding."""
    if isinstance(h, int):
        return max(h, 0)
    if known(em, h <= 0):
        return 0
    if not ceil_mode or known(em, h <= padding):
        return padding
    return h if decided(em, h > 0, "a pooling window's overhang") else 0


def _windows(em: Emit, x: ir.Value, geo, out_sizes: Sequence[int], pad_value: float,
             ceil_mode: bool):
    """Per kernel offset (one per spatial dim), the strided slice of the padded input it
    contributes to every window."""
    s = spec(x)
    lows = [p for _, _, p, _ in geo]
    highs = [(o - 1) * st + (k - 1) * d + 1 - size - p
             for (k, st, p, d), o, size in zip(geo, out_sizes, s.shape[2:])]
    highs = [_overhang(em, h, p, ceil_mode) for h, (_, _, p, _) in zip(highs, geo)]
    if any(lows) or any(h != 0 for h in highs):
        x = em.b.pad(x, low=[0, 0, *lows], high=[0, 0, *highs], interior=[0] * s.rank,
                     value=pad_value)
    strides = [st for _, st, _, _ in geo]
    for offset in itertools.product(*(range(k) for k, _, _, _ in geo)):
        start = [t * d for t, (_, _, _, d) in zip(offset, geo)]
        limit = [a + (o - 1) * st + 1 for a, o, st in zip(start, out_sizes, strides)]
        yield offset, em.b.slice(x, start=[0, 0, *start], limit=[*s.shape[:2], *limit],
                                 stride=[1, 1, *strides])


def _outer(vectors: Sequence[torch.Tensor], combine: Callable) -> torch.Tensor:
    """`combine` of 1-D tensors, each along a dim of its own (an outer sum or product)."""
    out = None
    for k, v in enumerate(vectors):
        v = v.reshape([-1 if j == k else 1 for j in range(len(vectors))])
        out = v if out is None else combine(out, v)
    return out


def _flat_strides(sizes: Sequence[int]) -> list[int]:
    return [math.prod(sizes[k + 1:]) for k in range(len(sizes))]


@handles(aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default)
def _max_pool(em: Emit, x: ir.Value, kernel_size: Sequence[int], stride: Sequence[int] = (),
              padding: Sequence[int] = (0,), dilation: Sequence[int] = (1,),
              ceil_mode: bool = False) -> list[Any]:
    spatial = 3 if em.node.target is aten.max_pool3d_with_indices.default else 2
    xb = _batched(em, x, spatial)
    dtype = spec(x).dtype
    if not is_float(dtype):
        raise Unsupported(f"max_pool{spatial}d of an integer tensor")
    geo = _pool_geometry(kernel_size, stride, padding, dilation, spatial)
    sizes = spec(xb).shape[2:]
    outs = em.out[0].shape[-spatial:]
    out_b = (*spec(xb).shape[:2], *outs)
    flat = _flat_strides(sizes)
    b = em.b
    want_index = em.result_used(1)
    best, index = None, None
    if want_index:
        origin = _outer([(torch.arange(o) * st - p) * f
                         for o, (_, st, p, _), f in zip(outs, geo, flat)], torch.add)
        best = b.full(shape=out_b, dtype=dtype, value=-math.inf)
        index = b.broadcast_to(b.constant(_first_valid(geo, sizes, outs)), out_b)
        origin_v = b.broadcast_to(b.constant(origin.to(torch.int64)), out_b)
    # eager's rule, also when the indices are not wanted: a window's value and gradient
    # come from its first maximum (or its last NaN), so ties never share the gradient
    for offset, v in _windows(em, xb, geo, outs, -math.inf, ceil_mode):
        if best is None:
            best = v
            continue
        take = b.create("or", [b.compare(v, best, direction="gt"), b.compare(v, v, direction="ne")])
        best = b.select(take, v, best)
        if want_index:
            step = sum(t * d * f for t, (_, _, _, d), f in zip(offset, geo, flat))
            index = b.select(take, b.add(origin_v, full_as(em, origin_v, float(step))), index)
    results = [reshape(em, best, em.out[0].shape)]
    results.append(reshape(em, index, em.out[1].shape) if want_index
                   else Unavailable(f"max_pool{spatial}d indices"))
    return results


def _first_valid(geo, sizes: Sequence[int], outs: Sequence[int]) -> torch.Tensor:
    """Per output position, the flat input index of the first in-bounds window element."""
    def first(o, k, s, p, d, size):
        for t in range(k):
            pos = o * s - p + t * d
            if 0 <= pos < size:
                return pos
        return 0
    firsts = [torch.tensor([first(a, k, st, p, d, size) for a in range(o)]) * f
              for (k, st, p, d), size, o, f in zip(geo, sizes, outs, _flat_strides(sizes))]
    return _outer(firsts, torch.add).to(torch.int64)


def _adaptive_windows(size: int, out: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Adaptive pooling's windows [floor(i n / o), ceil((i + 1) n / o)) of a dim of `size`:
    per output and offset into the longest window, the element read ([out, longest]; a
    shorter window repeats its last element) and whether the window holds it."""
    starts = [(i * size) // out for i in range(out)]
    ends = [-(-((i + 1) * size) // out) for i in range(out)]
    longest = max(e - a for a, e in zip(starts, ends))
    offsets = torch.arange(longest)
    start, end = torch.tensor(starts)[:, None], torch.tensor(ends)[:, None]
    return torch.minimum(start + offsets, end - 1), start + offsets < end


@handles(aten.adaptive_max_pool2d.default)
def _adaptive_max_pool2d(em: Emit, x: ir.Value, output_size: Sequence[int]) -> list[Any]:
    """Eager's windows [floor(i n / o), ceil((i + 1) n / o)) along H and W, of unequal
    lengths: per offset into the longest window, the rows and columns each output reads
    (a window shorter than that repeats its last element, which never beats itself),
    gathered by constant tables; then max_pool's rule over the offsets (the first maximum,
    or the last NaN)."""
    xb = _batched(em, x, 2)
    s = spec(xb)
    if not is_float(s.dtype):
        raise Unsupported("adaptive_max_pool2d of an integer tensor")
    n, c, h, w = s.shape
    outs = em.out[0].shape[-2:]
    if 0 in outs or 0 in (h, w):
        raise Unsupported("adaptive_max_pool2d of or to an empty size")
    b = em.b
    rows, cols = _adaptive_windows(h, outs[0])[0], _adaptive_windows(w, outs[1])[0]
    kh, kw = rows.shape[1], cols.shape[1]
    picked = b.index_select(xb, b.constant(rows.t().reshape(-1)), dim=2)  # [n, c, kh*oh, w]
    picked = b.index_select(picked, b.constant(cols.t().reshape(-1)), dim=3)
    picked = reshape(em, picked, (n, c, kh, outs[0], kw, outs[1]))
    out_b = (n, c, *outs)
    want_index = em.result_used(1)
    best, index = None, None
    for t in range(kh):
        for u in range(kw):
            v = reshape(em, b.slice(picked, start=[0, 0, t, 0, u, 0],
                                    limit=[n, c, t + 1, outs[0], u + 1, outs[1]],
                                    stride=[1] * 6), out_b)
            here = None
            if want_index:
                flat = rows[:, t][:, None] * w + cols[:, u][None, :]
                here = b.broadcast_to(b.constant(flat), out_b)
            if best is None:
                best, index = v, here
                continue
            take = b.create("or", [b.compare(v, best, direction="gt"),
                                   b.compare(v, v, direction="ne")])  # the last NaN wins
            best = b.select(take, v, best)
            if want_index:
                index = b.select(take, here, index)
    results = [reshape(em, best, em.out[0].shape)]
    results.append(reshape(em, index, em.out[1].shape) if want_index
                   else Unavailable("adaptive_max_pool2d indices"))
    return results


@handles(aten.avg_pool2d.default, aten.avg_pool3d.default)
def _avg_pool(em: Emit, x: ir.Value, kernel_size: Sequence[int], stride: Sequence[int] = (),
              padding: Sequence[int] = (0,), ceil_mode: bool = False,
              count_include_pad: bool = True, divisor_override: int | None = None) -> ir.Value:
    spatial = 3 if em.node.target is aten.avg_pool3d.default else 2
    if not is_float(spec(x).dtype):
        raise Unsupported(f"avg_pool{spatial}d of an integer tensor")
    dtype = _opmath(spec(x).dtype)  # 16-bit floats sum in f32, as eager's
    xb = _batched(em, cast(em, x, dtype), spatial)
    geo = _pool_geometry(kernel_size, stride, padding, [1], spatial)
    outs = em.out0.shape[-spatial:]
    total = None
    for _, v in _windows(em, xb, geo, outs, 0.0, ceil_mode):
        total = v if total is None else em.b.add(total, v)
    if divisor_override:
        divisor = full_as(em, total, float(divisor_override))
    else:
        counts = _avg_divisor(geo, spec(xb).shape[2:], outs, count_include_pad)
        divisor = em.b.broadcast_to(em.b.constant(counts.to(torch_dtype(dtype))),
                                    spec(total).shape)
    return cast(em, reshape(em, em.b.div(total, divisor), em.out0.shape), em.out0.dtype)


def _avg_divisor(geo, sizes: Sequence[int], outs: Sequence[int],
                 include_pad: bool) -> torch.Tensor:
    """PyTorch's avg_pool divisor per output position (window clipped to input or padding)."""
    def lengths(o_n, k, s, p, size):
        out = []
        for o in range(o_n):
            start = o * s - p
            end = min(start + k, size + p)
            out.append(end - start if include_pad else min(end, size) - max(start, 0))
        return torch.tensor(out, dtype=torch.float64)
    return _outer([lengths(o, k, st, p, size) for o, (k, st, p, _), size
                   in zip(outs, geo, sizes)], torch.mul)


@handles(aten._adaptive_avg_pool2d.default, aten._adaptive_avg_pool3d.default)
def _adaptive_avg_pool(em: Emit, x: ir.Value, output_size: Sequence[int]) -> ir.Value:
    """Windows that divide the input: a reshape and one sum. Otherwise eager's windows
    [floor(i n / o), ceil((i + 1) n / o)) along each dim, overlapping and of unequal
    lengths: their sums dim by dim, divided by each dim's lengths in turn (eager's
    sum / kh / kw). Each output reads only its window, so an infinity or NaN reaches the
    outputs (and a cotangent's the inputs) whose windows hold it, as in eager."""
    spatial = len(output_size)
    name = f"adaptive_avg_pool{spatial}d"
    if not is_float(spec(x).dtype):
        raise Unsupported(f"{name} of an integer tensor")
    if _opmath(spec(x).dtype) != spec(x).dtype:  # 16-bit floats in f32, as eager's
        return cast(em, _adaptive_avg_pool(em, cast(em, x, "f32"), output_size),
                    em.out0.dtype)
    s = spec(x)
    sizes = s.shape[-spatial:]
    outs = em.out0.shape[-spatial:]
    if 0 in outs:
        raise Unsupported(f"{name} to an empty {'x'.join(map(str, outs))} output")
    lead = list(s.shape[:-spatial])
    if any(n % o for n, o in zip(sizes, outs)):
        windows = [_adaptive_windows(n, o) for n, o in zip(sizes, outs)]
        for k, (positions, holds) in enumerate(windows):
            x = _window_sums(em, x, len(lead) + k, positions, holds)
        for k, (_, holds) in enumerate(windows):
            lengths = em.b.constant(holds.sum(1).to(torch_dtype(spec(x).dtype)))
            x = em.b.div(x, em.b.broadcast_in_dim(lengths, shape=spec(x).shape,
                                                  dims=[len(lead) + k]))
        return x
    windows = [n // o for n, o in zip(sizes, outs)]
    y = reshape(em, x, lead + [d for o, k in zip(outs, windows) for d in (o, k)])
    y = em.b.reduce_sum(y, dims=[len(lead) + 2 * k + 1 for k in range(spatial)])
    return em.b.div(y, full_as(em, y, float(math.prod(windows))))


def _window_sums(em: Emit, x: ir.Value, axis: int, positions: torch.Tensor,
                 holds: torch.Tensor) -> ir.Value:
    """Per window of `_adaptive_windows` along `axis`, the sum of the elements it holds:
    the elements at each offset gathered by one constant table, those a shorter window
    does not hold selected away (a select, so not even a NaN passes), summed over the
    offsets."""
    b = em.b
    s = spec(x)
    out, longest = positions.shape
    picked = b.index_select(x, b.constant(positions.t().reshape(-1)), dim=axis)
    picked = reshape(em, picked, (*s.shape[:axis], longest, out, *s.shape[axis + 1:]))
    kept = b.broadcast_in_dim(b.constant(holds.t()), shape=spec(picked).shape,
                              dims=[axis, axis + 1])
    return b.reduce_sum(b.select(kept, picked, b.full_like(picked, 0.0)), dims=[axis])

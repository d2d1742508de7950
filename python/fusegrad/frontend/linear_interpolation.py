"""interpolate's linear, bilinear and trilinear modes as eager's CPU kernel computes them.

PyTorch's decomposition writes each step as `a + (b - a) * w`, so an infinite pixel made
its neighbours NaN (inf - inf) where eager's `a * (1 - w) + b * w` keeps them infinite.
Here the source indices and weights are eager's (`compute_source_index_and_lambda`,
in the compute dtype: an output the size of its input copies, with weights 1 and 0 on
the same pixel; the source index `scale * (i + 0.5) - 0.5` one rounding, as the kernel's
contracted multiply-add), and each output is its neighbours times their weights, summed
along the last dim first, as eager's `Interpolate` recursion. So an infinity or NaN, in
a pixel or a cotangent, reaches the positions it reaches in eager, 0 * inf = NaN
included.
"""
from __future__ import annotations

import itertools
from typing import Sequence

import torch
from torch._decomp.decompositions import _upsample_linear, upsample_compute_output_size
from torch._prims_common import suggest_memory_format
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten


def _taps(size: int, out: int, align_corners: bool, scale: float | None, dtype: torch.dtype,
          compute: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(first and second source index, their weights) per output position of one dim."""
    i = torch.arange(out, device=device)
    if statically_known_true(size == out):
        return (i, i, torch.ones(out, dtype=compute, device=device),
                torch.zeros(out, dtype=compute, device=device))
    if align_corners:
        ratio = torch.full((), size - 1, dtype=compute, device=device) / (out - 1) \
            if out > 1 else torch.zeros((), dtype=compute, device=device)
        source = ratio * i.to(compute)
    else:
        ratio = torch.full((), 1.0 / scale, dtype=compute, device=device) \
            if scale is not None and scale > 0 \
            else torch.full((), size, dtype=compute, device=device) / out
        half = i.to(compute) + 0.5
        if compute == torch.float32:  # exact in f64, rounded once
            source = (ratio.double() * half.double() - 0.5).to(compute)
        else:
            source = ratio * half - 0.5
        source = source.clamp_min(0.0)
    first = source.to(torch.int64).clamp_max(size - 1)
    second = torch.where(first < size - 1, first + 1, first)
    weight = (source - first.to(compute)).clamp(0.0, 1.0)
    # stored in the input's dtype, read in the compute dtype
    return (first, second, (1.0 - weight).to(dtype).to(compute),
            weight.to(dtype).to(compute))


def upsample_linear(input: torch.Tensor, output_size: Sequence[int], align_corners: bool,
                    scales: Sequence[float | None]) -> torch.Tensor:
    """Linear interpolation of the dims after the first two to `output_size`."""
    if not input.is_floating_point():
        return _upsample_linear(input, list(output_size), align_corners, list(scales))
    compute = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
    x = input.to(compute)
    spatial = len(output_size)
    taps = [_taps(size, out, align_corners, scale, input.dtype, compute, input.device)
            for size, out, scale in zip(input.shape[2:], output_size, scales)]

    def along(k: int, t: torch.Tensor) -> torch.Tensor:  # t indexed by dim 2 + k
        return t.reshape(-1, *[1] * (spatial - 1 - k))
    values = [aten._unsafe_index(x, [None, None, *(along(k, taps[k][c])
                                                   for k, c in enumerate(corner))])
              for corner in itertools.product((0, 1), repeat=spatial)]
    for k in reversed(range(spatial)):  # pairs differ in dim k, the last dim first
        w0, w1 = along(k, taps[k][2]), along(k, taps[k][3])
        values = [a * w0 + b * w1 for a, b in zip(values[::2], values[1::2])]
    return values[0].to(input.dtype).contiguous(memory_format=suggest_memory_format(input))


def upsample_linear_vec(input: torch.Tensor, output_size: Sequence[int] | None,
                        align_corners: bool,
                        scale_factors: Sequence[float] | None) -> torch.Tensor:
    sizes = upsample_compute_output_size(input.size(), output_size, scale_factors)
    return upsample_linear(input, sizes, align_corners, scale_factors or [None] * len(sizes))


def upsample_linear1d(input: torch.Tensor, output_size: Sequence[int], align_corners: bool,
                      scales_w: float | None = None) -> torch.Tensor:
    return upsample_linear(input, output_size, align_corners, [scales_w])


def upsample_bilinear2d(input: torch.Tensor, output_size: Sequence[int], align_corners: bool,
                        scales_h: float | None = None,
                        scales_w: float | None = None) -> torch.Tensor:
    return upsample_linear(input, output_size, align_corners, [scales_h, scales_w])


def upsample_trilinear3d(input: torch.Tensor, output_size: Sequence[int], align_corners: bool,
                         scales_d: float | None = None, scales_h: float | None = None,
                         scales_w: float | None = None) -> torch.Tensor:
    return upsample_linear(input, output_size, align_corners, [scales_d, scales_h, scales_w])


DECOMPOSITIONS = {
    aten.upsample_linear1d.default: upsample_linear1d,
    aten.upsample_bilinear2d.default: upsample_bilinear2d,
    aten.upsample_trilinear3d.default: upsample_trilinear3d,
    aten.upsample_linear1d.vec: upsample_linear_vec,
    aten.upsample_bilinear2d.vec: upsample_linear_vec,
    aten.upsample_trilinear3d.vec: upsample_linear_vec,
}

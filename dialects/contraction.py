"""Contractions: batched matmul and 2-D convolution (NCHW x OIHW)."""
from __future__ import annotations

import torch

from .core import Attr, Kind, ShapeError, define, reference_rule, shape_rule

define("matmul", ("lhs", "rhs"), kind=Kind.CONTRACTION,
       summary="[..., M, K] x [..., K, N] -> [..., M, N]; batch dims equal (broadcast explicitly)")
define("conv2d", ("x", "weight"),
       attrs={"stride": Attr.I64S, "padding": Attr.I64S, "dilation": Attr.I64S, "groups": Attr.I64},
       kind=Kind.CONTRACTION,
       summary="NCHW input x OIHW weight, zero padding [ph, pw], no bias (add it explicitly)")


@shape_rule("matmul")
def _matmul_shape(ins, attrs, hint, *, op):
    a, b = ins
    if a.dtype != b.dtype:
        raise ShapeError(f"dg.matmul: operand dtypes differ ({a.dtype} vs {b.dtype})")
    if a.rank < 2 or a.rank != b.rank:
        raise ShapeError(f"dg.matmul: operands need equal rank >= 2, got {a.rank} and {b.rank}")
    if a.shape[:-2] != b.shape[:-2]:
        raise ShapeError(f"dg.matmul: batch dims {list(a.shape[:-2])} and {list(b.shape[:-2])} "
                         "differ; broadcast explicitly")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"dg.matmul: contracting dims differ: lhs K={a.shape[-1]}, "
                         f"rhs K={b.shape[-2]}")
    return [a.with_shape(a.shape[:-1] + (b.shape[-1],))]


@shape_rule("conv2d")
def _conv2d_shape(ins, attrs, hint, *, op):
    x, w = ins
    if x.dtype != w.dtype:
        raise ShapeError(f"dg.conv2d: operand dtypes differ ({x.dtype} vs {w.dtype})")
    if x.rank != 4 or w.rank != 4:
        raise ShapeError(f"dg.conv2d: input and weight must be rank 4, got {x.rank} and {w.rank}")
    stride, padding, dilation = (tuple(attrs[k]) for k in ("stride", "padding", "dilation"))
    groups = attrs["groups"]
    if not len(stride) == len(padding) == len(dilation) == 2:
        raise ShapeError("dg.conv2d: stride, padding and dilation need 2 entries each")
    if min(stride + dilation) < 1 or min(padding) < 0 or groups < 1:
        raise ShapeError("dg.conv2d: stride/dilation must be >= 1, padding >= 0, groups >= 1")
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if c % groups or o % groups or cg * groups != c:
        raise ShapeError(f"dg.conv2d: {c} input channels, {o} output channels and weight "
                         f"in-channels {cg} do not fit groups={groups}")
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if oh < 1 or ow < 1:
        raise ShapeError(f"dg.conv2d: kernel {kh}x{kw} does not fit the padded input {h}x{wd}")
    return [x.with_shape((n, o, oh, ow))]


@reference_rule("matmul")
def _matmul_ref(a, b, *, op, attrs, out):
    return [torch.matmul(a, b)]


@reference_rule("conv2d")
def _conv2d_ref(x, w, *, op, attrs, out):
    return [torch.nn.functional.conv2d(x, w, None, list(attrs["stride"]), list(attrs["padding"]),
                                       list(attrs["dilation"]), attrs["groups"])]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)

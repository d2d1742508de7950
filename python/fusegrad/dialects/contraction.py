"""Contractions: batched matmul (also accumulating onto a tensor) and 2-D convolution
(NCHW x OIHW)."""
from __future__ import annotations


from .core import (Attr, Kind, ShapeError, define, equal, holds, lowering, reference_rule, require,
                   shape_rule)
from .lazy_torch import torch

define("matmul", ("lhs", "rhs"), kind=Kind.CONTRACTION,
       summary="[..., M, K] x [..., K, N] -> [..., M, N]; batch dims equal (broadcast explicitly)")
# A product accumulated onto a tensor and rounded once: a 16-bit float linear layer's
# `x @ W^T + bias` as a library gemm with beta = 1 (transforms/fusion/narrow_matmuls.py), which
# a matmul and an add would round twice
define("matmul_add", ("lhs", "rhs", "acc"), kind=Kind.CONTRACTION,
       summary="lhs @ rhs + acc, rounded once; acc has the product's shape and dtype")
_CONV_ATTRS = {"stride": Attr.I64S, "padding": Attr.I64S, "dilation": Attr.I64S,
               "groups": Attr.I64}
define("conv2d", ("x", "weight"), attrs=dict(_CONV_ATTRS), kind=Kind.CONTRACTION,
       summary="NCHW input x OIHW weight, zero padding [ph, pw], no bias (add it explicitly)")
# The two halves of dg.conv2d's derivative, as ops of their own so that a target can
# run them as one library call (PyTorch's convolution_backward on the CPU,
# codegen/cpu/library/conv_to_torch.py); their lowering is the decomposition into forward
# convolutions. Each takes the forward's attributes plus the shape of the operand
# it does not read.
define("conv2d_input_grad", ("grad", "weight"),
       attrs={**_CONV_ATTRS, "input_shape": Attr.I64S}, kind=Kind.CONTRACTION,
       summary="d/dx of <grad, conv2d(x, weight)> for x of shape input_shape: the input "
               "gradient of dg.conv2d (a transposed convolution)")
define("conv2d_weight_grad", ("x", "grad"),
       attrs={**_CONV_ATTRS, "weight_shape": Attr.I64S}, kind=Kind.CONTRACTION,
       summary="d/dweight of <grad, conv2d(x, weight)> for weight of shape weight_shape: "
               "the weight gradient of dg.conv2d")


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


@shape_rule("matmul_add")
def _matmul_add_shape(ins, attrs, hint, *, op):
    (product,) = _matmul_shape(ins[:2], attrs, hint, op="matmul")
    acc = ins[2]
    if acc.shape != product.shape or acc.dtype != product.dtype:
        raise ShapeError(f"dg.matmul_add: acc is {list(acc.shape)} {acc.dtype}, the product "
                         f"{list(product.shape)} {product.dtype}")
    return [product]


@shape_rule("conv2d")
def _conv2d_shape(ins, attrs, hint, *, op):
    x, w = ins
    if x.dtype != w.dtype:
        raise ShapeError(f"dg.{op}: operand dtypes differ ({x.dtype} vs {w.dtype})")
    if x.rank != 4 or w.rank != 4:
        raise ShapeError(f"dg.{op}: input and weight must be rank 4, got {x.rank} and {w.rank}")
    stride, padding, dilation = (tuple(attrs[k]) for k in ("stride", "padding", "dilation"))
    groups = attrs["groups"]
    if not len(stride) == len(padding) == len(dilation) == 2:
        raise ShapeError(f"dg.{op}: stride, padding and dilation need 2 entries each")
    if min(stride + dilation) < 1 or min(padding) < 0 or groups < 1:
        raise ShapeError(f"dg.{op}: stride/dilation must be >= 1, padding >= 0, groups >= 1")
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    fits = [equal(c % groups, 0), equal(o % groups, 0), equal(cg * groups, c)]
    require(all(holds(f) is not False for f in fits),
            f"dg.{op}: {c} input channels, {o} output channels and weight in-channels {cg} "
            f"do not fit groups={groups}")
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    require(holds(oh >= 1) is not False and holds(ow >= 1) is not False,
            f"dg.{op}: kernel {kh}x{kw} does not fit the padded input {h}x{wd}")
    return [x.with_shape((n, o, oh, ow))]


def _named_shape(op, attrs, attr, like, g):
    """The operand shape an attribute gives (input_shape, weight_shape), as a spec."""
    shape = tuple(attrs[attr])
    if len(shape) != 4 or any(holds(d >= 1) is False for d in shape):
        raise ShapeError(f"dg.{op}: {attr} must be 4 positive sizes, got {list(shape)}")
    if g.rank != 4:
        raise ShapeError(f"dg.{op}: grad must be rank 4, got {g.rank}")
    return like.with_shape(shape)


def _check_grad(op, x, w, g, attrs):
    """`g` must have the shape of conv2d(x, w)."""
    (y,) = _conv2d_shape([x, w], attrs, None, op=op)
    if y.shape != g.shape:
        raise ShapeError(f"dg.{op}: grad has shape {list(g.shape)}, but the convolution of "
                         f"input {list(x.shape)} with weight {list(w.shape)} has shape "
                         f"{list(y.shape)}")


@shape_rule("conv2d_input_grad")
def _conv2d_input_grad_shape(ins, attrs, hint, *, op):
    g, w = ins
    x = _named_shape(op, attrs, "input_shape", g, g)
    _check_grad(op, x, w, g, attrs)
    return [x]


@shape_rule("conv2d_weight_grad")
def _conv2d_weight_grad_shape(ins, attrs, hint, *, op):
    x, g = ins
    if g.dtype != x.dtype:
        raise ShapeError(f"dg.{op}: operand dtypes differ ({x.dtype} vs {g.dtype})")
    w = _named_shape(op, attrs, "weight_shape", x, g)
    _check_grad(op, x, w, g, attrs)
    return [w]


@reference_rule("matmul")
def _matmul_ref(a, b, *, op, attrs, out):
    return [torch.matmul(a, b)]


@reference_rule("matmul_add")
def _matmul_add_ref(a, b, acc, *, op, attrs, out):
    wide = torch.float64 if a.dtype == torch.float64 else torch.float32
    if not a.is_floating_point():
        return [torch.matmul(a, b) + acc]
    return [(torch.matmul(a.to(wide), b.to(wide)) + acc.to(wide)).to(a.dtype)]


@reference_rule("conv2d")
def _conv2d_ref(x, w, *, op, attrs, out):
    return [torch.nn.functional.conv2d(x, w, None, list(attrs["stride"]), list(attrs["padding"]),
                                       list(attrs["dilation"]), attrs["groups"])]


def _convolution_backward(g, x, w, attrs, mask):
    """PyTorch's convolution_backward (what eager autograd runs); differentiable."""
    return torch.ops.aten.convolution_backward(
        g, x, w, None, list(attrs["stride"]), list(attrs["padding"]), list(attrs["dilation"]),
        False, [0, 0], attrs["groups"], mask)


@reference_rule("conv2d_input_grad")
def _conv2d_input_grad_ref(g, w, *, op, attrs, out):
    x = g.new_zeros(tuple(attrs["input_shape"]))  # only its shape is read
    return [_convolution_backward(g, x, w, attrs, [True, False, False])[0]]


@reference_rule("conv2d_weight_grad")
def _conv2d_weight_grad_ref(x, g, *, op, attrs, out):
    w = x.new_zeros(tuple(attrs["weight_shape"]))  # only its shape is read
    return [_convolution_backward(g, x, w, attrs, [False, True, False])[1]]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
@lowering("matmul", "matmul_add")
def _matmul_lower(op, operands, *, op_name, attrs, out):
    """linalg.matmul (rank 2) or linalg.batch_matmul into a zero fill (into acc, for
    dg.matmul_add: linalg accumulates onto its outs); rank > 3 collapses the batch dims
    into one and expands the result back."""
    from mlir.dialects import linalg
    from ..conversion import linalg_builders as lb
    a, b = operands[:2]
    o = out[0]
    init = operands[2] if op_name == "matmul_add" else lb.full(o.shape, o.dtype, 0)
    integer = o.dtype.startswith("i")
    if o.rank == 2:
        if integer:
            return [_integer_matmul(a, b, init, batched=False)]
        return [linalg.matmul(a, b, outs=[init])]
    groups = [list(range(o.rank - 2)), [o.rank - 2], [o.rank - 1]]
    if o.rank > 3:
        a, b, init = (lb.collapse(v, groups) for v in (a, b, init))
    if integer:
        res = _integer_matmul(a, b, init, batched=True)
    else:
        res = linalg.batch_matmul(a, b, outs=[init])
    return [lb.expand(res, groups, o.shape) if o.rank > 3 else res]


def _integer_matmul(a, b, init, batched: bool):
    """An integer (batched) matmul as a linalg.generic: no BLAS or cuBLAS takes it, and as
    a generic it is a loop nest kernel like any reduction on either target."""
    from mlir import ir
    from mlir.dialects import arith
    from ..conversion import linalg_builders as lb
    batch = [0] if batched else []
    m, n, k = (len(batch) + i for i in range(3))
    dims = len(batch) + 3
    maps = [ir.AffineMap.get(dims, 0, [ir.AffineExpr.get_dim(d) for d in batch + idx])
            for idx in ([m, k], [k, n], [m, n])]
    iterators = ["parallel"] * (dims - 1) + ["reduction"]
    return lb.generic([a, b], [init], maps, iterators,
                      lambda v: [arith.addi(v[2], arith.muli(v[0], v[1]))])[0]


@lowering("conv2d")
def _conv2d_lower(op, operands, *, op_name, attrs, out):
    """Zero-pad the input (fill + insert_slice), then linalg.conv_2d_nchw_fchw; groups > 1
    split channels into a group dim and use linalg.conv_2d_ngchw_gfchw."""
    from mlir import ir
    from mlir.dialects import linalg
    from ..conversion import linalg_builders as lb
    x, w = operands
    o, g = out[0], attrs["groups"]
    n, c, h, wd = lb.dims(x)
    f, cg, kh, kw = lb.dims(w)
    ph, pw = attrs["padding"]
    if ph or pw:
        x = lb.insert_slice(x, lb.full([n, c, h + 2 * ph, wd + 2 * pw], o.dtype, 0), [0, 0, ph, pw])
    hp, wp = h + 2 * ph, wd + 2 * pw
    kwargs = dict(strides=list(attrs["stride"]), dilations=list(attrs["dilation"]))
    if g == 1:
        return [linalg.conv_2d_nchw_fchw(x, w, outs=[lb.full(o.shape, o.dtype, 0)], **kwargs)]
    xg = lb.expand(x, [[0], [1, 2], [3], [4]], [n, g, c // g, hp, wp])
    wg = lb.expand(w, [[0, 1], [2], [3], [4]], [g, f // g, cg, kh, kw])
    init = lb.full([n, g, f // g, o.shape[2], o.shape[3]], o.dtype, 0)
    res = linalg.conv_2d_ngchw_gfchw(xg, wg, outs=[init], **kwargs)
    return [lb.collapse(res, [[0], [1, 2], [3], [4]])]


@lowering("conv2d_input_grad", "conv2d_weight_grad")
def _conv2d_grad_lower(op, operands, *, op_name, attrs, out):
    """The derivative written as forward convolutions (`_conv_input_grad`,
    `_conv_weight_grad` below): dg ops (pad, reverse, transpose, conv2d, ...) that
    dg-lower-to-linalg lowers in turn. The CPU pipeline calls PyTorch's
    convolution_backward instead (dg-outline-conv-grads, dg-conv-to-torch)."""
    from .builder import Builder
    a, b = operands
    conv = {k: attrs[k] for k in _CONV_ATTRS}
    if op_name == "conv2d_input_grad":
        return [_conv_input_grad(Builder(), a, b, attrs["input_shape"], conv)]
    return [_conv_weight_grad(Builder(), a, b, attrs["weight_shape"], conv)]


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .builder import spec  # noqa: E402
from .core import jvp_rule, vjp_rule  # noqa: E402
from .shape_ops import reshape_to  # noqa: E402


def _swap_last(b, x):
    r = spec(x).rank
    return b.transpose(x, perm=list(range(r - 2)) + [r - 1, r - 2])


@vjp_rule("matmul", "matmul_add")
def _matmul_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None] * len(ins)
    lhs, rhs = ins[:2]
    acc = [g] if op == "matmul_add" else []
    return [b.matmul(g, _swap_last(b, rhs)), b.matmul(_swap_last(b, lhs), g), *acc]


def _pad_or_crop(b, x, low, high, interior):
    """Spatial (dims 2, 3) dg.pad that also accepts negative low/high (cropping)."""
    zeros = [0, 0]
    padded = x
    if any(v > 0 for v in low + high + interior):
        padded = b.pad(x, low=zeros + [max(v, 0) for v in low],
                       high=zeros + [max(v, 0) for v in high], interior=zeros + list(interior),
                       value=0.0)
    if min(low + high) >= 0:
        return padded
    shape = spec(padded).shape
    start = zeros + [max(-v, 0) for v in low]
    limit = list(shape[:2]) + [shape[2 + i] - max(-high[i], 0) for i in range(2)]
    return b.slice(padded, start=start, limit=limit, stride=[1] * 4)


def _conv_input_grad(b, g, w, input_shape, attrs):
    """d conv / d x (the lowering of dg.conv2d_input_grad): a stride-1 conv of the
    stride-dilated, padded cotangent with the spatially flipped weight whose in/out
    channels are swapped per group."""
    stride, padding, dilation, groups = (attrs[k] for k in ("stride", "padding", "dilation",
                                                            "groups"))
    _, _, h, wd = input_shape
    o, cg, kh, kw = spec(w).shape
    oh, ow = spec(g).shape[2:]
    low = [dilation[i] * (k - 1) - padding[i] for i, k in enumerate((kh, kw))]
    high = [size + padding[i] - 1 - (n - 1) * stride[i]
            for i, (size, n) in enumerate(((h, oh), (wd, ow)))]
    g_full = _pad_or_crop(b, g, low, high, [s - 1 for s in stride])
    og = o // groups
    w_t = reshape_to(b, w, (groups, og, cg, kh, kw))
    w_t = b.transpose(w_t, perm=[0, 2, 1, 3, 4])
    w_t = reshape_to(b, w_t, (groups * cg, og, kh, kw))
    w_t = b.reverse(w_t, dims=[2, 3])
    return b.conv2d(g_full, w_t, stride=[1, 1], padding=[0, 0], dilation=dilation, groups=groups)


def _conv_weight_grad(b, x, g, weight_shape, attrs):
    """d conv / d w (the lowering of dg.conv2d_weight_grad): a conv of x (channels as
    batch, batch as channels) with the cotangent as the kernel; stride and dilation swap
    roles. Groups become conv groups."""
    stride, padding, dilation, groups = (attrs[k] for k in ("stride", "padding", "dilation",
                                                            "groups"))
    n, c, h, wd = spec(x).shape
    o, cg, kh, kw = weight_shape
    oh, ow = spec(g).shape[2:]
    og = o // groups
    x_t = reshape_to(b, x, (n, groups, cg, h, wd))
    x_t = b.transpose(x_t, perm=[2, 1, 0, 3, 4])
    x_t = reshape_to(b, x_t, (cg, groups * n, h, wd))
    g_t = reshape_to(b, g, (n, groups, og, oh, ow))
    g_t = b.transpose(g_t, perm=[1, 2, 0, 3, 4])
    g_t = reshape_to(b, g_t, (o, n, oh, ow))
    full = b.conv2d(x_t, g_t, stride=dilation, padding=padding, dilation=stride, groups=groups)
    full = b.transpose(full, perm=[1, 0, 2, 3])  # (o, cg, kh', kw') with kh' >= kh
    if spec(full).shape[2:] == (kh, kw):
        return full
    return b.slice(full, start=[0, 0, 0, 0], limit=[o, cg, kh, kw], stride=[1, 1, 1, 1])


@vjp_rule("conv2d")
def _conv2d_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None, None]
    x, w = ins
    return [b.conv2d_input_grad(g, w, input_shape=spec(x).shape, **attrs),
            b.conv2d_weight_grad(x, g, weight_shape=spec(w).shape, **attrs)]


# The gradient ops are bilinear too, and adjoint to conv2d: with I = conv2d_input_grad and
# W = conv2d_weight_grad, <c, I(g, w)> = <conv2d(c, w), g> and <c, W(x, g)> = <conv2d(x, c), g>.
@vjp_rule("conv2d_input_grad")
def _conv2d_input_grad_vjp(b, ins, outs, cts, *, op, attrs):
    (c,) = cts
    if c is None:
        return [None, None]
    g, w = ins
    conv = {k: attrs[k] for k in _CONV_ATTRS}
    return [b.conv2d(c, w, **conv), b.conv2d_weight_grad(c, g, weight_shape=spec(w).shape, **conv)]


@vjp_rule("conv2d_weight_grad")
def _conv2d_weight_grad_vjp(b, ins, outs, cts, *, op, attrs):
    (c,) = cts
    if c is None:
        return [None, None]
    x, g = ins
    conv = {k: attrs[k] for k in _CONV_ATTRS}
    return [b.conv2d_input_grad(g, c, input_shape=spec(x).shape, **conv), b.conv2d(x, c, **conv)]


@jvp_rule("matmul", "matmul_add", "conv2d", "conv2d_input_grad", "conv2d_weight_grad")
def _bilinear_jvp(b, ins, outs, tangents, *, op, attrs):
    """The contractions are bilinear: d(x * w) = dx * w + x * dw (+ d acc)."""
    tx, tw = tangents[:2]
    product = "matmul" if op == "matmul_add" else op
    terms = [] if op != "matmul_add" or tangents[2] is None else [tangents[2]]
    if tx is not None:
        terms.append(b.create(product, (tx, ins[1]), **attrs))
    if tw is not None:
        terms.append(b.create(product, (ins[0], tw), **attrs))
    if not terms:
        return [None]
    total = terms[0]
    for t in terms[1:]:
        total = b.add(total, t)
    return [total]

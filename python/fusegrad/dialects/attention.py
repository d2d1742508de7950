"""Scaled dot-product attention as one op, and its gradient.

softmax(q k^T * scale + mask) v materializes a [B, H, L, S] score matrix, its
probabilities and, in the backward, their gradient. Once that no longer fits in
cache (see MIN_KEYS), PyTorch's flash kernels, which keep blocks of it there, are
faster (with the scores materialized, a LLaMA training step on 1024-token sequences
runs at 0.69x eager's speed). `dg.attention`
keeps the computation whole so that a target can run such a kernel (the CPU
pipeline calls PyTorch's, codegen/cpu/library/attention_to_torch.py); its lowering is the
decomposition into matmuls and a softmax (`attention_math`), which every target
compiles.

Semantics, as PyTorch's `_scaled_dot_product_flash_attention_for_cpu` (what
eager runs on the CPU) and its fused CUDA kernels (flash, memory-efficient, cuDNN):
q [B, H, L, E], k and v [B, H, S, E], an additive mask broadcastable to [B, H, L, S]
(each dim 1 or full), `causal` masks key j > query i. Results: out [B, H, L, E] and
the log-sum-exp of each row's scores [B, H, L], in f32 for 16-bit floats (the
kernels' accumulator: what their backward reads). A row with every score -inf gives
out 0 and log-sum-exp 0. f16/bf16 ops come from CUDA captures (the CPU keeps f32/f64).

`dg.attention_grad` is the derivative of out (PyTorch's flash backward). Second
derivatives and forward mode go through the decomposition (dialects/composite.py).
"""
from __future__ import annotations

from .core import Attr, Kind, ShapeError, define, lowering, reference_rule, shape_rule
from .lazy_torch import torch

# From this many keys on, the capture keeps attention whole (dg.attention); below it
# decomposes it, and autodiff and dg-fuse work on the pieces like any other ops. On
# the CPU (1 thread, B*L = 1024 causal rows of 4 heads of 64, forward and backward)
# PyTorch's flash kernels took 5.1 / 7.8 / 8.0 / 14.8 / 26.1 ms at 128 / 256 / 384 /
# 512 / 1024 keys, the fused decomposition 4.4 / 8.0 / 9.1 / 16.2 / 41.0 ms.
MIN_KEYS = 256
OPS = ("dg.attention", "dg.attention_grad")
# the dtypes each target's attention kernels take: the CPU's flash kernel computes f32
# and f64 exactly (16-bit attention decomposes at capture there); PyTorch's fused CUDA
# kernels take 16-bit floats and f32, and eager runs f64 in the math form, as fusegrad
# does (dg-decompose-attention{keep-library=1})
KERNEL_DTYPES = {"cpu": ("f32", "f64"), "cuda": ("f16", "bf16", "f32")}
_ATTRS = {"scale": Attr.F64, "causal": Attr.I64}
define("attention", ("query", "key", "value", "mask"), ("out", "logsumexp"), attrs=dict(_ATTRS),
       kind=Kind.CONTRACTION,
       summary="softmax(query key^T * scale + mask [causal]) value, and each row's "
               "log-sum-exp")
define("attention_grad", ("grad", "query", "key", "value", "out", "logsumexp", "mask"),
       ("grad_query", "grad_key", "grad_value"), attrs=dict(_ATTRS), kind=Kind.CONTRACTION,
       summary="the gradients of dg.attention's query, key and value from grad, the "
               "cotangent of its out (given the forward's out and logsumexp)")


DTYPES = ("f16", "bf16", "f32", "f64")


def logsumexp_dtype(dtype: str) -> str:
    """The dtype of dg.attention's log-sum-exp for a query of `dtype`: 16-bit floats
    accumulate in f32, and PyTorch's kernels return (and their backward read) it so."""
    return "f32" if dtype in ("f16", "bf16") else dtype


def _logsumexp_spec(q):
    return q.with_shape(q.shape[:3]).with_dtype(logsumexp_dtype(q.dtype))


def _check(op, q, k, v, mask):
    if not q.dtype == k.dtype == v.dtype == mask.dtype or q.dtype not in DTYPES:
        raise ShapeError(f"dg.{op}: query, key, value and mask must share a float dtype "
                         f"({'/'.join(DTYPES)}), got {q.dtype}, {k.dtype}, {v.dtype}, "
                         f"{mask.dtype}")
    if not q.rank == k.rank == v.rank == mask.rank == 4:
        raise ShapeError(f"dg.{op}: query, key, value and mask must be rank 4")
    b, h, l, e = q.shape
    s = k.shape[2]
    if k.shape != (b, h, s, e) or v.shape != k.shape:
        raise ShapeError(f"dg.{op}: key {list(k.shape)} and value {list(v.shape)} must be "
                         f"[{b}, {h}, S, {e}] for query {list(q.shape)}")
    full = (b, h, l, s)
    if any(m not in (1, f) for m, f in zip(mask.shape, full)):
        raise ShapeError(f"dg.{op}: mask {list(mask.shape)} does not broadcast to {list(full)}")


@shape_rule("attention")
def _attention_shape(ins, attrs, hint, *, op):
    q, k, v, mask = ins
    _check(op, q, k, v, mask)
    return [q, _logsumexp_spec(q)]


@shape_rule("attention_grad")
def _attention_grad_shape(ins, attrs, hint, *, op):
    g, q, k, v, out, lse, mask = ins
    _check(op, q, k, v, mask)
    if g != q or out != q or lse != _logsumexp_spec(q):
        raise ShapeError(f"dg.{op}: grad and out must match query {q}, logsumexp its first "
                         f"three dims in {logsumexp_dtype(q.dtype)}")
    return [q, k, v]


# The references are the decomposition in torch (differentiable to any order, unlike
# PyTorch's flash kernels); tests compare compiled code with the flash kernels themselves.
def _torch_scores(q, k, mask, attrs):
    s = q @ k.transpose(-1, -2) * attrs["scale"] + mask
    if attrs["causal"]:
        later = torch.ones(s.shape[-2:], dtype=torch.bool).triu(1)
        s = s.masked_fill(later, float("-inf"))
    return s


def _widened_reference(fn):
    """`fn` on 16-bit floats computed in f32, its results rounded once to the query's
    dtype, the log-sum-exp kept in f32: PyTorch's kernels accumulate so."""
    def reference(*xs, op, attrs, out):
        narrow = xs[0].dtype
        if narrow not in (torch.float16, torch.bfloat16):
            return fn(*xs, attrs=attrs)
        results = fn(*(x.float() for x in xs), attrs=attrs)
        return [r if (op, i) == ("attention", 1) else r.to(narrow)
                for i, r in enumerate(results)]
    return reference


def _attention_ref(q, k, v, mask, *, attrs):
    s = _torch_scores(q, k, mask, attrs)
    m = s.amax(-1, keepdim=True).detach()
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    total = e.sum(-1, keepdim=True)
    empty = total == 0
    p = torch.where(empty, torch.zeros_like(e), e / total)
    lse = torch.where(empty, torch.zeros_like(total), m + torch.log(total))
    return [p @ v, lse.squeeze(-1)]


def _attention_grad_ref(g, q, k, v, o, lse, mask, *, attrs):
    p = torch.exp(_torch_scores(q, k, mask, attrs) - lse.unsqueeze(-1))
    ds = p * (g @ v.transpose(-1, -2) - (g * o).sum(-1, keepdim=True)) * attrs["scale"]
    return [ds @ k, ds.transpose(-1, -2) @ q, p.transpose(-1, -2) @ g]


reference_rule("attention")(_widened_reference(_attention_ref))
reference_rule("attention_grad")(_widened_reference(_attention_grad_ref))


# ---------------------------------------------------------------- the decomposition
def _swap_last(b, x):
    return b.transpose(x, perm=[0, 1, 3, 2])


def _rows(b, x, shape):
    """A [B, H, L] row value broadcast along the last dim of `shape`."""
    return b.broadcast_in_dim(x, shape=shape, dims=[0, 1, 2])


def _scores(b, q, k, mask, scale: float, causal: bool):
    from .builder import spec
    bsz, h, l, _ = spec(q).shape
    shape = (bsz, h, l, spec(k).shape[2])
    dtype = spec(q).dtype
    s = b.mul(b.matmul(q, _swap_last(b, k)), b.full(shape=shape, dtype=dtype, value=scale))
    s = b.add(s, b.broadcast_in_dim(mask, shape=shape, dims=[0, 1, 2, 3]))
    if causal:  # key j > query i is masked (top-left aligned, as PyTorch)
        later = b.compare(b.iota(shape=shape, dtype="i64", dim=3),
                          b.iota(shape=shape, dtype="i64", dim=2), direction="gt")
        s = b.select(later, b.full(shape=shape, dtype=dtype, value=float("-inf")), s)
    return s


def attention_math(b, q, k, v, mask, scale: float, causal: bool):
    """(out, logsumexp) of dg.attention as matmuls and a softmax."""
    from .builder import spec
    s = _scores(b, q, k, mask, scale, causal)
    shape, dtype = spec(s).shape, spec(s).dtype
    rows = shape[:3]

    def fill(value):
        return b.full(shape=rows, dtype=dtype, value=value)
    # the max only keeps exp in range: held constant, as in the softmax decomposition
    m = b.stop_gradient(b.reduce_max(s, dims=[3]))
    m = b.select(b.compare(m, fill(float("-inf")), direction="eq"), fill(0.0), m)
    e = b.exp(b.sub(s, _rows(b, m, shape)))
    total = b.reduce_sum(e, dims=[3])
    empty = b.compare(total, fill(0.0), direction="eq")  # every score -inf
    inverse = b.select(empty, fill(0.0), b.div(fill(1.0), total))
    out = b.matmul(b.mul(e, _rows(b, inverse, shape)), v)
    lse = b.select(empty, fill(0.0), b.add(m, b.log(total)))
    return out, lse


def attention_grad_math(b, g, q, k, v, out, lse, mask, scale: float, causal: bool,
                        grad_lse=None, with_mask: bool = True):
    """(grad_query, grad_key, grad_value[, grad_mask]) of dg.attention as matmuls, given
    cotangents of out (`g`) and, optionally, of logsumexp (`grad_lse`)."""
    from .builder import spec
    s = _scores(b, q, k, mask, scale, causal)
    shape, dtype = spec(s).shape, spec(s).dtype
    p = b.exp(b.sub(s, _rows(b, lse, shape)))
    grad_v = b.matmul(_swap_last(b, p), g)
    dp = b.matmul(g, _swap_last(b, v))
    dp = b.sub(dp, _rows(b, b.reduce_sum(b.mul(g, out), dims=[3]), shape))
    if grad_lse is not None:
        dp = b.add(dp, _rows(b, grad_lse, shape))
    grad_scores = b.mul(p, dp)
    ds = b.mul(grad_scores, b.full(shape=shape, dtype=dtype, value=scale))
    grads = (b.matmul(ds, k), b.matmul(_swap_last(b, ds), q), grad_v)
    if not with_mask:
        return grads
    # the mask's gradient: the scores' summed over the dims it broadcasts along
    spread = [d for d, (m, n) in enumerate(zip(spec(mask).shape, shape)) if m != n]
    if spread:
        grad_scores = b.reshape(b.reduce_sum(grad_scores, dims=spread), shape=spec(mask).shape)
    return (*grads, grad_scores)


def in_f32(b, fn, operands, keep=()):
    """`fn(*operands)` with 16-bit float operands widened to f32 and the results rounded
    once back to the first operand's dtype, but those at the indices `keep` (a
    log-sum-exp): PyTorch's attention kernels accumulate in f32, and so must the
    decomposition that stands in for them."""
    from .builder import spec
    narrow = spec(operands[0]).dtype
    if narrow not in ("f16", "bf16"):
        return fn(*operands)
    wide = [x if x is None or spec(x).dtype == "f32" else b.convert(x, dtype="f32")
            for x in operands]
    return tuple(r if i in keep else b.convert(r, dtype=narrow)
                 for i, r in enumerate(fn(*wide)))


def decomposition(op: str, attrs: dict):
    """`fn(b, *operands) -> results` of dg.<op> (attention or attention_grad) as dg ops."""
    scale, causal = attrs["scale"], bool(attrs["causal"])
    if op == "attention":
        return lambda b, *xs: in_f32(b, lambda *ys: attention_math(b, *ys, scale, causal),
                                     xs, keep=(1,))
    return lambda b, *xs: in_f32(
        b, lambda *ys: attention_grad_math(b, *ys, scale, causal, with_mask=False), xs)


@lowering("attention", "attention_grad")
def _attention_lower(op, operands, *, op_name, attrs, out):
    """The decomposition (dg ops that dg-lower-to-linalg lowers in turn); the CPU pipeline
    calls PyTorch's flash kernels instead (dg-outline-attention, dg-attention-to-torch)."""
    from .builder import Builder
    return list(decomposition(op_name, attrs)(Builder(), *operands))


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .composite import jvp_through, vjp_through  # noqa: E402
from .core import jvp_rule, vjp_rule  # noqa: E402


@vjp_rule("attention")
def _attention_vjp(b, ins, outs, cts, *, op, attrs):
    """dg.attention_grad (PyTorch's flash backward) for query, key and value. The mask's
    gradient comes from the decomposition: autodiff drops it unless the mask depends on
    a differentiated input (masks rarely do: they come from token ids and constants)."""
    g, grad_lse = cts
    if g is None and grad_lse is None:
        return [None] * 4
    q, k, v, mask = ins
    out, lse = outs
    g = g if g is not None else b.full_like(out, 0.0)
    *grads, grad_mask = in_f32(
        b, lambda *xs: attention_grad_math(b, *xs[:7], attrs["scale"], bool(attrs["causal"]),
                                           xs[7]),
        [g, q, k, v, out, lse, mask, grad_lse])
    if grad_lse is None:  # PyTorch's flash backward takes no logsumexp cotangent
        grads = b.attention_grad(g, q, k, v, out, lse, mask, **attrs)
    return [*grads, grad_mask]


# second order and forward mode go through the decomposition
@vjp_rule("attention_grad")
def _attention_grad_vjp(b, ins, outs, cts, *, op, attrs):
    return vjp_through(b, decomposition(op, attrs), ins, cts)


@jvp_rule("attention", "attention_grad")
def _attention_jvp(b, ins, outs, tangents, *, op, attrs):
    return jvp_through(b, decomposition(op, attrs), ins, tangents)

"""PyTorch's fused attention kernels as launch-plan steps: `attention`, `attention_grad`.

A compiled dg.attention (or dg.attention_grad) on CUDA is one plan step over its
buffers, run on the caller's stream by the kernel eager's
`scaled_dot_product_attention` would run for the same tensors: the runtime asks
PyTorch's own selector (`torch._fused_sdp_choice`, which honours
`torch.nn.attention.sdpa_kernel` and the `torch.backends.cuda` switches) and calls that
backend's op, and its backward op for the gradient:

| backend | forward | backward |
| --- | --- | --- |
| flash | `_scaled_dot_product_flash_attention` | `..._flash_attention_backward` |
| memory-efficient | `_scaled_dot_product_efficient_attention` | `..._efficient_attention_backward` |
| cuDNN | `_scaled_dot_product_cudnn_attention` | `..._cudnn_attention_backward` |
| math | the math form in f32 (below) | its derivative |

The forward's log-sum-exp ([B, H, L], f32 for 16-bit floats) is the one value the
backward needs besides the inputs and the output: dropout is 0 (the capture decomposes
attention with dropout), so the kernels' random state is unused, and the backward passes
empty tensors of the kinds the forward returns in its place. Each backend keeps the
log-sum-exp its own way (memory-efficient pads its rows to 32 queries, cuDNN adds a
trailing dim of 1); the step stores the [B, H, L] values, and the backward hands them
back in the backend's form, so a forward and its backward may take different backends
(another device, other `sdpa_kernel` settings) and still agree.

The kernels return fresh tensors, which the step copies into its out-params. Imports
torch only (the runtime's rule).
"""
from __future__ import annotations

import logging
from typing import Any, Optional

log = logging.getLogger(__name__)

# a step's buffers, in the order of the outlined function's arguments
# (codegen/common/outline.outline_attention): the inputs, then the out-params
STEP_BUFFERS = {
    "attention": ("q", "k", "v", "mask", "out", "lse"),
    "attention_grad": ("grad", "q", "k", "v", "out", "lse", "mask", "grad_q", "grad_k",
                       "grad_v"),
}
STEP_FIELDS = {op: (*buffers, "scale", "causal") for op, buffers in STEP_BUFFERS.items()}
# memory-efficient attention pads each row of its log-sum-exp to a multiple of this many
# queries, and reads its mask with a last-dim stride aligned to this many elements
# (eager's `preprocess_mask` pads it so)
EFFICIENT_LSE_ALIGN = 32
EFFICIENT_MASK_ALIGN = 16


def backend(q: Any, k: Any, v: Any, mask: Optional[Any], causal: bool, scale: float) -> Any:
    """The `SDPBackend` eager's scaled_dot_product_attention picks for these tensors:
    PyTorch's own choice, so a compiled attention runs what eager runs. Tensors off the
    GPU (a plan run against a fake driver on CPU memory) take the math form: the CPU's
    choice names kernels of its own, not the CUDA ops these steps call."""
    import torch
    from torch.nn.attention import SDPBackend
    if q.device.type != "cuda":
        return SDPBackend.MATH
    return SDPBackend(torch._fused_sdp_choice(q, k, v, mask, 0.0, causal, scale=scale))


def kernels() -> Any:
    """The namespace of PyTorch's attention ops (`torch.ops.aten`; the fake-driver tests
    substitute recording fakes, since CPU builds of PyTorch have no CUDA kernels)."""
    import torch
    return torch.ops.aten


def _kernel_mask(mask: Optional[Any], q: Any, k: Any) -> Optional[Any]:
    """The mask as eager hands it to the memory-efficient and cuDNN kernels: broadcast to
    [B, H, L, S], its rows strided to a multiple of EFFICIENT_MASK_ALIGN."""
    import torch.nn.functional as F
    if mask is None:
        return None
    b, h, l, _ = q.shape
    s = k.shape[2]
    full = mask.expand(b, h, l, s)
    if s % EFFICIENT_MASK_ALIGN == 0:
        return full
    pad = EFFICIENT_MASK_ALIGN - s % EFFICIENT_MASK_ALIGN
    return F.pad(full, (0, pad))[..., :s]


def _scores(q: Any, k: Any, mask: Optional[Any], causal: bool, scale: float) -> Any:
    """The math form's scores in f32 (the kernels' accumulator), causal keys masked
    top-left aligned, as eager."""
    import torch
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if mask is not None:
        s = s + mask.float()
    if causal:
        later = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(later, float("-inf"))
    return s


def _math(q: Any, k: Any, v: Any, mask: Optional[Any], causal: bool,
          scale: float) -> tuple[Any, Any]:
    """Where eager runs the math form (no fused kernel takes the tensors): out and the
    log-sum-exp, 0 on a row of -inf scores (out 0 there), as dg.attention defines."""
    import torch
    s = _scores(q, k, mask, causal, scale)
    lse = torch.logsumexp(s, -1)
    lse = torch.where(lse == float("-inf"), torch.zeros_like(lse), lse)
    p = torch.exp(s - lse.unsqueeze(-1))
    return (p @ v.float()).to(q.dtype), lse


def _math_grad(g: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, mask: Optional[Any],
               causal: bool, scale: float) -> tuple[Any, Any, Any]:
    import torch
    p = torch.exp(_scores(q, k, mask, causal, scale) - lse.float().unsqueeze(-1))
    g32 = g.float()
    dp = g32 @ v.float().transpose(-1, -2) - (g32 * out.float()).sum(-1, keepdim=True)
    ds = p * dp * scale
    return ((ds @ k.float()).to(q.dtype), (ds.transpose(-1, -2) @ q.float()).to(q.dtype),
            (p.transpose(-1, -2) @ g32).to(q.dtype))


def forward(q: Any, k: Any, v: Any, mask: Optional[Any], causal: bool,
            scale: float) -> tuple[Any, Any]:
    """(out, log-sum-exp [B, H, L]) by the kernel eager picks."""
    import torch
    from torch.nn.attention import SDPBackend
    aten = kernels()
    kind = backend(q, k, v, mask, causal, scale)
    log.debug("attention %s x %s: %s", tuple(q.shape), tuple(k.shape), kind.name)
    if kind == SDPBackend.FLASH_ATTENTION:
        out, lse = aten._scaled_dot_product_flash_attention(
            q, k, v, 0.0, causal, False, scale=scale)[:2]
        return out, lse
    if kind == SDPBackend.EFFICIENT_ATTENTION:
        out, lse = aten._scaled_dot_product_efficient_attention(
            q, k, v, _kernel_mask(mask, q, k), True, 0.0, causal, scale=scale)[:2]
        return out, lse[..., :q.shape[2]]
    if kind == SDPBackend.CUDNN_ATTENTION:
        out, lse = aten._scaled_dot_product_cudnn_attention(
            q, k, v, _kernel_mask(mask, q, k), True, 0.0, causal, False, scale=scale)[:2]
        return out, lse[..., 0]
    return _math(q, k, v, mask, causal, scale)


def backward(g: Any, q: Any, k: Any, v: Any, out: Any, lse: Any, mask: Optional[Any],
             causal: bool, scale: float) -> tuple[Any, Any, Any]:
    """(grad_q, grad_k, grad_v) by the backward of the kernel eager picks for the
    forward's tensors."""
    import torch
    from torch.nn.attention import SDPBackend
    aten = kernels()
    kind = backend(q, k, v, mask, causal, scale)
    log.debug("attention backward %s x %s: %s", tuple(q.shape), tuple(k.shape), kind.name)
    l, s = q.shape[2], k.shape[2]
    if kind == SDPBackend.FLASH_ATTENTION:
        # the random state's kinds as the forward returns them (unused: no dropout)
        seed = torch.empty(2, dtype=torch.uint64, device=q.device)
        offset = torch.empty((), dtype=torch.uint64, device=q.device)
        return tuple(aten._scaled_dot_product_flash_attention_backward(
            g, q, k, v, out, lse, None, None, l, s, 0.0, causal, seed, offset, scale=scale))
    seed = torch.empty((), dtype=torch.int64, device=q.device)
    offset = torch.empty((), dtype=torch.int64, device=q.device)
    if kind == SDPBackend.EFFICIENT_ATTENTION:
        padded = -(-l // EFFICIENT_LSE_ALIGN) * EFFICIENT_LSE_ALIGN
        rows = lse.new_zeros(*lse.shape[:2], padded)
        rows[..., :l] = lse
        return tuple(aten._scaled_dot_product_efficient_attention_backward(
            g, q, k, v, _kernel_mask(mask, q, k), out, rows, seed, offset, 0.0,
            [True, True, True, False], causal, scale=scale)[:3])
    if kind == SDPBackend.CUDNN_ATTENTION:
        return tuple(aten._scaled_dot_product_cudnn_attention_backward(
            g, q, k, v, out, lse.unsqueeze(-1), seed, offset, _kernel_mask(mask, q, k),
            None, None, l, s, 0.0, causal, scale=scale))
    return _math_grad(g, q, k, v, out, lse, mask, causal, scale)


def run_step(env: dict, s: dict) -> None:
    """Run an `attention` or `attention_grad` plan step on the buffers in `env`."""
    mask = None if s["mask"] is None else env[s["mask"]]
    q, k, v = env[s["q"]], env[s["k"]], env[s["v"]]
    if s["op"] == "attention":
        results = forward(q, k, v, mask, s["causal"], s["scale"])
        targets = ("out", "lse")
    else:
        results = backward(env[s["grad"]], q, k, v, env[s["out"]], env[s["lse"]], mask,
                           s["causal"], s["scale"])
        targets = ("grad_q", "grad_k", "grad_v")
    for name, value in zip(targets, results):
        env[s[name]].copy_(value)

"""On CUDA, capture keeps scaled_dot_product_attention whole where eager runs a fused kernel.

Eager's scaled_dot_product_attention on CUDA runs a fused kernel (flash,
memory-efficient or cuDNN) that keeps blocks of the [B, H, L, S] scores on chip; the
compiled program runs that same kernel as a library step (`runtime/sdpa.py`). So the
capture records such a call as `fusegrad::attention` (the importer's `dg.attention`)
wherever dg.attention computes what eager computes, and lets every other call trace
in the math form that the capture's `sdpa_kernel([MATH])` selects (matmuls and a
softmax, which every target compiles and fuses):

- dropout > 0: the fused kernels draw their own random numbers; dg.attention has no
  dropout;
- float64, and any call for which eager's own choice (under the backends the caller
  enabled, in the priority order eager uses) is the math form: eager computes that
  form, so the compiled program does;
- a value head dim other than the query's, or key/value heads not dividing the query
  heads: dg.attention's shapes;
- a mask of another dtype than the query's, or not boolean.

Eager's choice is asked of the tensors' metadata (`torch.backends.cuda.can_use_*`, the
checks eager's `select_sdp_backend` runs), not through the `torch._fused_sdp_choice` op:
the capture's tensors are fake, the op reaches its meta kernel with them, and on an H200
that answered the math form for GPT-2's causal bf16 attention, which eager runs as flash
attention (the device a fake tensor reports inside a meta kernel is "meta"). Under
autocast the call sees its arguments before autocast casts them (the torch-function
layer is above it), so they are cast here as autocast would (floating tensors other
than float64 to the autocast dtype) before the choice, as eager's call would see them.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from . import custom_ops

log = logging.getLogger(__name__)

_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _enabled_backends() -> list[Any]:
    """The SDPA backends enabled now (what eager would choose among)."""
    from torch.nn.attention import SDPBackend
    flags = {SDPBackend.FLASH_ATTENTION: torch.backends.cuda.flash_sdp_enabled,
             SDPBackend.EFFICIENT_ATTENTION: torch.backends.cuda.mem_efficient_sdp_enabled,
             SDPBackend.CUDNN_ATTENTION: torch.backends.cuda.cudnn_sdp_enabled,
             SDPBackend.MATH: torch.backends.cuda.math_sdp_enabled}
    return [b for b, enabled in flags.items() if enabled()]


def fused(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
          attn_mask: torch.Tensor | None, dropout_p: float, is_causal: bool,
          scale: float | None, enable_gqa: bool, backends: list[Any],
          priority: list[Any] | None = None) -> bool:
    """Does eager run this call as a fused kernel that dg.attention computes exactly
    (module docstring)? `backends`: those eager may choose among; `priority`: eager's
    order (its default where None)."""
    if dropout_p or query.dtype not in _DTYPES or query.dim() != 4 or \
            key.dim() != 4 or value.shape[-1] != query.shape[-1] or \
            query.shape[1] % key.shape[1] or (key.shape[1] != query.shape[1] and not enable_gqa):
        return False
    if attn_mask is not None and attn_mask.dtype not in (query.dtype, torch.bool):
        return False
    return eager_choice(query, key, value, attn_mask, is_causal, enable_gqa, backends,
                        priority) != "math"


def eager_choice(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attn_mask: torch.Tensor | None, is_causal: bool, enable_gqa: bool,
                 backends: list[Any], priority: list[Any] | None = None) -> str:
    """The kernel eager's CUDA scaled_dot_product_attention would pick (its
    `select_sdp_backend`): the first enabled backend in priority order whose checks pass,
    math where none does. Reads only metadata, so fake tensors answer as real ones."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing
    from torch.nn.attention import SDPBackend
    cuda = torch.backends.cuda
    checks = {SDPBackend.FLASH_ATTENTION: cuda.can_use_flash_attention,
              SDPBackend.EFFICIENT_ATTENTION: cuda.can_use_efficient_attention,
              SDPBackend.CUDNN_ATTENTION: cuda.can_use_cudnn_attention}
    with disable_proxy_modes_tracing():  # nothing asked here belongs in the graph
        params = cuda.SDPAParams(query, key, value, attn_mask, 0.0, is_causal, enable_gqa)
        for backend in priority or _priority():
            if backend not in backends:
                continue
            if backend == SDPBackend.MATH:
                return "math"
            if backend in checks and checks[backend](params):
                return backend.name.lower()
    return "math"


def _priority() -> list[Any]:
    """Eager's backend priority order now (`sdpa_kernel(..., set_priority=True)` sets it)."""
    from torch.nn.attention import SDPBackend
    return [SDPBackend(b) for b in torch._C._get_sdp_priority_order()]


def _autocast(args: tuple) -> tuple:
    """scaled_dot_product_attention's tensors as autocast hands them to the op: it is on
    autocast's lower-precision list, which casts floating tensors other than float64."""
    device = args[0].device.type
    if not torch.is_autocast_enabled(device):
        return args
    dtype = torch.get_autocast_dtype(device)
    return tuple(a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point()
                 and a.dtype != torch.float64 else a for a in args)


class FusedAttention(TorchFunctionMode):
    """Records scaled_dot_product_attention as `fusegrad::attention` where `fused` holds;
    made before the capture selects the math backend, so it judges by the caller's
    backends."""

    def __init__(self) -> None:
        super().__init__()
        self.backends = _enabled_backends()
        self.priority = _priority()

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is not torch.nn.functional.scaled_dot_product_attention:
            return func(*args, **kwargs)
        q, k, v, mask, dropout, causal, scale, gqa = _arguments(*args, **kwargs)
        q, k, v, mask = _autocast((q, k, v, mask))
        if not fused(q, k, v, mask, dropout, causal, scale, gqa, backends=self.backends,
                     priority=self.priority):
            log.debug("capture: attention %s x %s (%s) in the math form, as eager computes it",
                      tuple(q.shape), tuple(k.shape), q.dtype)
            return func(*args, **kwargs)
        log.debug("capture: attention %s x %s (%s) kept whole (a fused kernel on CUDA)",
                  tuple(q.shape), tuple(k.shape), q.dtype)
        return custom_ops.attention(q, k, v, mask, causal, scale, gqa)


def _arguments(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
               is_causal: bool = False, scale: float | None = None,
               enable_gqa: bool = False) -> tuple:
    """scaled_dot_product_attention's arguments, in order."""
    return query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa

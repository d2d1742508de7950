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
- float64, and any call for which eager's own choice (`torch._fused_sdp_choice`, under
  the backends the caller enabled) is the math form: eager computes that form, so the
  compiled program does;
- a value head dim other than the query's, or key/value heads not dividing the query
  heads: dg.attention's shapes;
- a mask of another dtype than the query's, or not boolean.
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
          scale: float | None, enable_gqa: bool, backends: list[Any]) -> bool:
    """Does eager run this call as a fused kernel that dg.attention computes exactly
    (module docstring)? `backends`: those eager may choose among."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if dropout_p or query.dtype not in _DTYPES or query.dim() != 4 or \
            key.dim() != 4 or value.shape[-1] != query.shape[-1] or \
            query.shape[1] % key.shape[1] or (key.shape[1] != query.shape[1] and not enable_gqa):
        return False
    if attn_mask is not None and attn_mask.dtype not in (query.dtype, torch.bool):
        return False
    # asked of the fake tensors, not recorded: the choice is the capture's, not the graph's
    with sdpa_kernel(backends), disable_proxy_modes_tracing():
        choice = torch._fused_sdp_choice(query, key, value, attn_mask, dropout_p, is_causal,
                                         scale=scale, enable_gqa=enable_gqa)
    return SDPBackend(choice) != SDPBackend.MATH


class FusedAttention(TorchFunctionMode):
    """Records scaled_dot_product_attention as `fusegrad::attention` where `fused` holds;
    made before the capture selects the math backend, so it judges by the caller's
    backends."""

    def __init__(self) -> None:
        super().__init__()
        self.backends = _enabled_backends()

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is not torch.nn.functional.scaled_dot_product_attention:
            return func(*args, **kwargs)
        call = _arguments(*args, **kwargs)
        if not fused(*call, backends=self.backends):
            return func(*args, **kwargs)
        q, k, v, mask, _, causal, scale, gqa = call
        log.debug("capture: attention %s x %s kept whole (a fused kernel on CUDA)",
                  tuple(q.shape), tuple(k.shape))
        return custom_ops.attention(q, k, v, mask, causal, scale, gqa)


def _arguments(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
               is_causal: bool = False, scale: float | None = None,
               enable_gqa: bool = False) -> tuple:
    """scaled_dot_product_attention's arguments, in order."""
    return query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa

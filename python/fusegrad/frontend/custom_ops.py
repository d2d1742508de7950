"""fusegrad's own torch ops: what capture puts into a graph for the tracer to carry.

`fusegrad::stop_gradient` marks where gradients stop (the importer maps it to
`dg.stop_gradient`); `fusegrad::set_grad_enabled` is a grad-mode switch the tracer passes
over. `stop_gradient.mark_stop_gradients` puts both into Dynamo graphs; the decomposition
table uses stop_gradient too. `fusegrad::attention` is scaled_dot_product_attention a CUDA
capture keeps whole (`cuda_attention.py`; the importer maps it to `dg.attention`).
Importing this module defines them.
"""
from __future__ import annotations

import torch


@torch.library.custom_op("fusegrad::stop_gradient", mutates_args=())
def stop_gradient(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone()


@stop_gradient.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("fusegrad::set_grad_enabled", mutates_args=())
def set_grad_enabled(enabled: bool) -> None:
    """A grad-mode switch the tracer passes over (a graph run eagerly, after a failed
    compile, still runs its `no_grad()` blocks without grad)."""
    torch._C._set_grad_enabled(enabled)


@set_grad_enabled.register_fake
def _(enabled: bool) -> None:
    return None


@torch.library.custom_op("fusegrad::attention", mutates_args=())
def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              attn_mask: torch.Tensor | None, is_causal: bool, scale: float | None,
              enable_gqa: bool) -> torch.Tensor:
    """scaled_dot_product_attention that a CUDA capture keeps whole (`cuda_attention.py`):
    the importer maps it to dg.attention, which the CUDA plan runs as PyTorch's fused
    kernel. Run eagerly (a graph split around it), it is that same call."""
    return torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale,
        enable_gqa=enable_gqa)


@attention.register_fake
def _(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
      attn_mask: torch.Tensor | None, is_causal: bool, scale: float | None,
      enable_gqa: bool) -> torch.Tensor:
    return query.new_empty((*query.shape[:-1], value.shape[-1]))

"""Attention compiled for CUDA against eager on a GPU: scaled_dot_product_attention runs as
PyTorch's fused kernel (the one eager picks) inside the compiled forward and backward, and
its values and gradients match eager's, causal and masked, in f32 and bf16. Skips with the
reason printed where there is no driver or GPU (test_cuda_attention.py checks the steps
against a fake driver everywhere)."""
from __future__ import annotations

import logging
import warnings

import pytest

from fusegrad.runtime.cuda import driver_available

_OK, _WHY = driver_available()
if not _OK:
    print(f"test_cuda_attention_gpu: skipped: {_WHY}")
    pytest.skip(_WHY, allow_module_level=True)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fusegrad  # noqa: E402

B, H, L, E = 2, 4, 256, 64
TOLERANCE = {torch.float32: 2e-4, torch.bfloat16: 2e-2}


def _causal(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _masked(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("fn", [_causal, _masked], ids=["causal", "masked"])
def test_attention_matches_eager(fn, dtype, caplog):
    """Every case here runs a fused kernel in eager (flash or memory-efficient), so the
    capture keeps it whole: the compiled program runs that kernel, not the math form."""
    torch.manual_seed(0)
    caplog.set_level(logging.DEBUG, logger="fusegrad.frontend.cuda_attention")
    q, k, v = (torch.randn(B, H, L, E, device="cuda", dtype=dtype) for _ in range(3))
    mask = torch.where(torch.rand(B, 1, L, L, device="cuda") < 0.1, float("-inf"),
                       0.0).to(dtype)
    mask[..., 0] = 0.0  # every query attends to a key
    g = torch.randn(B, H, L, E, device="cuda", dtype=dtype)
    runs = []
    for run in (fn, fusegrad.compile(fn)):
        qkv = [x.clone().requires_grad_() for x in (q, k, v)]
        with warnings.catch_warnings():
            warnings.simplefilter("error", fusegrad.FusegradFallbackWarning)
            out = run(*qkv, mask)
        out.backward(g)
        runs.append([out.detach(), *(x.grad for x in qkv)])
    assert "kept whole" in caplog.text and "math form" not in caplog.text
    tol = TOLERANCE[dtype]
    for got, want in zip(runs[1], runs[0]):
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)

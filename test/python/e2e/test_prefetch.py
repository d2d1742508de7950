"""dg-prefetch-streams strip-mines loops over rows into 512-byte chunks: rows around
and across chunk boundaries (127, 128, 129, 1000 floats), short rows, other element
sizes and reductions carried through the chunks must give eager's numbers."""
from __future__ import annotations

import pytest
import torch

import fusegrad
from compile_options import OPTIONS

pytestmark = pytest.mark.usefixtures("no_fallback")


def gelu_sigmoid(x, w):
    return torch.nn.functional.gelu(x * w) * torch.sigmoid(x)


def normalized(x, w):
    return torch.softmax(x, dim=-1) + torch.nn.functional.layer_norm(x, x.shape[-1:], w)


@pytest.mark.parametrize("fn", [gelu_sigmoid, normalized])
@pytest.mark.parametrize("cols", [5, 127, 128, 129, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rows_across_chunks_match_eager(fn, cols, dtype):
    torch.manual_seed(cols)
    x = torch.randn(37, cols, dtype=dtype, requires_grad=True)
    w = torch.randn(cols, dtype=dtype, requires_grad=True)
    gy = torch.randn(37, cols, dtype=dtype)
    want = fn(x, w)
    want_grads = torch.autograd.grad(want, (x, w), gy)
    got = fusegrad.compile(fn, **OPTIONS)(x, w)
    got_grads = torch.autograd.grad(got, (x, w), gy)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(got, want, **tol)
    for g, e in zip(got_grads, want_grads):
        torch.testing.assert_close(g, e, **tol)


def test_half_precision_rows():
    x = torch.randn(9, 700).to(torch.bfloat16)
    got = fusegrad.compile(lambda t: torch.sigmoid(t) * t, **OPTIONS)(x)
    torch.testing.assert_close(got, torch.sigmoid(x) * x, rtol=1e-2, atol=1e-2)

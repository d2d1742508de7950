"""Errors eager raises while running (an index out of range, a failed runtime
assertion) are raised by the compiled code, without falling back to eager."""
from __future__ import annotations

import warnings

import pytest
import torch

import fusegrad
from fusegrad.frontend.backend import FusegradFallbackWarning

pytestmark = pytest.mark.usefixtures("no_fallback")


def test_out_of_range_token_raises_like_eager_without_fallback():
    emb = torch.nn.Embedding(10, 4)
    compiled = fusegrad.compile(emb)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        with pytest.raises(IndexError, match="aten.embedding"):
            compiled(torch.tensor([[1, 10]]))
        tokens = torch.tensor([[1, 9]])
        torch.testing.assert_close(compiled(tokens), emb(tokens))


def test_runtime_assertions_compile_and_raise_like_eager():
    """one_hot asserts its class range (`_assert_async`): the graph compiles whole, and
    bad input raises eager's error before the in-place update is written back."""
    def f(labels, w, count):
        count.add_(1)
        return (torch.nn.functional.one_hot(labels, num_classes=5).float() @ w).sum()

    w = torch.randn(5, 3, requires_grad=True)
    count = torch.zeros(())
    compiled = fusegrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        labels = torch.tensor([1, 2, 4, 4])
        loss = compiled(labels, w, count)
        loss.backward()
        torch.testing.assert_close(loss, f(labels, w.detach(), torch.zeros(())))
        torch.testing.assert_close(w.grad, torch.tensor([0, 1, 1, 0, 2.0])[:, None].expand(5, 3))
        assert count.item() == 1
        for bad, message in ((torch.tensor([1, 5, 0, 0]), "smaller than num_classes"),
                             (torch.tensor([1, -1, 0, 0]), "must be non-negative")):
            for grad in (True, False):
                with torch.set_grad_enabled(grad), pytest.raises(RuntimeError, match=message):
                    compiled(bad, w, count)
        assert count.item() == 1

"""Convolutional models trained through `fusegrad.compile` against eager: convolutions
writing into concatenations (DenseNet), grouped bfloat16 convolutions (dg-conv-to-torch
choosing a layout). The convolution gradients themselves: unit/test_conv_grads.py."""
from __future__ import annotations

import pytest
import torch


class _DenseBlock(torch.nn.Module):
    """DenseNet's pattern: each layer reads the concatenation of all earlier outputs."""

    def __init__(self, channels: int = 6, growth: int = 4, layers: int = 3):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Sequential(
            torch.nn.BatchNorm2d(channels + i * growth), torch.nn.ReLU(),
            torch.nn.Conv2d(channels + i * growth, growth, 3, padding=1, bias=False))
            for i in range(layers))

    def forward(self, x):
        feats = [x]
        for layer in self.layers:
            feats.append(layer(torch.cat(feats, 1)))
        return torch.cat(feats, 1)


@pytest.mark.parametrize("channels_last", [True, False])
def test_convs_written_into_a_concatenation_train_like_eager(channels_last):
    """Each conv's output lands in its slot of the next concatenation (a strided view):
    the library conv writes a buffer of its own, copied there (these convs ran as loops)."""
    import copy

    import fusegrad
    torch.manual_seed(0)
    model, x = _DenseBlock(), torch.randn(2, 6, 5, 5)
    reference = copy.deepcopy(model)
    got = fusegrad.compile(model, channels_last=channels_last)(x)
    got.square().mean().backward()
    want = reference(x)
    want.square().mean().backward()
    torch.testing.assert_close(got, want)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("groups", [2, 8])
def test_grouped_bfloat16_convolutions_train_like_eager(groups):
    """dg-conv-to-torch measures a grouped convolution in both layouts before choosing
    one, on tensors of its dtype (bfloat16 ones failed that, and the graph ran eagerly)."""
    import copy

    import fusegrad
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1, groups=groups),
                                torch.nn.ReLU()).bfloat16()
    reference = copy.deepcopy(model)
    x = torch.randn(2, 8, 6, 6, dtype=torch.bfloat16)
    got = fusegrad.compile(model)(x)
    got.float().square().mean().backward()
    want = reference(x)
    want.float().square().mean().backward()
    torch.testing.assert_close(got, want, atol=0.02, rtol=0.02)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=0.05, rtol=0.02)

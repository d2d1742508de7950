"""Whole models: compiled forward and 10 optimizer steps match eager PyTorch."""
from __future__ import annotations

import contextlib
import copy

import pytest
import torch
from torch import nn

import fusegrad
from compile_options import OPTIONS


pytestmark = pytest.mark.usefixtures("no_fallback")


def mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))


def cnn():
    # no conv bias before BatchNorm: its true gradient is 0, and Adam would amplify rounding noise
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))


def transformer(norm_first):
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                       batch_first=True, norm_first=norm_first)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


MODELS = {
    "mlp": (mlp, (6, 8)),
    "cnn": (cnn, (3, 2, 8, 8)),
    "transformer": (lambda: transformer(False), (2, 5, 8)),
    "transformer_norm_first": (lambda: transformer(True), (2, 5, 8)),
}


def make(name):
    factory, shape = MODELS[name]
    torch.manual_seed(0)
    model = factory()
    return model, copy.deepcopy(model), torch.randn(shape)


@pytest.mark.parametrize("name", list(MODELS))
def test_eval_forward_matches_eager(name):
    model, _, x = make(name)
    model.eval()
    # an eval TransformerEncoderLayer under no_grad would take PyTorch's fused fast
    # path (aten._transformer_encoder_layer_fwd), which fusegrad runs eagerly
    with torch.no_grad(), fastpath(False):
        torch.testing.assert_close(fusegrad.compile(model, **OPTIONS)(x), model(x),
                                   rtol=1e-4, atol=1e-5)


@contextlib.contextmanager
def fastpath(enabled):
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(enabled)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


# the transformer compiles slowly (~1 min for fwd+bwd on CPU): Adam only
@pytest.mark.parametrize("name,opt", [("mlp", "sgd"), ("mlp", "adam"), ("cnn", "sgd"),
                                      ("cnn", "adam"), ("transformer", "adam")])
def test_training_steps_match_eager(name, opt):
    model, reference, x = make(name)
    target = torch.randn_like(copy.deepcopy(reference)(x))  # a copy: keep BN stats untouched
    compiled = fusegrad.compile(model, **OPTIONS)

    def optimizer(m):
        if opt == "sgd":
            return torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        # eps well above rounding noise: some true gradients are exactly 0 (attention key
        # bias), and Adam's default eps would turn their 1e-9 noise into lr-sized steps
        return torch.optim.Adam(m.parameters(), lr=1e-2, eps=1e-4)

    runs = []
    for m, fn in ((model, compiled), (reference, reference)):
        o, losses = optimizer(m), []
        for _ in range(10):
            o.zero_grad()
            loss = nn.functional.mse_loss(fn(x), target)
            loss.backward()
            o.step()
            losses.append(loss.item())
        runs.append(losses)
    torch.testing.assert_close(runs[0], runs[1], rtol=1e-4, atol=1e-5)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    for b, c in zip(model.buffers(), reference.buffers()):  # BatchNorm running stats
        torch.testing.assert_close(b, c, rtol=1e-4, atol=1e-5)

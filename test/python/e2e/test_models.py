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


def cnn3d():
    # video-style: a spatial-only and a temporal-only kernel, 3-d pooling
    return nn.Sequential(nn.Conv3d(2, 4, (1, 3, 3), padding=(0, 1, 1), bias=False),
                         nn.BatchNorm3d(4), nn.ReLU(), nn.MaxPool3d((1, 2, 2)),
                         nn.Conv3d(4, 6, (3, 1, 1), stride=(2, 1, 1), padding=(1, 0, 0)),
                         nn.ReLU(), nn.AvgPool3d(2), nn.AdaptiveAvgPool3d(1), nn.Flatten(),
                         nn.Linear(6, 3))


def transformer(norm_first):
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                       batch_first=True, norm_first=norm_first)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


MODELS = {
    "mlp": (mlp, (6, 8)),
    "cnn": (cnn, (3, 2, 8, 8)),
    "cnn3d": (cnn3d, (3, 2, 4, 8, 8)),
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
                                      ("cnn", "adam"), ("cnn3d", "sgd"),
                                      ("transformer", "adam")])
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


class _Conv1D(torch.nn.Module):
    """HuggingFace GPT-2's linear layer: addmm on a flattened view."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = torch.nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        out = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return out.view(x.size()[:-1] + (self.weight.size(-1),))


class _GPT2Block(torch.nn.Module):
    """A GPT-2 block written the way HuggingFace writes it (causal mask buffer,
    finfo.min masking, an additive attention mask, tanh GELU, dict output)."""

    def __init__(self, d: int = 32, heads: int = 4, n: int = 16) -> None:
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.attn, self.attn_proj = _Conv1D(3 * d, d), _Conv1D(d, d)
        self.fc, self.proj = _Conv1D(4 * d, d), _Conv1D(d, 4 * d)
        self.heads = heads
        self.register_buffer("causal", torch.tril(torch.ones(n, n, dtype=torch.bool))[None, None],
                             persistent=False)

    def forward(self, x, attention_mask):
        b, t, d = x.shape
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for y in self.attn(self.ln1(x)).split(d, dim=2))
        w = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], v.size(-1) ** 0.5)
        w = torch.where(self.causal[:, :, :t, :t], w, torch.full([], torch.finfo(w.dtype).min))
        w = torch.softmax(w + attention_mask, dim=-1)
        x = x + self.attn_proj(torch.matmul(w, v).transpose(1, 2).contiguous().view(b, t, d))
        h = self.fc(self.ln2(x))
        gelu = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * torch.pow(h, 3.0))))
        return {"hidden": x + self.proj(gelu), "attention": w}


def test_gpt2_style_block_trains_like_eager():
    torch.manual_seed(0)
    model = _GPT2Block()
    x = torch.randn(2, 16, 32)
    mask = torch.zeros(2, 1, 1, 16)
    mask[1, ..., -3:] = torch.finfo(torch.float32).min  # padding in the second sequence
    compiled_model = copy.deepcopy(model)
    compiled = fusegrad.compile(compiled_model, **OPTIONS)
    got, want = compiled(x, mask), model(x, mask)
    for key in ("hidden", "attention"):
        torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-5)
    got["hidden"].square().mean().backward()
    want["hidden"].square().mean().backward()
    for (name, p), q in zip(compiled_model.named_parameters(), model.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_autocast_bf16_training_matches_eager_autocast():
    """Mixed precision: matmuls in bf16 under torch.autocast, like eager's autocast."""
    model, reference, x = make("transformer")
    compiled = fusegrad.compile(model, **OPTIONS)
    runs = []
    for m, fn in ((model, compiled), (reference, reference)):
        opt, losses, grads = torch.optim.SGD(m.parameters(), lr=0.1), [], None
        for _ in range(5):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = fn(x)
            loss = y.float().pow(2).mean()
            loss.backward()
            grads = grads or [p.grad.clone() for p in m.parameters()]
            opt.step()
            losses.append(loss.item())
        runs.append((losses, grads))
    (got_losses, got_grads), (want_losses, want_grads) = runs
    torch.testing.assert_close(got_losses, want_losses, rtol=1.6e-2, atol=1e-3)
    for g, w in zip(got_grads, want_grads):  # bf16 rounding: 8 mantissa bits
        torch.testing.assert_close(g, w, rtol=1.6e-2, atol=2e-3)


def test_autocast_bf16_linear_layers_compute_in_bf16():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 64))
    x = torch.randn(32, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = fusegrad.compile(mlp, **OPTIONS)(x), mlp(x)
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got, want)  # bf16 tolerances; an f32 matmul is off by ~3e-3

"""dg-channels-last end to end: CNNs train as in eager with their convolutions, and the
batch norms, ReLUs and max-pools between them, computed channels-last (PyTorch's
kernels on NHWC buffers), gradients checked in float64 to second order."""
from __future__ import annotations

import copy
import glob

import pytest
import torch

import fusegrad
from compile_options import OPTIONS

pytestmark = pytest.mark.usefixtures("no_fallback")


class _CNN(torch.nn.Module):
    def __init__(self, stride: int = 1, dilation: int = 1) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=dilation, stride=stride, dilation=dilation),
            torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.head = torch.nn.LazyLinear(10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def _stage(dump_dir, stage: str) -> str:
    return "".join(open(p).read() for p in sorted(glob.glob(f"{dump_dir}/*.{stage}*.mlir")))


@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (1, 2)])
def test_cnn_training_matches_eager(stride, dilation, tmp_path):
    torch.manual_seed(0)
    model = _CNN(stride, dilation)
    x = torch.randn(4, 3, 16, 16, requires_grad=True)
    model(x)  # materialize the lazy layer
    compiled_model = copy.deepcopy(model)
    step = fusegrad.compile(compiled_model, dump_dir=str(tmp_path), **OPTIONS)
    for _ in range(2):  # BatchNorm's running statistics change between the steps
        want = model(x)
        want.square().sum().backward()
        want_gx = x.grad
        x.grad = None
        got = step(x)
        got.square().sum().backward()
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(x.grad, want_gx, rtol=1e-4, atol=1e-4)
        x.grad = None
        for (name, p), q in zip(model.named_parameters(), compiled_model.parameters()):
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-3, atol=1e-4, msg=name)
            p.grad = q.grad = None
    for (name, b), c in zip(model.named_buffers(), compiled_model.buffers()):
        torch.testing.assert_close(c, b, rtol=1e-4, atol=1e-5, msg=name)
    if OPTIONS["executor"] == "cpu":
        ir = _stage(tmp_path, "channels-last")
        assert "dg.conv2d_nhwc_weight_grad" in ir and "dg.conv2d_nhwc_input_grad" in ir
        assert '"dg.conv2d"' not in ir and "conv2d_input_grad\"" not in ir


def test_channels_last_option_off(tmp_path):
    torch.manual_seed(0)
    model = _CNN()
    x = torch.randn(2, 3, 16, 16)
    want = model(x)
    got = fusegrad.compile(model, dump_dir=str(tmp_path), channels_last=False, **OPTIONS)(x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert not glob.glob(f"{tmp_path}/*.channels-last*.mlir")
    assert "conv2d_nhwc" not in _stage(tmp_path, "fused")


def test_float64_gradients_to_second_order():
    torch.manual_seed(0)
    w1 = torch.randn(4, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    w2 = torch.randn(3, 4, 2, 2, dtype=torch.float64, requires_grad=True)
    x = torch.randn(2, 2, 7, 6, dtype=torch.float64, requires_grad=True)

    def f(x, w1, w2):
        h = torch.nn.functional.conv2d(x, w1, padding=1, stride=(2, 1))
        h = torch.tanh(h) * h.mean(dim=(0, 2, 3), keepdim=True)
        h = torch.nn.functional.conv2d(h, w2, dilation=(1, 2))
        return h.sum(dim=1)
    compiled = fusegrad.compile(f, **OPTIONS)
    torch.testing.assert_close(compiled(x, w1, w2), f(x, w1, w2))
    assert torch.autograd.gradcheck(compiled, (x, w1, w2))
    assert torch.autograd.gradgradcheck(compiled, (x, w1, w2))


def test_depthwise_and_pointwise_convolutions_match_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(4, 8, 1), torch.nn.ReLU6(),
        torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8), torch.nn.BatchNorm2d(8),
        torch.nn.ReLU6(), torch.nn.Conv2d(8, 4, 1))
    compiled_model = copy.deepcopy(model)
    x = torch.randn(2, 4, 9, 9, requires_grad=True)
    want = model(x)
    (want * want).sum().backward()
    want_gx, x.grad = x.grad, None
    got = fusegrad.compile(compiled_model, **OPTIONS)(x)
    (got * got).sum().backward()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x.grad, want_gx, rtol=1e-4, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), compiled_model.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-3, atol=1e-4, msg=name)


def test_inference_matches_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1, groups=4), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(8, 5)).eval()
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        torch.testing.assert_close(fusegrad.compile(model, **OPTIONS)(x), model(x),
                                   rtol=1e-5, atol=1e-5)

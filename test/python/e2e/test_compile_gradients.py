"""The backward of a compiled graph: compiled at the first backward for large graphs,
no cotangents for what takes no gradient (batch-norm statistics, detached values,
no_grad blocks, padding rows), second derivatives through them."""
from __future__ import annotations

import copy
import logging
import warnings

import pytest
import torch

import fusegrad
from compile_options import OPTIONS, compiled, f_pointwise
from fusegrad.frontend.backend import FusegradFallbackWarning

pytestmark = pytest.mark.usefixtures("no_fallback")


def test_large_graph_compiles_its_backward_at_the_first_backward(tmp_path, monkeypatch):
    """Above PAIRED_BACKWARD_MAX_OPS ops the call lowers the forward only; the first
    backward lowers the backward (from the same optimized module: no second autodiff)."""
    from fusegrad import program

    monkeypatch.setattr(program, "PAIRED_BACKWARD_MAX_OPS", 0)
    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
    out = compiled(f_pointwise, dump_dir=str(tmp_path))(x, y).sum()

    def stages():
        return [line.split("\t")[2] for line in (tmp_path / "index.txt").read_text().splitlines()]
    assert stages()[-3:] == ["cpu-linalg-wrt0-fwd", "cpu-bufferized-wrt0-fwd", "cpu-llvm-wrt0-fwd"]
    out.backward()
    assert stages()[-3:] == ["cpu-linalg-wrt0-bwd", "cpu-bufferized-wrt0-bwd", "cpu-llvm-wrt0-bwd"]
    assert [s for s in stages() if s.startswith("autodiff")] == ["autodiff-wrt0"]
    x0 = x.detach().clone().requires_grad_()
    f_pointwise(x0, y).sum().backward()
    torch.testing.assert_close(x.grad, x0.grad)


def test_batch_norm_statistics_take_no_cotangent_and_need_no_second_backward(
        monkeypatch, caplog):
    """Running statistics written back to buffers are autograd constants: the training
    graph's backward is built without their cotangents, so its first backward is the
    one already optimized, not a second derivation for outputs without gradient."""
    from fusegrad import program

    monkeypatch.setattr(program, "PAIRED_BACKWARD_MAX_OPS", 0)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(8 * 36, 4))
    twin = copy.deepcopy(model)
    x = torch.randn(4, 3, 8, 8)
    compiled_model = fusegrad.compile(model, **OPTIONS)
    with caplog.at_level(logging.DEBUG, logger="fusegrad.program"):
        for _ in range(2):
            compiled_model(x).square().mean().backward()
            twin(x).square().mean().backward()
    messages = [r.getMessage() for r in caplog.records if "backward" in r.getMessage()]
    assert len(messages) == 1 and "without gradient" not in messages[0], messages
    for got, want in zip([*model.parameters(), *model.buffers()],
                         [*twin.parameters(), *twin.buffers()]):
        torch.testing.assert_close(got, want)
        if got.grad is not None or want.grad is not None:
            torch.testing.assert_close(got.grad, want.grad, atol=1e-5, rtol=1e-4)


def test_gradient_penalty_through_batch_norm_in_training_mode():
    """A second derivative through a graph with constant outputs (running statistics):
    the joint function takes the cotangents of the other outputs only."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.Tanh(), torch.nn.Linear(8, 1))
    twin = copy.deepcopy(model)
    x = torch.randn(5, 6, requires_grad=True)

    def penalty(m):
        (g,) = torch.autograd.grad(m(x).sum(), x, create_graph=True)
        return g.square().sum()
    got = torch.autograd.grad(penalty(fusegrad.compile(model, **OPTIONS)),
                              list(model.parameters())[:4])
    want = torch.autograd.grad(penalty(twin), list(twin.parameters())[:4])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(model[1].running_mean, twin[1].running_mean)


def test_embedding_padding_idx_row_gets_no_gradient():
    """padding_idx only changes the weight gradient (its row gets none from the lookup):
    padding tokens read the row through dg.stop_gradient, compiled, gradients as eager."""
    emb = torch.nn.Embedding(10, 4, padding_idx=0)
    ids = torch.tensor([[0, 3, 0, 5], [1, 0, 3, 9]])
    cm = compiled(emb)
    gy = torch.randn(2, 4, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        out = cm(ids)
        out.backward(gy)
    torch.testing.assert_close(out, emb.weight[ids])
    want = torch.zeros(10, 4).index_add_(0, ids.flatten(), gy.reshape(8, 4))
    want[0] = 0
    torch.testing.assert_close(emb.weight.grad, want)


def test_detach_and_no_grad_blocks_stop_gradients_like_eager():
    """x.detach() and torch.no_grad() inside a compiled function stop gradients there
    (dg.stop_gradient), as in eager; nothing falls back."""
    def f(x, w):
        d = (x * w).detach()
        with torch.no_grad():
            s = (x * w).sum()
        return (d * w + x * s).sum()

    x0, w0 = torch.randn(5), torch.randn(5)
    x1, w1 = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    x2, w2 = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    f(x1, w1).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        compiled(f)(x2, w2).backward()
    torch.testing.assert_close(x2.grad, x1.grad)
    torch.testing.assert_close(w2.grad, w1.grad)

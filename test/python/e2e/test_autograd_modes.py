"""Eager's autograd semantics through compiled functions: forward-mode AD (dual tensors),
enable_grad() regions called under no_grad, batched backwards (vmap over a backward),
and the dtype errors eager raises for mixed-dtype products."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from compile_options import compiled
from fusegrad import FusegradFallbackWarning


@pytest.fixture
def no_fallback():
    """A test that fails if any graph runs eagerly: these features must compile."""
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        yield


def _jvp(fn, primal, tangent):
    with fwAD.dual_level():
        out = fn(fwAD.make_dual(primal, tangent))
        return fwAD.unpack_dual(out).primal.clone(), fwAD.unpack_dual(out).tangent


def test_forward_mode_ad_keeps_the_tangent(no_fallback):
    """A dual input's tangent comes out as the JVP (the compiled @f_jvp), not dropped."""
    f = lambda x: x.sin() * 2 + x.exp().sum()  # noqa: E731
    x, t = torch.randn(5), torch.randn(5)
    value, tangent = _jvp(compiled(f), x, t)
    want_value, want_tangent = _jvp(f, x, t)
    torch.testing.assert_close(value, want_value)
    assert tangent is not None
    torch.testing.assert_close(tangent, want_tangent)


def test_forward_mode_ad_through_a_module(no_fallback):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    x, t = torch.randn(3, 4), torch.randn(3, 4)
    with torch.no_grad():
        value, tangent = _jvp(compiled(model), x, t)
        want_value, want_tangent = _jvp(model, x, t)
    torch.testing.assert_close(value, want_value)
    torch.testing.assert_close(tangent, want_tangent)


def test_forward_mode_ad_in_a_graph_that_updates_an_input_runs_eagerly_with_a_warning():
    torch._dynamo.reset()

    def f(x, buf):
        buf.add_(1)
        return x.sin() * buf

    x, t, buf = torch.randn(3), torch.randn(3), torch.zeros(3)
    g = compiled(f)
    with pytest.warns(FusegradFallbackWarning, match="forward-mode AD"):
        value, tangent = _jvp(lambda x: g(x, buf), x, t)
    torch.testing.assert_close(tangent, x.cos() * t * buf)
    torch.testing.assert_close(buf, torch.ones(3))  # updated once, by the one call


def test_enable_grad_inside_a_function_called_under_no_grad(no_fallback):
    """An energy model's forward: what its enable_grad() block computes records a
    gradient although the caller disabled grad, as in eager; the rest does not."""
    def energy(x, w):
        scale = (w * 2).sum()  # under no_grad: records nothing
        with torch.enable_grad():
            e = (x * w).tanh().sum() * scale
        return e, scale

    x = torch.randn(3, requires_grad=True)
    w = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        got, got_scale = compiled(energy)(x, w)
        want, want_scale = energy(x, w)
    assert got.requires_grad == want.requires_grad is True
    assert got_scale.requires_grad == want_scale.requires_grad is False
    torch.testing.assert_close(got, want)
    got_grads = torch.autograd.grad(got, (x, w))
    want_grads = torch.autograd.grad(want, (x, w))
    for g, e in zip(got_grads, want_grads):
        torch.testing.assert_close(g, e)


def test_forces_from_autograd_grad_inside_a_no_grad_call():
    """A force field: autograd.grad of an energy inside enable_grad(), called under
    no_grad (the grad call itself is a graph break and runs eagerly)."""
    torch._dynamo.reset()

    def forces(x):
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            energy = (x.sin() ** 2).sum()
            (g,) = torch.autograd.grad(energy, x)
        return -g

    x = torch.randn(6)
    with torch.no_grad():
        torch.testing.assert_close(compiled(forces)(x), -2 * x.sin() * x.cos())


def test_batched_gradients_through_a_compiled_backward(no_fallback):
    """vmap over the backward: the compiled backward runs per sample."""
    f = lambda x: (x.sin() * x).sum(-1)  # noqa: E731
    x = torch.randn(3, 4)
    want = torch.autograd.functional.jacobian(f, x, vectorize=True)
    torch.testing.assert_close(
        torch.autograd.functional.jacobian(compiled(f), x, vectorize=True), want)
    x = torch.randn(4, requires_grad=True)
    y = compiled(lambda x: x.exp() * 2)(x)
    (g,) = torch.autograd.grad(y, x, torch.eye(4), is_grads_batched=True)
    torch.testing.assert_close(g, torch.diag(2 * x.detach().exp()))
    z = torch.randn(4)
    torch.testing.assert_close(torch.func.jacrev(compiled(lambda x: x.exp() * 2))(z),
                               torch.diag(2 * z.exp()))


@pytest.mark.parametrize("case", ["linear", "matmul", "mv", "addmm"])
def test_mixed_dtype_products_raise_as_in_eager(case):
    """PyTorch's decompositions promote mixed operands; eager raises, and so must a
    compiled program (not compute in float64)."""
    torch._dynamo.reset()
    w = torch.randn(2, 3, dtype=torch.float64)
    fn, x = {
        "linear": (lambda x: torch.nn.functional.linear(x, w), torch.randn(4, 3)),
        "matmul": (lambda x: x @ w.T, torch.randn(4, 3)),
        "mv": (lambda x: torch.mv(w, x), torch.randn(3)),
        "addmm": (lambda x: torch.addmm(torch.zeros(2, dtype=torch.float64), x, w.T),
                  torch.randn(4, 3)),
    }[case]
    with pytest.raises(RuntimeError) as eager:
        fn(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FusegradFallbackWarning)
        with pytest.raises(RuntimeError) as got:
            compiled(fn)(x)
    assert str(got.value) == str(eager.value)

"""fusegrad.grad / value_and_grad / vjp / jvp / hvp / hessian against torch.func."""
from __future__ import annotations

import pytest
import torch

import fusegrad
from compile_options import COMPILE_OPTIONS as O


def f(x, w):
    return torch.tanh(x @ w).pow(2).sum()


def g(x, w):
    return torch.sin(x @ w), (x * 2).sum(0)


@pytest.fixture
def xw():
    torch.manual_seed(0)
    return torch.randn(3, 4, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)


def test_grad_and_value_and_grad(xw):
    expected = torch.func.grad(f, (0, 1))(*xw)
    for got, e in zip(fusegrad.grad(f, (0, 1), options=O)(*xw), expected):
        torch.testing.assert_close(got, e)
    value, gw = fusegrad.value_and_grad(f, 1, options=O)(*xw)
    torch.testing.assert_close(value, f(*xw))
    torch.testing.assert_close(gw, expected[1])


def test_vjp_multiple_outputs(xw):
    out, vjp_fn = fusegrad.vjp(g, *xw, options=O)
    out_e, vjp_e = torch.func.vjp(g, *xw)
    torch.testing.assert_close(out, out_e)
    cts = (torch.randn_like(out_e[0]), torch.randn_like(out_e[1]))
    for got, e in zip(vjp_fn(cts), vjp_e(cts)):
        torch.testing.assert_close(got, e)


def test_jvp(xw):
    tangents = (torch.randn_like(xw[0]), torch.randn_like(xw[1]))
    out, tan = fusegrad.jvp(g, xw, tangents, options=O)
    out_e, tan_e = torch.func.jvp(g, xw, tangents)
    torch.testing.assert_close(out, out_e)
    torch.testing.assert_close(tan, tan_e)


def test_hvp_and_hessian(xw):
    v = (torch.randn_like(xw[0]), torch.randn_like(xw[1]))
    value, hv = fusegrad.hvp(f, xw, v, options=O)
    value_e, hv_e = torch.autograd.functional.hvp(f, xw, v)
    torch.testing.assert_close(value, value_e)
    for got, e in zip(hv, hv_e):
        torch.testing.assert_close(got, e)
    torch.testing.assert_close(fusegrad.hessian(f, 1, options=O)(*xw),
                               torch.func.hessian(f, 1)(*xw))


def test_a_tensor_or_weight_read_twice_from_outside_is_one_input():
    """A closed-over tensor read in two places, and a weight two modules share (tied),
    are one lifted input each: tracing records one constant per read."""
    x, w = torch.randn(3, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    torch.testing.assert_close(fusegrad.grad(lambda x: (x * w).sum() + (w * w).sum(),
                                             options=O)(x), w.expand(3, 4))
    torch.manual_seed(2)
    first = torch.nn.Linear(4, 4, dtype=torch.float64)
    second = torch.nn.Linear(4, 4, dtype=torch.float64)
    second.weight = first.weight

    def loss(x):
        return second(first(x)).tanh().sum()
    torch.testing.assert_close(fusegrad.grad(loss, options=O)(x), torch.func.grad(loss)(x))


def test_compiled_once_per_signature(xw):
    from fusegrad import functional

    def h(x):
        return x.exp().sum()
    gh = fusegrad.grad(h, options=O)
    for _ in range(3):
        gh(xw[0])
    gh(xw[1])
    assert len(functional._CACHE[h]) == 2


def test_grad_needs_scalar_output(xw):
    with pytest.raises(ValueError, match="one floating-point scalar"):
        fusegrad.grad(g, options=O)(*xw)


def test_functions_closing_over_tensors_and_modules(xw):
    """A model's loss as a function of its input reads the model's weights and other
    tensors from outside: each call passes them, so in-place updates are seen."""
    x, w = xw
    torch.manual_seed(1)
    lin = torch.nn.Linear(4, 3, dtype=torch.float64)
    mask = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)

    def loss(x):
        return (torch.tanh(lin(x)) * mask).sum() + f(x, w)
    v = torch.randn_like(x)
    for step in range(2):
        torch.testing.assert_close(fusegrad.grad(loss, options=O)(x), torch.func.grad(loss)(x))
        torch.testing.assert_close(fusegrad.jvp(loss, (x,), (v,), options=O)[1],
                                   torch.func.jvp(loss, (x,), (v,))[1])
        torch.testing.assert_close(fusegrad.hvp(loss, (x,), (v,), options=O)[1][0],
                                   torch.autograd.functional.hvp(loss, x, v)[1])
        out, vjp_fn = fusegrad.vjp(lambda x: lin(x) * mask, x, options=O)
        torch.testing.assert_close(vjp_fn(torch.ones_like(out))[0],
                                   (lin.weight * mask[:, None]).sum(0).expand_as(x))
        with torch.no_grad():  # what an optimizer step does between calls
            lin.weight.mul_(-2)
            w.add_(0.5)
        mask = torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64)  # rebound: traced anew

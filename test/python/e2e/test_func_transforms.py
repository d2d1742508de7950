"""torch.func transforms inside a compiled function: grad, vjp, jacrev, jacfwd, jvp, vmap.

Dynamo keeps a transform's levels in the graph; fusegrad traces each grad level with
grad enabled, so the inner backward becomes ordinary ops it compiles (and
differentiates again for an outer backward). Traced under no_grad, the inner
gradient used to be zeros.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vjp, vmap

import fusegrad
from compile_options import OPTIONS
from fusegrad.frontend.backend import FusegradFallbackWarning

torch.manual_seed(0)
W = torch.randn(5, 5, dtype=torch.float64)


def scalar(y):
    return (y.sin() * y).sum()


TRANSFORMS = {
    "grad": lambda x: grad(scalar)(x),
    "grad_of_grad": lambda x: grad(lambda y: grad(scalar)(y).pow(2).sum())(x),
    "vjp": lambda x: vjp(torch.tanh, x)[1](torch.ones_like(x))[0],
    "jacrev": lambda x: jacrev(lambda y: (W @ y).tanh())(x),
    # a linear layer with a bias on an unbatched input: the transform writes the bias's
    # contribution through an as_strided view (as_strided_scatter on new_empty_strided)
    "jacrev_linear_1d": lambda x: jacrev(lambda y: torch.nn.functional.linear(
        y, W[:3], W[3, :3]).tanh())(x),
    "jacfwd": lambda x: jacfwd(lambda y: (W @ y).tanh())(x),
    "jvp": lambda x: jvp(torch.sin, (x,), (torch.ones_like(x),))[1],
    "hessian": lambda x: hessian(scalar)(x),
    # the transform's zero tangents of W are `_efficientzerotensor`s
    "hessian_through_a_matmul": lambda x: hessian(
        lambda y: (torch.tanh(y @ W) @ y).sin() + y.pow(3).sum())(x),
    "vmap_of_grad": lambda x: vmap(grad(scalar))(torch.stack([x, 2 * x, -x])),
    "detach_inside_grad": lambda x: grad(lambda y: (y * y.detach().exp()).sum())(x),
    "grad_then_ops": lambda x: grad(scalar)(x).exp() * x,
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_transform_matches_eager_and_its_gradient_too(name):
    fn = TRANSFORMS[name]
    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    got, want = fusegrad.compile(fn, **OPTIONS)(x), fn(x)
    torch.testing.assert_close(got, want)
    # a detach inside the transform stops every level's gradient, as in eager
    assert got.requires_grad == want.requires_grad
    if want.requires_grad:
        torch.testing.assert_close(torch.autograd.grad(got.sum(), x),
                                   torch.autograd.grad(want.sum(), x))


@pytest.mark.usefixtures("no_fallback")
def test_per_sample_gradients_and_a_maml_step():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
    x, t = torch.randn(10, 8), torch.randint(0, 3, (10,))

    def loss(p, x, t):
        out = functional_call(model, p, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, t.unsqueeze(0))

    def per_sample(p, x, t):
        return vmap(grad(loss), in_dims=(None, 0, 0))(p, x, t)

    def maml(p, x, t):
        g = grad(loss)(p, x[0], t[0])
        return loss({k: p[k] - 0.1 * g[k] for k in p}, x[1], t[1])

    got, want = fusegrad.compile(per_sample, **OPTIONS)(params, x, t), per_sample(params, x, t)
    for k in want:
        torch.testing.assert_close(got[k], want[k])
    got, want = fusegrad.compile(maml, **OPTIONS)(params, x, t), maml(params, x, t)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got, list(params.values())),
                               torch.autograd.grad(want, list(params.values())))


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dims", [1, 2])
def test_per_sample_gradients_of_a_convolutional_model(dims):
    """vmap of grad over a CNN traces aten.convolution_backward (the functorch batching
    rule), which maps to dg's convolution gradients; it ran the graph eagerly."""
    conv = torch.nn.Conv1d if dims == 1 else torch.nn.Conv2d
    model = torch.nn.Sequential(conv(2, 4, 3, padding=1), torch.nn.ReLU(),
                                conv(4, 3, 3, stride=2, groups=1), torch.nn.Flatten(),
                                torch.nn.LazyLinear(2))
    x, t = torch.randn(5, 2, *(6,) * dims), torch.randint(0, 2, (5,))
    model(x)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}

    def loss(p, x, t):
        out = functional_call(model, p, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, t.unsqueeze(0))

    def per_sample(p, x, t):
        return vmap(grad(loss), in_dims=(None, 0, 0))(p, x, t)
    got, want = fusegrad.compile(per_sample, **OPTIONS)(params, x, t), per_sample(params, x, t)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-4, atol=1e-5)


def test_an_op_fusegrad_cannot_compile_inside_a_transform_runs_the_graph_eagerly():
    """A graph is not split inside a transform (the part after the cut would run outside
    the grad level): it runs eagerly, with one warning naming the op."""
    torch._dynamo.reset()

    def fn(x):
        return grad(lambda y: torch.fft.rfft(y).abs().sum())(x) * 2
    x = torch.randn(8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fusegrad.compile(fn, **OPTIONS)(x)
    torch.testing.assert_close(got, fn(x))
    messages = [str(w.message) for w in caught if issubclass(w.category, FusegradFallbackWarning)]
    assert len(messages) == 1 and "inside a torch.func transform" in messages[0], messages

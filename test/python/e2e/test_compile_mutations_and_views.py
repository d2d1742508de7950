"""Aliasing as in eager: outputs that are inputs or views of them, in-place updates
of inputs and of views (written back, under no_grad or of detached tensors too),
with the gradients eager gives."""
from __future__ import annotations

import warnings

import pytest
import torch

import fusegrad
from compile_options import compiled
from fusegrad.frontend.backend import FusegradFallbackWarning

pytestmark = pytest.mark.usefixtures("no_fallback")


def test_outputs_alias_inputs_as_in_eager():
    # x * 1 imports as x: the compiled function hands its argument back, and eager's
    # result is a new tensor, so the caller gets a copy
    x = torch.randn(3, 4)
    same, twice = compiled(lambda x: (x * 1, x * 2))(x)
    assert same.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    torch.testing.assert_close(same, x)
    torch.testing.assert_close(twice, x * 2)


@pytest.mark.parametrize("grad", [False, True])
def test_outputs_that_eager_returns_as_views_are_views(grad):
    """A view of an input, or of another output, is a view as in eager: writing into it
    reaches its base (a returned slice of a cache buffer). The program computes copies."""
    def f(x):
        y = x * 2
        return x.view(-1), x[0], y, y.view(-1)
    x = torch.arange(6.0).reshape(2, 3).requires_grad_(grad)
    x_eager = x.detach().clone().requires_grad_(grad)
    got, want = compiled(f)(x), f(x_eager)
    if grad:
        weights = [torch.randn(t.shape) for t in want]
        sum(((t * w).sum() for t, w in zip(got, weights))).backward()
        sum(((t * w).sum() for t, w in zip(want, weights))).backward()
        torch.testing.assert_close(x.grad, x_eager.grad)
        return
    def storage(t):
        return t.untyped_storage().data_ptr()
    for (a, b, y, yv), base in ((got, x), (want, x_eager)):
        assert storage(a) == storage(b) == storage(base) and storage(yv) == storage(y)
        a.add_(100)
        yv.mul_(-1)
        base.sub_(1)
    for g, w in zip([x, *got], [x_eager, *want]):
        torch.testing.assert_close(g, w)

    def step(cache, k, pos: int):
        cache[:, pos] = k
        return cache[:, :pos + 1]
    cache, cache_eager = torch.zeros(2, 4), torch.zeros(2, 4)
    compiled(step)(cache, torch.ones(2), 1).mul_(10)
    step(cache_eager, torch.ones(2), 1).mul_(10)
    torch.testing.assert_close(cache, cache_eager)


def test_views_returned_by_a_dynamic_graph_are_views_at_each_size():
    """A graph Dynamo made dynamic (after a new length, or dynamic=True) returns views
    whose geometry follows the call's sizes: a decoding step's slice of its cache."""
    def step(x, cache, k, pos: int):
        cache[:, pos] = k
        return x.view(-1), cache[:, :pos + 1]
    for dynamic in (None, True):
        f = compiled(step, dynamic=dynamic)
        for n in (3, 5, 6):
            x, cache, k = torch.randn(n, 2), torch.zeros(2, 8, 3), torch.ones(2, 3)
            flat, seen = f(x, cache, k, n - 1)
            assert flat.shape == (2 * n,) and seen.shape == (2, n, 3)
            flat[0] = 99.0
            seen[0, 0, 0] = -5.0
            assert x[0, 0] == 99.0 and cache[0, 0, 0] == -5.0 and cache[0, n - 1, 0] == 1.0


def test_input_mutation_is_written_back():
    def f(x, buf):
        buf.mul_(0.5).add_(x)
        return x * buf
    x = torch.randn(5)
    buf, buf_eager = torch.ones(5), torch.ones(5)
    out = compiled(f)(x, buf)
    expected = f(x, buf_eager)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(buf, buf_eager)


def test_in_place_update_of_a_view_of_a_permuted_result():
    """HF Funnel's relative shift: reshapes and slices of an einsum's permuted result,
    then `*=` on the slice. Functionalization writes the slice back with slice_scatter and
    replays the base's views on its result, which must keep the base's strides."""
    def f(q, r, mask):
        scores = torch.einsum("binh,tnh->bnit", q, r)  # [b, n, 16, 33], permuted
        b, n, s, m = scores.shape
        shifted = scores.reshape(b, n, m, s)[:, :, 1:, :].reshape(b, n, s, m - 1)[..., :16]
        shifted *= mask
        return shifted
    q = torch.randn(4, 16, 2, 8, requires_grad=True)
    r, mask = torch.randn(33, 2, 8), torch.randn(16, 16)
    got, want = compiled(f)(q, r, mask), f(q, r, mask)
    torch.testing.assert_close(got, want)
    g = torch.randn_like(want)
    torch.testing.assert_close(torch.autograd.grad(got, q, g), torch.autograd.grad(want, q, g))


def _mutate_in_grad_mode(x, y):
    x.mul_(y)
    return (x * 3).sum()


def _mutate_without_grad(x, y):
    with torch.no_grad():
        x.mul_(y)
    return (x * 3).sum()


@pytest.mark.parametrize("fn,compiles", [(_mutate_in_grad_mode, True),
                                         (_mutate_without_grad, False)])
def test_in_place_update_of_an_input_that_requires_grad(fn, compiles):
    """In grad mode the update compiles and autograd records the copy back, so the
    gradient reaches what the input was computed from, as eager's. Under no_grad eager
    passes the updated tensor's gradient through unchanged: that graph runs eagerly,
    its no_grad block included."""
    base, y = torch.randn(6), torch.randn(6)
    results = []
    for run in (fn, fusegrad.compile(fn)):
        a, b = base.clone().requires_grad_(), y.clone().requires_grad_()
        x = a * 1
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FusegradFallbackWarning)
            out = run(x, b)
        (out + x.sum()).backward()
        results.append((out, x, a.grad, b.grad))
    assert bool(caught) != compiles
    for got, want in zip(results[1], results[0]):
        torch.testing.assert_close(got, want)
    leaf = torch.randn(6, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fusegrad.compile(_mutate_in_grad_mode)(leaf, y)


def _ema_chain(buf, x):
    with torch.no_grad():
        buf.mul_(0.9).add_(x)  # the second update reads the first's result
    return buf * 1


def _update_through_views(buf, x):
    with torch.no_grad():
        v = buf.view(-1)
        v[1:3].add_(x[:2])
        buf.view(3, 1)[0] = x[0]
    return buf * 1


def _update_detached(buf, x):
    buf.detach().mul_(0.5).add_(x)
    return buf * 1


@pytest.mark.parametrize("fn", [_ema_chain, _update_through_views, _update_detached])
def test_updates_under_no_grad_or_of_detached_tensors_reach_the_tensor(fn):
    """An in-place update under no_grad through an in-place op's result or a view, or of a
    detached tensor, changes the tensor as in eager (these values went through
    dg.stop_gradient, a copy: the updates were lost)."""
    buf, x = torch.randn(3), torch.randn(3)
    want_buf = buf.clone()
    want = fn(want_buf, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        got = compiled(fn)(buf, x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(buf, want_buf)


def test_ema_update_under_no_grad_trains_like_eager():
    """A running average updated under no_grad from a parameter (an EMA or a custom
    norm's statistics) is updated, and gives the parameter no gradient, as in eager."""
    def f(p, ema):
        with torch.no_grad():
            ema.mul_(0.5).add_(p * 2, alpha=0.5)
        return (ema * p).sum()

    p0, ema0 = torch.randn(4), torch.randn(4)
    p1, ema1 = p0.clone().requires_grad_(), ema0.clone()
    p2, ema2 = p0.clone().requires_grad_(), ema0.clone()
    f(p1, ema1).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        compiled(f)(p2, ema2).backward()
    torch.testing.assert_close(ema2, ema1)
    torch.testing.assert_close(p2.grad, p1.grad)

"""Graph splitting: an op fusegrad cannot compile runs eagerly in its place, the
parts before and after it are compiled, and gradients flow through all of them."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch

import fusegrad
from fusegrad.frontend import backend
from fusegrad.frontend.backend import FusegradEagerOpWarning, FusegradFallbackWarning
from compile_options import OPTIONS


@pytest.fixture
def compiled_parts(monkeypatch):
    """The graphs (whole or parts) fusegrad compiled, counted at compile_graph."""
    parts = []
    real = backend.compile_graph

    def counting(fn, example_inputs, options):
        compiled = real(fn, example_inputs, options)
        parts.append(compiled)
        return compiled
    monkeypatch.setattr(backend, "compile_graph", counting)
    torch._dynamo.reset()
    return parts


def qr_then_i0(x, w):
    h = torch.tanh(x @ w)
    _, r = torch.linalg.qr(h)  # a tuple output unpacked by the compiled part after it
    y = torch.special.i0(r * h + 1)  # gradient flows through an eager op
    return (y * h).sum()


def run(fn, compiled_fn, *inputs):
    """fn's value and input gradients, eager and compiled."""
    results = []
    for f in (fn, compiled_fn):
        leaves = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
        out = f(*leaves)
        out.backward()
        results.append((out, [x.grad for x in leaves if x.requires_grad]))
    return results


def fallback_messages_matching_eager(fn) -> list[str]:
    """Run `fn(x, w)` eagerly and compiled (x 3x4, w 4x4, both requiring grad), check the
    values and gradients match, and return the fallback warnings' messages."""
    torch.manual_seed(0)
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (want, want_grads), (got, got_grads) = run(fn, fusegrad.compile(fn, **OPTIONS), x, w)
    torch.testing.assert_close(got, want)
    for g, e in zip(got_grads, want_grads):
        torch.testing.assert_close(g, e)
    return [str(w.message) for w in caught if issubclass(w.category, FusegradFallbackWarning)]


def test_unsupported_ops_run_eagerly_between_compiled_parts(compiled_parts):
    torch.manual_seed(0)
    x, w = torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
    cf = fusegrad.compile(qr_then_i0, **OPTIONS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (want, want_grads), (got, got_grads) = run(qr_then_i0, cf, x, w)
        run(qr_then_i0, cf, x, w)  # compiled once: no new warnings, no recompiles
    messages = [str(w.message) for w in caught if issubclass(w.category, FusegradFallbackWarning)]
    assert all(issubclass(w.category, FusegradEagerOpWarning) for w in caught
               if issubclass(w.category, FusegradFallbackWarning))
    assert len(messages) == 2, messages
    assert "aten.linalg_qr" in messages[0] and "aten.i0" in messages[1]
    assert all("test_graph_split.py" in m for m in messages)
    assert len(compiled_parts) == 3  # before the qr, between the two, after i0
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for g, e in zip(got_grads, want_grads):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_split_graph_trains_like_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 8))
    reference = copy.deepcopy(model)

    def loss(m, x):
        h = m(x)
        q, _ = torch.linalg.qr(h.t())  # no dg mapping: runs eagerly
        return (q.pow(2).sum(-1) + h.logsumexp(-1).mean()).mean()
    torch._dynamo.reset()
    compiled = fusegrad.compile(lambda x: loss(model, x), **OPTIONS)
    x = torch.randn(5, 8)
    losses = []
    for m, fn in ((model, compiled), (reference, lambda x: loss(reference, x))):
        opt, run_losses = torch.optim.SGD(m.parameters(), lr=0.1), []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FusegradEagerOpWarning)
            for _ in range(5):
                opt.zero_grad()
                value = fn(x)
                value.backward()
                opt.step()
                run_losses.append(value.item())
        losses.append(run_losses)
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_dynamo_graph_break_trains_like_eager(compiled_parts):
    def fn(x, w):
        y = torch.sin(x @ w)
        print("a side effect: Dynamo breaks the graph here")  # noqa: T201
        return (torch.cos(y) * y).sum()
    x, w = torch.randn(3, 4), torch.randn(4, 4, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        (want, (want_grad,)), (got, (got_grad,)) = run(fn, fusegrad.compile(fn, **OPTIONS), x, w)
    assert len(compiled_parts) == 2
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grad, want_grad)


def cube_then_i0(x, w):
    h = torch.tanh(x @ w)
    c = torch.ops.fusegrad_test.scaled_cube(h, 2.0)  # a library's operator
    y = torch.special.i0(c * h + 1)  # no dg mapping
    return (y * h).sum() / x.shape[0]


@pytest.mark.filterwarnings("ignore::fusegrad.frontend.backend.FusegradEagerOpWarning")
@pytest.mark.parametrize("fn", [cube_then_i0, qr_then_i0])
def test_a_graph_of_symbolic_sizes_is_split_at_its_capture_and_its_parts_compile_once(fn):
    """Once Dynamo makes the sizes dynamic, the graph is split around its eager ops
    when it is captured, and each compiled part compiles once for every size (a
    mixture of experts whose grouped product runs eagerly compiled at every new
    number of tokens); values and gradients match eager at each size. (QR's reduced
    size, Min(8, s0), is s0 where Dynamo's guards say s0 <= 8.)"""
    from fusegrad.frontend import compile_history

    torch._dynamo.reset()
    compile_history.clear()
    cf = fusegrad.compile(fn, **OPTIONS)
    torch.manual_seed(0)
    for rows in (4, 5, 6, 8, 5, 7):
        x, w = torch.randn(rows, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
        (want, want_grads), (got, got_grads) = run(fn, cf, x, w)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        for g, e in zip(got_grads, want_grads):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    history = fusegrad.compile_history()
    assert [r.kind for r in history] == ["static"] * 3 + ["for every size"] * 3, history


@pytest.mark.filterwarnings("ignore::fusegrad.frontend.backend.FusegradEagerOpWarning")
def test_parts_that_run_eagerly_by_design_split_a_graph_of_symbolic_sizes_once():
    """Complex numbers and an autograd.Function run eagerly whatever the sizes; in a
    graph of symbolic sizes the parts between them compile once for every size."""
    from fusegrad.frontend import compile_history

    def fourier_reversed(x, w):
        h = torch.tanh(x @ w)
        s = torch.fft.fft(h, dim=-1).real
        return (ScaledGradReverse.apply(s * h, 1.0).exp() * h).sum() / x.shape[0]
    torch._dynamo.reset()
    compile_history.clear()
    cf = fusegrad.compile(fourier_reversed, **OPTIONS)
    for rows in (3, 5, 7, 4):
        x = torch.randn(rows, 8, dtype=torch.float64, requires_grad=True)
        w = torch.randn(8, 8, dtype=torch.float64, requires_grad=True)
        (want, want_grads), (got, got_grads) = run(fourier_reversed, cf, x, w)
        torch.testing.assert_close(got, want)
        for g, e in zip(got_grads, want_grads):
            torch.testing.assert_close(g, e)
    assert [r.kind for r in fusegrad.compile_history()] == ["static"] * 3 + ["for every size"] * 3


@pytest.mark.filterwarnings("ignore::fusegrad.frontend.backend.FusegradEagerOpWarning")
def test_a_part_of_static_sizes_compiles_once_as_it_is():
    """A part whose inputs keep their sizes (a weight's product before the eager op)
    compiles statically, once; the part of symbolic sizes after it, once for every
    size."""
    from fusegrad.frontend import compile_history

    def fn(x, w):
        h = torch.special.i0(torch.tanh(w @ w))  # sizes of w only
        return (x @ h).exp().sum(0) * x.shape[0]
    torch._dynamo.reset()
    compile_history.clear()
    cf = fusegrad.compile(fn, **OPTIONS)
    w = torch.randn(4, 4)
    for n in (3, 5, 9, 4):
        x = torch.randn(n, 4)
        torch.testing.assert_close(cf(x, w), fn(x, w))
    # the first shape's two parts, then the part of w's sizes and the one of x's
    assert [r.kind for r in fusegrad.compile_history()] == [
        "static", "static", "static", "for every size"]


@pytest.mark.filterwarnings("ignore::fusegrad.frontend.backend.FusegradEagerOpWarning")
def test_explain_lists_eager_parts():
    report = fusegrad.explain(qr_then_i0, torch.randn(4, 8),
                              torch.randn(8, 8, requires_grad=True))
    assert [p.op for p in report.eager_parts] == ["aten.linalg_qr.default", "aten.i0.default"]
    assert all("test_graph_split.py" in p.where and p.reason for p in report.eager_parts)
    assert len(report.graphs) == 3
    assert all(set(g.kernels) == {f"{g.name}_fwd", f"{g.name}_bwd"} for g in report.graphs)
    assert "eager part: 'aten.linalg_qr.default'" in str(report)


def spectral_mixing(x, w):
    """An FNet-style block: Fourier mixing over the sequence, then a dense layer."""
    h = torch.fft.fft2(torch.tanh(x @ w)).real
    return torch.nn.functional.layer_norm(x + h, (x.shape[-1],)).pow(2).sum()


def test_complex_ops_run_eagerly_and_the_real_valued_rest_compiles(compiled_parts):
    """dg has no complex dtypes: the ops making or reading complex tensors (the FFT and
    `.real`) run eagerly, named in one warning, instead of the whole graph (the FFT's
    output used to make the graph after it fall back entirely)."""
    torch.manual_seed(0)
    x, w = torch.randn(2, 6, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
    cf = fusegrad.compile(spectral_mixing, **OPTIONS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (want, want_grads), (got, got_grads) = run(spectral_mixing, cf, x, w)
    fallbacks = [w for w in caught if issubclass(w.category, FusegradFallbackWarning)]
    assert [w.category for w in fallbacks] == [FusegradEagerOpWarning]
    message = str(fallbacks[0].message)
    assert "'fft_fft2, real'" in message and "complex" in message, message
    assert "test_graph_split.py" in message
    assert len(compiled_parts) == 2  # tanh(x @ w) before, the layer norm after
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for g, e in zip(got_grads, want_grads):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


class ScaledGradReverse(torch.autograd.Function):
    """A gradient reversal layer: identity forward, -alpha * gradient backward."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.alpha * grad, None


class RoundThrough(torch.autograd.Function):
    """A straight-through estimator: round forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


def reversed_and_rounded(x, w):
    h = torch.tanh(x @ w)
    return (ScaledGradReverse.apply(h, 0.5) * RoundThrough.apply(h * 4) * x.exp()).sum()


def test_autograd_functions_run_their_own_backward(compiled_parts):
    """A user's torch.autograd.Function runs eagerly, so its backward is the user's: the
    compiled gradients were the forward's own derivative (zero through round, +1 through
    the reversal), silently."""
    messages = fallback_messages_matching_eager(reversed_and_rounded)
    assert len(messages) == 1 and "torch.autograd.Function" in messages[0], messages
    assert len(compiled_parts) == 3  # tanh(x @ w), h * 4 between the two, the products


def test_a_hook_on_an_intermediate_runs_in_the_backward(compiled_parts):
    """A hook registered inside the compiled function scales the gradient through `h`: it
    runs eagerly between two compiled parts (it used to make the whole graph fall back:
    tracing under no_grad cannot register a hook)."""
    def scaled(x, w):
        h = torch.tanh(x @ w)
        h.register_hook(lambda g: g.clamp(-0.01, 0.01))
        return (h * h).sum()
    messages = fallback_messages_matching_eager(scaled)
    assert len(messages) == 1 and "Tensor.register_hook" in messages[0], messages
    assert len(compiled_parts) == 2


def test_torch_cond_runs_eagerly_and_says_why(compiled_parts):
    def branchy(x, w):
        h = torch.tanh(x @ w)
        return torch.cond(h.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (h,)).sum()
    messages = fallback_messages_matching_eager(branchy)
    assert len(messages) == 1 and "'torch.cond'" in messages[0] and "control flow" in messages[0]


def test_an_in_place_chain_split_by_an_eager_op_updates_the_input(compiled_parts):
    """`b = a.mul_(2)` returns `a` itself; a later `b.add_(...)` in another part must
    update `a`. Compiled parts return fresh tensors, so the second update used to land
    in a copy and `a` silently kept the first one only."""
    def update(a, g):
        b = a.mul_(2)
        b.add_(torch.special.i0(g))  # i0 runs eagerly between the two updates

    a, g = torch.rand(5), torch.rand(5)
    want = a.clone()
    update(want, g)
    with pytest.warns(FusegradEagerOpWarning, match="aten.i0"):
        fusegrad.compile(update, **OPTIONS)(a, g)
    torch.testing.assert_close(a, want)


@pytest.mark.parametrize("make", [
    lambda ps: torch.optim.Adam(ps, lr=1e-2),
    lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=False),
    lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, nesterov=True),
], ids=["adam", "adamw-single-tensor", "sgd-nesterov"])
def test_compiled_optimizer_steps_match_eager(make):
    """A compiled `optimizer.step` (in-place moment updates; Dynamo rewrites
    `addcmul_(..., value=v)` into `prims.fma` and a copy) updates the parameters and
    the optimizer state exactly as eager's step does, and compiles whole."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    reference = copy.deepcopy(model)
    opt, ref_opt = make(model.parameters()), make(reference.parameters())
    step = fusegrad.compile(lambda: opt.step(), **OPTIONS)
    x = torch.randn(4, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        for _ in range(3):
            for m, o, s in ((model, opt, step), (reference, ref_opt, ref_opt.step)):
                o.zero_grad()
                m(x).pow(2).mean().backward()
                s()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        for key, value in ref_opt.state[q].items():
            torch.testing.assert_close(opt.state[p][key], value, rtol=1e-5, atol=1e-7)


def test_operators_named_like_in_place_ops_are_not_taken_for_them():
    """`operator.and_`/`or_` (how Dynamo records `a & b`) end in an underscore but return
    a new tensor: read as in-place, `m & c` became `m` and an attention mask lost terms."""
    def masked(x, y, z):
        keep = (x > 0) & (y > 0)
        keep = keep & (z > 0) | (x > 1)
        return torch.where(keep, x, -y)

    torch.manual_seed(0)
    x, y, z = torch.randn(3, 16), torch.randn(3, 16), torch.randn(3, 16)
    torch.testing.assert_close(fusegrad.compile(masked, **OPTIONS)(x, y, z), masked(x, y, z))


def test_an_input_updated_in_place_and_returned_is_the_input():
    """`return a.mul_(2)` returns `a` itself in eager; the compiled graph returns it too
    (not a fresh tensor of equal value), with its history when the update is recorded."""
    def scale(a, y):
        return a.mul_(2).add_(y)

    a, y = torch.ones(3), torch.full((3,), 0.5, requires_grad=True)
    out = fusegrad.compile(scale, **OPTIONS)(a, y)
    assert out is a
    torch.testing.assert_close(a, torch.full((3,), 2.5))
    (grad,) = torch.autograd.grad(out.pow(2).sum(), y)
    torch.testing.assert_close(grad, torch.full((3,), 5.0))


@torch.library.custom_op("fusegrad_test::scaled_cube", mutates_args=())
def _scaled_cube(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x.pow(3) * scale


@_scaled_cube.register_fake
def _(x, scale):
    return torch.empty_like(x)


_scaled_cube.register_autograd(
    lambda ctx, g: (3 * ctx.scale * ctx.saved_tensors[0].pow(2) * g, None),
    setup_context=lambda ctx, inputs, output: (ctx.save_for_backward(inputs[0]),
                                               setattr(ctx, "scale", inputs[1])))


def test_a_library_operator_runs_as_it_is_and_says_so():
    """A custom operator (a library's own kernel, HF's grouped_mm fallback) is opaque: it
    runs eagerly with its own autograd, the warning naming it as such, and the rest
    compiles and trains like eager."""
    def f(x):
        return torch.ops.fusegrad_test.scaled_cube(x.sin(), 2.0).sum()
    torch._dynamo.reset()
    x = torch.randn(6, requires_grad=True)
    with pytest.warns(FusegradEagerOpWarning,
                      match="a custom operator of the 'fusegrad_test' library"):
        got = fusegrad.compile(f, **OPTIONS)(x)
    (got_grad,) = torch.autograd.grad(got, x)
    want = f(x)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grad, torch.autograd.grad(want, x)[0])


def solve_and_invert(x, w):
    a = w @ w.t() + 4 * torch.eye(4)
    h = torch.tanh(x @ torch.linalg.solve(a, w)) @ torch.linalg.inv(a)
    return (h * torch.linalg.cholesky(a)[0]).sum()


def test_linalg_ops_that_check_their_input_run_eagerly_and_the_rest_compiles(compiled_parts):
    """torch.linalg.solve, inv and cholesky raise on a singular input through an effectful
    check: each runs eagerly (raising as eager does), the rest is compiled (the effect
    made the whole graph eager)."""
    messages = fallback_messages_matching_eager(solve_and_invert)
    assert len(messages) == 3 and all("side effect" in m for m in messages), messages
    assert compiled_parts
    with pytest.raises(torch.linalg.LinAlgError):
        fusegrad.compile(lambda a: torch.linalg.inv(a) * 2, **OPTIONS)(torch.zeros(3, 3))

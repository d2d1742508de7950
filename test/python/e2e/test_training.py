"""Training through compiled functions: .grad, retain_graph, double backward, gradcheck."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch

import fusegrad
from compile_options import OPTIONS


pytestmark = pytest.mark.usefixtures("no_fallback")


def f(x, w, b):
    return torch.tanh(x @ w + b).pow(2).sum(dim=1)


def leaves(dtype=torch.float32):
    torch.manual_seed(0)
    return [torch.randn(4, 3, dtype=dtype, requires_grad=True),
            torch.randn(3, 5, dtype=dtype, requires_grad=True),
            torch.randn(5, dtype=dtype, requires_grad=True)]


def test_grad_matches_eager_for_params_and_inputs():
    lin = torch.nn.Linear(3, 2)
    cm = fusegrad.compile(lin, **OPTIONS)
    x = torch.randn(5, 3, requires_grad=True)
    cm(x).sin().sum().backward()
    got = [x.grad.clone()] + [p.grad.clone() for p in lin.parameters()]
    x.grad = None
    lin.zero_grad()
    lin(x).sin().sum().backward()
    expected = [x.grad] + [p.grad for p in lin.parameters()]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)


def test_only_inputs_requiring_grad_get_grads():
    x, w, b = leaves()
    x.requires_grad_(False)
    fusegrad.compile(f, **OPTIONS)(x, w, b).sum().backward()
    assert x.grad is None and w.grad is not None and b.grad is not None


def test_retain_graph_and_second_backward_error():
    x, w, b = leaves()
    out = fusegrad.compile(f, **OPTIONS)(x, w, b).sum()
    out.backward(retain_graph=True)
    first = w.grad.clone()
    out.backward()
    torch.testing.assert_close(w.grad, 2 * first)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def logits_and_loss(x, w, target):
    logits = (x @ w).reshape(2, 3, 5)
    return logits, torch.nn.functional.cross_entropy(logits.reshape(6, 5), target)


@pytest.mark.parametrize("paired", [True, False], ids=["paired", "lazy"])
def test_backward_for_outputs_without_gradient_matches_eager(caplog, monkeypatch, paired):
    """loss.backward() gives the logits no gradient: a backward is compiled for that,
    taking the loss's cotangent only (paired: the full one came with the forward; lazy:
    it is the first); a later backward through both outputs runs the full one, and one
    without the logits' gradient again the first."""
    from fusegrad import program
    from fusegrad.runtime import autograd
    monkeypatch.setattr(autograd, "SPECIALIZE_MIN_BYTES", 0)
    monkeypatch.setattr(program, "PAIRED_BACKWARD_MAX_OPS", 10**9 if paired else 0)
    torch.manual_seed(0)
    x, t = torch.randn(6, 4, dtype=torch.float64), torch.randint(0, 5, (6,))
    w = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    cf = fusegrad.compile(logits_and_loss, **OPTIONS)
    for backward in (lambda out: out[1].backward(),
                     lambda out: (out[1] + out[0].sin().sum()).backward(),
                     lambda out: out[1].backward()):
        w.grad = None
        with caplog.at_level("INFO", logger="fusegrad.program"):
            backward(cf(x, w, t))
        got = w.grad.clone()
        w.grad = None
        backward(logits_and_loss(x, w, t))
        torch.testing.assert_close(got, w.grad)
    compiled = [r for r in caplog.records if "without gradient" in r.getMessage()]
    assert len(compiled) == 1, [r.getMessage() for r in caplog.records]
    # once the full backward is compiled, small logits get zeros, not a second compile
    monkeypatch.setattr(autograd, "SPECIALIZE_MIN_BYTES", 241)  # the logits: 240 bytes
    cf = fusegrad.compile(lambda *a: logits_and_loss(*a), **OPTIONS)
    caplog.clear()
    with caplog.at_level("INFO", logger="fusegrad.program"):
        for backward in (lambda out: (out[1] + out[0].sin().sum()).backward(),
                         lambda out: out[1].backward()):
            w.grad = None
            backward(cf(x, w, t))
            got = w.grad.clone()
            w.grad = None
            backward(logits_and_loss(x, w, t))
            torch.testing.assert_close(got, w.grad)
    assert not [r for r in caplog.records if "without gradient" in r.getMessage()]
    # a differentiable backward (create_graph) runs a joint taking the loss's cotangent only
    got = torch.autograd.grad(torch.autograd.grad(cf(x, w, t)[1], w, create_graph=True)[0]
                              .pow(2).sum(), w)
    want = torch.autograd.grad(torch.autograd.grad(logits_and_loss(x, w, t)[1], w,
                                                   create_graph=True)[0].pow(2).sum(), w)
    torch.testing.assert_close(got, want)


def test_double_backward_and_hvp_match_eager():
    x, w, b = leaves(torch.float64)
    cf = fusegrad.compile(f, **OPTIONS)
    v = torch.randn_like(w)

    def hvp_and_grad(fn):
        gw, gx = torch.autograd.grad(fn(x, w, b).sum(), (w, x), create_graph=True)
        return (gw, *torch.autograd.grad((gw * v).sum() + gx.pow(2).sum(), (w, x, b)))

    for got, expected in zip(hvp_and_grad(cf), hvp_and_grad(f)):
        torch.testing.assert_close(got, expected)


class TwoHeads(torch.nn.Module):
    """A loss head and a second head the loss may not read."""

    def __init__(self):
        super().__init__()
        self.body, self.loss_head, self.other_head = (torch.nn.Linear(4, 4), torch.nn.Linear(4, 1),
                                                      torch.nn.Linear(4, 2))

    def forward(self, x):
        h = torch.tanh(self.body(x))
        return self.loss_head(h).sum(), self.other_head(x)


def grads(model):
    return {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}


def test_parameters_no_gradient_reaches_keep_grad_none_like_eager():
    """Eager leaves .grad None for a head the loss does not read (an optimizer then skips
    it: AdamW neither decays it nor steps its momentum); the compiled backward computes
    zeros for it, which must not reach .grad. Also through a detach."""
    torch.manual_seed(0)
    model, x = TwoHeads(), torch.randn(3, 4)
    compiled = fusegrad.compile(model, **OPTIONS)
    compiled(x)[0].backward()
    got = grads(model)
    model.zero_grad(set_to_none=True)
    model(x)[0].backward()
    want = grads(model)
    assert got["other_head.weight"] is None and got["other_head.bias"] is None
    assert want.keys() == got.keys()
    for name, g in want.items():
        torch.testing.assert_close(got[name], g)
    model.zero_grad(set_to_none=True)

    def detached(w, v, x):
        return (x * w).sum() + (w * v.detach()).sum()
    w, v = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    fusegrad.compile(detached, **OPTIONS)(w, v, x[:, :3]).backward()
    assert w.grad is not None and v.grad is None


def test_double_backward_leaves_first_order_only_parameters_without_gradient():
    """A gradient penalty differentiates d(out)/dx: the loss head's bias does not
    reach it, so eager gives None (and raises without allow_unused) — as compiled."""
    torch.manual_seed(0)
    model, x = TwoHeads(), torch.randn(3, 4, requires_grad=True)

    def penalty_grads(fn):
        gx, = torch.autograd.grad(fn(x)[0], x, create_graph=True)
        return torch.autograd.grad(gx.pow(2).sum(), list(model.parameters()), allow_unused=True)

    got = penalty_grads(fusegrad.compile(model, **OPTIONS))
    want = penalty_grads(model)
    assert [g is None for g in got] == [g is None for g in want] == [False] * 3 + [True] * 3
    for g, e in zip(got, want):
        if e is not None:
            torch.testing.assert_close(g, e)
    with pytest.raises(RuntimeError, match="not have been used in the graph"):
        gx, = torch.autograd.grad(fusegrad.compile(model, **OPTIONS)(x)[0], x, create_graph=True)
        torch.autograd.grad(gx.pow(2).sum(), list(model.parameters()))


def test_autograd_grad_inside_a_compiled_function():
    """torch.autograd.grad(create_graph=True) inside the compiled function (a gradient
    penalty in a compiled training step) runs eagerly at a graph break while Dynamo's
    frame hook is on: it traced the backward's second differentiation and crashed."""
    def penalty(x, w):
        x = x.detach().requires_grad_()
        y = torch.tanh(x @ w).sum()
        g, = torch.autograd.grad(y, x, create_graph=True)
        return g.pow(2).sum()
    torch.manual_seed(0)
    x, w = torch.randn(3, 4), torch.randn(4, 2, requires_grad=True)
    got = fusegrad.compile(penalty, **OPTIONS)(x, w)
    want = penalty(x, w)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got, w), torch.autograd.grad(want, w))


def test_gradcheck_and_gradgradcheck():
    cf = fusegrad.compile(f, **OPTIONS)
    inputs = tuple(leaves(torch.float64))
    assert torch.autograd.gradcheck(cf, inputs)
    assert torch.autograd.gradgradcheck(cf, inputs)


def test_create_graph_without_saved_inputs_raises():
    x, w, b = leaves()
    out = fusegrad.compile(f, double_backward=False, **OPTIONS)(x, w, b).sum()
    with pytest.raises(RuntimeError, match="double_backward=True"):
        torch.autograd.grad(out, w, create_graph=True)


def test_dropout_masks_forward_and_backward_alike():
    """The seed input gives a fresh mask per call, reproducible under manual_seed,
    and the backward uses exactly the forward's mask."""
    f = fusegrad.compile(lambda x: torch.nn.functional.dropout(x * 2.0, 0.25, training=True),
                         **OPTIONS)
    x = torch.ones(64, 64, requires_grad=True)
    torch.manual_seed(0)
    y = f(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.03
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 2.0 / 0.75))
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad != 0, kept)
    torch.testing.assert_close(x.grad[kept], torch.full_like(y[kept], 2.0 / 0.75))
    assert not torch.equal(f(x) != 0, kept)
    torch.manual_seed(0)
    assert torch.equal(f(x), y)


@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (3, 2, 1), (3, 1, 0)])
def test_max_pool_gradient_goes_to_the_first_maximum_like_eager(kernel, stride, padding):
    """Tied maxima (ReLU zeros, repeated values): eager sends a window's whole gradient
    to its first maximum; an even split would be a different gradient."""
    torch.manual_seed(0)
    x = torch.randint(0, 3, (2, 3, 7, 7)).float().requires_grad_()
    weight = torch.randn(2, 3, *torch.nn.functional.max_pool2d(x, kernel, stride, padding).shape[2:])

    def loss(x):
        return (torch.nn.functional.max_pool2d(x, kernel, stride, padding) * weight).sum()
    want_x = x.detach().clone().requires_grad_()
    fusegrad.compile(loss, **OPTIONS)(x).backward()
    loss(want_x).backward()
    torch.testing.assert_close(x.grad, want_x.grad)


@pytest.mark.parametrize("name,fn", [
    ("relu", torch.relu),
    ("relu6", torch.nn.functional.relu6),
    ("hardtanh", lambda x: torch.nn.functional.hardtanh(x, -1.0, 3.0)),
    ("clamp", lambda x: x.clamp(-1.0, 3.0)),
    ("clamp_min", lambda x: x.clamp(min=0.0)),
    ("clamp_max", lambda x: x.clamp(max=3.0)),
    ("clamp_crossed", lambda x: x.clamp(3.0, -1.0)),
    ("hardsigmoid", torch.nn.functional.hardsigmoid),
    ("hardswish", torch.nn.functional.hardswish),
])
def test_clipping_gradients_at_the_bounds_match_eager(name, fn):
    """Inputs exactly at a bound (a ReLU of a ReLU's zeros, padding): relu and hardtanh
    pass no gradient there, clamp passes all of it. A max/min with a tie splits it in
    half (torch.maximum's rule), which was relu's gradient at 0."""
    x = torch.tensor([-4.0, -3.0, -1.0, -0.5, 0.0, 0.5, 3.0, 6.0, 7.0]).repeat(2, 1)
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    weight = torch.arange(1.0, 1.0 + x.numel()).reshape(x.shape)
    got = fusegrad.compile(lambda x: (fn(x) * weight).sum(), **OPTIONS)(got_x)
    want = (fn(want_x) * weight).sum()
    got.backward()
    want.backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_x.grad, want_x.grad)


@pytest.mark.parametrize("name,fn", [
    ("relu", torch.relu),
    ("clamp", lambda x: x.clamp(-1.0, 3.0)),
    ("clamp_min", lambda x: x.clamp(min=0.0)),
    ("clamp_max", lambda x: x.clamp(max=3.0)),
    ("clamp_tensors", lambda x: x.clamp(torch.zeros(9), torch.full((9,), 2.0))),
    ("hardsigmoid", torch.nn.functional.hardsigmoid),
])
def test_clipping_gradients_at_nan_match_eager(name, fn):
    """A NaN input stays NaN; clamp and hardsigmoid pass it no gradient (their range
    tests are false), relu passes it all (`x <= 0` is false too). (Eager's hardtanh and
    hardswish gradients at NaN differ between their scalar and vector loops.)"""
    x = torch.tensor([-4.0, float("nan"), -1.0, -0.5, 0.0, 0.5, 3.0, float("nan"), 7.0])
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    weight = torch.arange(1.0, 1.0 + x.numel())
    got = fusegrad.compile(lambda x: fn(x) * weight, **OPTIONS)(got_x)
    want = fn(want_x) * weight
    got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(got, want, equal_nan=True)
    torch.testing.assert_close(got_x.grad, want_x.grad)


@pytest.mark.parametrize("name,fn", [
    ("max_dim", lambda x: x.max(dim=1).values),
    ("min_dim", lambda x: x.min(dim=1).values),
    ("norm", lambda x: torch.linalg.vector_norm(x, dim=1)),
    ("norm_p3", lambda x: torch.linalg.vector_norm(x, 3.0, dim=1)),
    ("norm_inf", lambda x: torch.linalg.vector_norm(x, float("inf"), dim=1)),
    ("std", lambda x: x.std(dim=1)),
    ("std_mean", lambda x: torch.std_mean(x, dim=1)[0]),
    ("sinc", lambda x: torch.sinc(x).sum(dim=1)),
])
def test_gradients_at_ties_and_zero_norms_match_eager(name, fn):
    """max(dim) sends a tied row's gradient to the index it returns (a reduction would
    share it); a norm or std of zeros, and sinc at 0, have gradient 0 in eager (their
    decompositions' would be 0/0)."""
    x = torch.tensor([[0.0, 2.0, 2.0, -1.0, 0.0], [3.0, 3.0, 1.0, 0.0, -3.0],
                      [0.0, 0.0, 0.0, 0.0, 0.0], [1.5, 1.5, 1.5, 1.5, 1.5]])
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    weight = torch.arange(1.0, 5.0)
    fusegrad.compile(lambda x: (fn(x) * weight).sum(), **OPTIONS)(got_x).backward()
    (fn(want_x) * weight).sum().backward()
    torch.testing.assert_close(got_x.grad, want_x.grad)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("batched", [True, False], ids=["batch", "vector"])
def test_multilabel_margin_loss_stops_at_the_first_minus_one(reduction, batched):
    """The target lists a row's classes up to the first -1; PyTorch's decomposition (what
    Inductor runs too) counted every slot after it as class 0."""
    torch.manual_seed(0)
    x = torch.randn(4, 5, dtype=torch.float64)
    target = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, -1], [0, -1, 1, 1, 1],
                           [4, 3, 2, 1, 0]])
    if not batched:
        x, target = x[2], target[2]
    loss = lambda x: torch.nn.functional.multilabel_margin_loss(x, target, reduction=reduction)
    compiled = fusegrad.compile(loss, **OPTIONS)
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = compiled(got_x), loss(want_x)
    torch.testing.assert_close(got, want)
    got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close(got_x.grad, want_x.grad)
    assert torch.autograd.gradcheck(compiled, (x.clone().requires_grad_(),))


@pytest.mark.parametrize("dim", [1, -1, 0])
def test_index_fill_counts_each_filled_element_once_in_the_value_gradient(dim):
    """A repeated index fills its elements once: the value's gradient sums the gradient
    over the filled elements (PyTorch's decomposition copied the value per index, and a
    repeated index counted them again)."""
    x = torch.randn(5, 5, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 2, 2, 4, 0])
    fill = lambda x, v: torch.index_fill(x, dim, index, v) * torch.arange(1.0, 6.0)
    v = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    got = fusegrad.compile(fill, **OPTIONS)(x, v)
    want = fill(x, v)
    torch.testing.assert_close(got, want)
    got_grads = torch.autograd.grad(got.sum(), (x, v))
    want_grads = torch.autograd.grad(want.sum(), (x, v))
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("name", ["elu", "selu", "celu", "softplus", "mish"])
def test_activation_gradients_of_large_inputs_are_finite(name):
    """The branch `where` drops still takes a zero cotangent: an exponential of a large
    input there overflowed, and 0 * inf made the gradient NaN past x = 88."""
    fn = getattr(torch.nn.functional, name)
    x = torch.tensor([-100.0, -3.0, 0.0, 10.0, 88.0, 89.0, 100.0, 1e4])
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    fusegrad.compile(lambda t: fn(t).sum(), **OPTIONS)(got_x).backward()
    fn(want_x).sum().backward()
    torch.testing.assert_close(got_x.grad, want_x.grad)


@pytest.mark.parametrize("name, fn", [
    ("index_add dim 1", lambda x, v: x.index_add(1, torch.tensor([2, 0, 2]), v[:, :3])),
    ("two indices", lambda x, v: torch.index_put(x, (torch.tensor([1, 1, 3]),
                                                     torch.tensor([0, 0, 2])),
                                                 v[0, :3], accumulate=True)),
    ("indices after a slice", lambda x, v: torch.ops.aten.index_put(
        x, [None, torch.tensor([[0], [4]]), torch.tensor([1, -1])], v[:, :2, :2], True)),
    ("non-adjacent indices", lambda x, v: torch.ops.aten.index_put(
        x, [torch.tensor([0, 3]), None, torch.tensor([2, 1])], v[:2, :5, 0], True)),
])
def test_accumulating_index_put_matches_eager(name, fn):
    """Repeated indices add up; PyTorch's placement of the indexed dims (in place when
    adjacent, in front when not) decides the layout of the values."""
    x, v = torch.randn(4, 5, 3), torch.randn(4, 5, 3)
    want = [t.clone().requires_grad_() for t in (x, v)]
    got = [t.clone().requires_grad_() for t in (x, v)]
    expected = fn(*want)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fusegrad.FusegradEagerOpWarning)
        warnings.simplefilter("error", fusegrad.FusegradFallbackWarning)
        out = fusegrad.compile(fn, **OPTIONS)(*got)
    torch.testing.assert_close(out, expected)
    (expected * expected).sum().backward()
    (out * out).sum().backward()
    for g, w in zip(got, want):
        torch.testing.assert_close(g.grad, w.grad)


@pytest.mark.parametrize("update", [
    lambda buf, y: buf.add_(y * 2),
    lambda buf, y: buf.__setitem__(slice(1, 3), y[:2].sin()),
    lambda buf, y: buf.mul_(3).addcmul_(y, y, value=0.5),
], ids=["add_", "setitem", "chained-addcmul_"])
def test_an_input_updated_in_place_from_a_tensor_requiring_grad_carries_its_history(update):
    """`buf.add_(y)` gives `buf` y's history in eager even when `buf` itself does not
    require grad; a loss read from `buf` afterwards must reach y (it used to get no
    gradient: the update was copied back outside autograd)."""
    y = torch.randn(4, requires_grad=True)
    grads = []
    for f in (update, fusegrad.compile(update, **OPTIONS)):
        buf = torch.ones(4)
        f(buf, y)
        assert buf.requires_grad and buf.grad_fn is not None
        grads.append(torch.autograd.grad(buf.pow(2).sum(), y))
    torch.testing.assert_close(grads[1], grads[0])


def test_batch_norm_running_statistics_stay_out_of_autograd():
    """Running statistics are updated inside BatchNorm's op, which eager does not record:
    after a compiled training step they carry no history (a recorded update would chain
    every step's graph onto the buffers)."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    compiled = fusegrad.compile(model, **OPTIONS)
    compiled(torch.randn(8, 4)).sum().backward()
    bn = model[1]
    assert bn.running_mean.grad_fn is None and not bn.running_mean.requires_grad
    assert bn.running_var.grad_fn is None and bn.num_batches_tracked.item() == 1


def test_a_compiled_ema_update_of_parameters_that_require_grad():
    """An exponential moving average of a model's weights, updated in place under
    no_grad (a teacher, a diffusion model's EMA): it compiles, and the averaged
    parameters stay leaves that require grad, as in eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    ema, ema_eager = copy.deepcopy(model), copy.deepcopy(model)

    @torch.no_grad()
    def update(average, current, decay: float):
        for a, p in zip(average.parameters(), current.parameters()):
            a.lerp_(p, 1 - decay)
        for a, b in zip(average.buffers(), current.buffers()):
            a.copy_(b)
    compiled = fusegrad.compile(update, **OPTIONS)
    for _ in range(2):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        compiled(ema, model, 0.9)
        update(ema_eager, model, 0.9)
    for got, want in zip(ema.state_dict().values(), ema_eager.state_dict().values()):
        torch.testing.assert_close(got, want)
    assert all(p.is_leaf and p.requires_grad and p.grad_fn is None for p in ema.parameters())


def test_an_empty_batch_still_ends_in_a_loss_backward_takes():
    """A batch of 0 samples (the last of an epoch, a filtered one): the output requires
    grad as eager's does, though nothing reaches it once the empty computation folds."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.GroupNorm(2, 4),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                torch.nn.Flatten(), torch.nn.Linear(4, 2))
    reference = copy.deepcopy(model)
    compiled = fusegrad.compile(model, **OPTIONS)
    for batch in (2, 0):
        x = torch.randn(batch, 3, 8, 8)
        got, want = compiled(x).sum(), reference(x).sum()
        assert got.requires_grad
        got.backward()
        want.backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_an_eval_mode_forward_then_a_training_one_then_one_backward():
    """The eval-mode call's backward reads the running statistics it used, though the
    training-mode call updated them in place before it (eager raises nothing either:
    its kernel bumps no version, and its backward reads the updated ones)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16),
                                torch.nn.Linear(16, 4))
    reference = copy.deepcopy(model)
    x = torch.randn(6, 8)
    compiled = fusegrad.compile(model, **OPTIONS)
    compiled.eval()
    loss = compiled(x).pow(2).mean()
    compiled.train()
    (loss + compiled(x + 1).pow(2).mean()).backward()

    bn = reference[1]
    snapshot = bn.running_mean.clone(), bn.running_var.clone()
    evaluated = torch.nn.functional.batch_norm(reference[0](x), *snapshot, bn.weight, bn.bias,
                                               False, 0.0, bn.eps)
    loss = reference[2](evaluated).pow(2).mean()
    (loss + reference(x + 1).pow(2).mean()).backward()
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got.grad, want.grad)
    torch.testing.assert_close(model[1].running_var, bn.running_var)


def test_a_backward_that_fails_to_compile_for_missing_outputs_falls_back_to_the_full_one():
    """Compiling `@f_bwd` for outputs without gradient is an optimization: where it fails,
    the full backward runs with zeros for them (a failing full backward still raises)."""
    from fusegrad.runtime.autograd import Training

    full, tries = object(), []

    def compile_backward(missing):
        tries.append(missing)
        if missing:
            raise RuntimeError("no lowering for this")
        return full
    t = Training(fwd=lambda *a: a, num_outputs=2, wrt=(0,), ct_outputs=(0, 1),
                 compile_backward=compile_backward)
    def large(outputs):  # zeros worth a compile of their own
        return 1 << 30
    assert t.backward_for((1,), large) == ((), full)
    assert t.backward_for((1,), large) == ((), full)
    assert tries == [(1,), ()]  # not tried again
    broken = Training(fwd=lambda *a: a, num_outputs=1, wrt=(0,), ct_outputs=(0,),
                      compile_backward=lambda missing: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        broken.backward_for(())


def test_which_backward_outputs_without_gradient_take_is_decided_once():
    """A program of symbolic sizes sees the same outputs missing at growing sizes: the
    backward chosen at the first (zeros too small for a compile of their own) stays
    chosen when later zeros pass SPECIALIZE_MIN_BYTES, with no compile in mid-run."""
    from fusegrad.runtime.autograd import Training

    compiled = []

    def compile_backward(missing):
        compiled.append(missing)
        return ("backward", missing)
    t = Training(fwd=lambda *a: a, num_outputs=2, wrt=(0,), ct_outputs=(0, 1),
                 compile_backward=compile_backward)
    assert t.backward_for(()) == ((), ("backward", ()))
    assert t.backward_for((1,), lambda outputs: 1024) == ((), ("backward", ()))
    assert t.backward_for((1,), lambda outputs: 1 << 30) == ((), ("backward", ()))
    assert compiled == [()]


def test_a_language_model_training_loop_compiles_one_backward_per_graph(monkeypatch):
    """A loss's backward gives the logits no gradient: each graph has one backward (one
    compiled with its forward, or compiled at the first backward for the outputs that got
    a gradient), and the steps after the first compile none (no second compile of the
    same backward for the outputs without gradient)."""
    import transformers as tf
    from fusegrad.runtime import autograd

    trainings: dict = {}
    original = autograd.Training.backward_for

    def recording(self, missing, *args, **kwargs):
        trainings[id(self)] = self
        return original(self, missing, *args, **kwargs)
    monkeypatch.setattr(autograd.Training, "backward_for", recording)
    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64,
                                             n_positions=32, resid_pdrop=0.0, embd_pdrop=0.0,
                                             attn_pdrop=0.0))
    reference = copy.deepcopy(model)
    step = fusegrad.compile(model, **OPTIONS)
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    counts = []
    for _ in range(3):
        for m, run in ((model, step), (reference, reference)):
            m.zero_grad()
            run(input_ids=ids, labels=ids).loss.backward()
        for got, want in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5)
        counts.append(sum(len(t.backwards) for t in trainings.values()))
    assert trainings
    assert all(len(t.backwards) == 1 for t in trainings.values()), \
        [list(t.backwards) for t in trainings.values()]
    assert counts[0] == counts[-1] == len(trainings)

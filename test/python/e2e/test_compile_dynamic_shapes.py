"""Inputs that change between calls: new shapes, dtypes and float values compile
again (one static variant each, past Dynamo's recompile limit); a float or a size
that changes at nearly every call runs eagerly after a cap, with one warning."""
from __future__ import annotations

import warnings

import pytest
import torch

import fusegrad
from compile_options import OPTIONS, compiled, f_pointwise
from fusegrad.frontend.backend import FusegradFallbackWarning, fusegrad_backend

pytestmark = pytest.mark.usefixtures("no_fallback")


def test_recompiles_on_new_shape_and_caches():
    calls = []

    def counting(gm, example_inputs):
        calls.append(tuple(example_inputs[0].shape))
        return fusegrad_backend(gm, example_inputs, **OPTIONS)

    cf = torch.compile(f_pointwise, backend=counting, dynamic=False)
    for shape in [(2, 3), (2, 3), (4, 7), (2, 3)]:
        x, y = torch.randn(shape), torch.randn(shape)
        torch.testing.assert_close(cf(x, y), f_pointwise(x, y))
    assert calls == [(2, 3), (4, 7)]


def test_dynamic_shapes_are_specialised_per_shape():
    """torch.compile marks dims dynamic after a shape change; fusegrad compiles one
    static variant per concrete shape instead of falling back to eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))

    def fn(x):
        return model(x.view(x.shape[0], -1)).sum(1)
    compiled = torch.compile(fn, backend="fusegrad")
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        for batch in (2, 3, 5, 3):
            x = torch.randn(batch, 2, 4, requires_grad=True)
            got = compiled(x)
            got.sum().backward()
            want_x = x.detach().clone().requires_grad_()
            want = fn(want_x)
            want.sum().backward()
            torch.testing.assert_close(got, want)
            torch.testing.assert_close(x.grad, want_x.grad)


def test_a_graph_made_dynamic_compiles_once_for_every_size():
    """With `dynamic` left to Dynamo, the first shape compiles as it is, and the graph
    Dynamo makes dynamic after a shape change compiles once for every size: no further
    compile, and no shape reaches Dynamo's recompile limit (which would run it eagerly)."""
    from fusegrad.frontend import compile_history

    compile_history.clear()
    cf = compiled(f_pointwise)
    with torch._dynamo.config.patch(recompile_limit=2):
        for rows in (2, 3, 4, 5, 9, 3):
            x, y = torch.randn(rows, 5), torch.randn(rows, 5)
            torch.testing.assert_close(cf(x, y), f_pointwise(x, y))
    history = fusegrad.compile_history()
    assert [r.kind for r in history] == ["static", "for every size"]
    assert history[0].serves == "L_x_ (2, 5), L_y_ (2, 5)"
    assert history[0].origin.reason == "the function's first graph"
    assert history[1].serves == "s0 = L_x_ dim 0"
    assert history[1].origin.reason == ("Dynamo recompiled: tensor 'x' size mismatch at "
                                        "index 0. expected 2, actual 3")
    assert history[1].origin.function.startswith("f_pointwise (")
    assert "| for every size |" in str(history)


def test_specialize_shapes_compiles_per_shape(monkeypatch):
    """`specialize_shapes=True` keeps one program per shape, each within Dynamo's
    recompile limit."""
    from fusegrad.frontend import backend

    shapes = []
    compile_graph = backend.compile_graph

    def counting(gm, example_inputs, options):
        shapes.append(tuple(example_inputs[0].shape))
        return compile_graph(gm, example_inputs, options)
    monkeypatch.setattr(backend, "compile_graph", counting)
    torch._dynamo.reset()
    cf = fusegrad.compile(f_pointwise, specialize_shapes=True)
    with torch._dynamo.config.patch(recompile_limit=2):
        for rows in (2, 3, 4, 5):
            x, y = torch.randn(rows, 5), torch.randn(rows, 5)
            torch.testing.assert_close(cf(x, y), f_pointwise(x, y))
    assert shapes == [(2, 5), (3, 5), (4, 5), (5, 5)]


def test_float_arguments_that_change_are_compiled_per_value(monkeypatch):
    """Dynamo passes a float argument whose value changed as a 0-d tensor read with
    `.item()`, which tracing cannot follow (the whole graph used to run eagerly):
    each value compiles with the value baked in, gradients included."""
    from fusegrad.frontend import backend

    values = []
    compile_graph = backend.compile_graph

    def counting(gm, example_inputs, options):
        values.append(len(example_inputs))
        return compile_graph(gm, example_inputs, options)
    monkeypatch.setattr(backend, "compile_graph", counting)

    def fn(x, w, temperature):
        return torch.softmax(x @ w / temperature, -1) * torch.clamp(x.sum(1, keepdim=True),
                                                                      max=temperature)
    cf = compiled(fn)
    x, w = torch.randn(4, 5, requires_grad=True), torch.randn(5, 3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        for t in (0.5, 2.0, 0.7, 2.0):
            got = cf(x, w, t)
            want = fn(x, w, t)
            torch.testing.assert_close(got, want)
            for g, e in zip(torch.autograd.grad(got.sum(), [x, w]),
                            torch.autograd.grad(want.sum(), [x, w])):
                torch.testing.assert_close(g, e)
    assert len(values) == 3  # 0.5 specialised by Dynamo, then 2.0 and 0.7 per value


def test_a_float_taking_many_values_runs_eagerly_after_the_cap(monkeypatch):
    """A float that changes at every call would compile at every call: past
    FLOAT_VALUES_COMPILED values the graph runs eagerly for new ones, with one warning
    naming the argument."""
    from fusegrad.frontend import backend

    monkeypatch.setattr(backend, "FLOAT_VALUES_COMPILED", 2)

    def fn(x, scale):
        return (x * scale).tanh()
    cf = compiled(fn)
    x = torch.randn(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for scale in (0.5, 1.5, 2.5, 3.5, 4.5, 1.5):
            torch.testing.assert_close(cf(x, scale), fn(x, scale))
    messages = [str(w.message) for w in caught if issubclass(w.category, FusegradFallbackWarning)]
    assert len(messages) == 1 and "L_scale_" in messages[0] and "as a tensor" in messages[0]


def test_nan_inf_propagate_and_new_dtypes_and_shapes_recompile():
    def f(x):
        return (torch.nn.functional.gelu(x) + torch.softmax(x, -1) + x.exp() + x.tanh()
                + torch.nn.functional.layer_norm(x, x.shape[-1:]) + x.sigmoid() + x.log1p())
    cf = compiled(f)
    x = torch.tensor([[float("nan"), float("inf"), -float("inf"), 0.0, 1e-40, -1e30, 88.8, -0.5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        for t in (x, x.double(), x[:, :5], x.t().contiguous()):
            torch.testing.assert_close(cf(t), f(t), equal_nan=True)


def test_data_dependent_sizes_stop_compiling_when_no_signature_is_reused(monkeypatch):
    """x[mask] has a new size at nearly every call: once a graph has compiled
    SIGNATURES_BEFORE_REUSE_CHECK signatures and most calls brought a new one, new ones
    run eagerly (one warning naming the inputs); sizes that recur keep compiling."""
    from fusegrad.frontend import backend

    monkeypatch.setattr(backend, "SIGNATURES_BEFORE_REUSE_CHECK", 3)

    def f(x, mask):
        return (x[mask] * 2).sum()
    torch._dynamo.reset()
    # (by default the part after x[mask] compiles once for every size)
    cf = fusegrad.compile(f, specialize_shapes=True)
    x = torch.randn(12)

    def call(count):
        mask = torch.arange(12) < count
        return cf(x, mask), f(x, mask)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for count in (2, 3, 2, 3, 2, 4, 5, 6, 7, 8, 9, 5):  # a recurring pair, then new sizes
            got, want = call(count)
            torch.testing.assert_close(got, want)
    capped = [str(w.message) for w in caught if issubclass(w.category, FusegradFallbackWarning)]
    assert len(capped) == 1 and "most of its" in capped[0] and "new signatures run eagerly" \
        in capped[0], capped


def test_compile_history_says_why_a_dynamic_graph_compiles_per_shape():
    """A graph the program for every size cannot serve yet (a torch.func transform inside
    it) compiles per shape; `compile_history` shows each of its programs and why."""
    def slope(x):
        return torch.func.grad(lambda y: y.sin().sum())(x) * 2

    torch._dynamo.reset()
    from fusegrad.frontend import compile_history
    compile_history.clear()
    cf = compiled(slope)
    for rows in (21, 22, 24):
        x = torch.randn(rows, 2)
        torch.testing.assert_close(cf(x), slope(x))
    history = fusegrad.compile_history()
    assert [r.kind for r in history] == ["static", "per shape", "per shape"]
    assert [r.serves[r.serves.index("L_x_"):] for r in history] == [
        "L_x_ (21, 2)", "L_x_ (22, 2)", "L_x_ (24, 2)"]
    assert "every size" in history[1].note and "torch.func transform" in history[1].note
    assert history[1].origin.reason.startswith("Dynamo recompiled: tensor 'x' size mismatch")


def test_views_of_symbolic_geometry_are_returned_as_views():
    """Outputs that eager returns as views of an input (a slice from a size-dependent
    row, a flattening, a transpose's slice) are views at every size, their geometry in
    the program's sizes: writing into one reaches the input, as in eager."""
    from fusegrad.frontend import compile_history

    def views(x):
        return x[x.shape[0] // 2:], x * 2, x.view(-1), x.t()[1:]

    torch._dynamo.reset()
    compile_history.clear()
    cf = compiled(views)
    for rows in (21, 22, 24, 7):
        x = torch.randn(rows, 3)
        got, want = cf(x), views(x)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)
            assert g.stride() == w.stride()
        got[0].mul_(0)
        assert (x[rows // 2:] == 0).all()
        assert got[2].data_ptr() == x.data_ptr() and got[3].data_ptr() == x.data_ptr() + 4
    assert [r.kind for r in fusegrad.compile_history()] == ["static", "for every size"]


def test_an_integer_of_symbolic_size_returned_is_computed_at_each_call():
    """A size the graph returns as an integer (a split graph's part hands the next one
    its sizes) comes from the inputs' shapes at each call: one program for every size."""
    from fusegrad.frontend import compile_history

    def scaled_with_count(x):
        return x * 2, x.shape[0] * x.shape[1] + 1

    torch._dynamo.reset()
    compile_history.clear()
    cf = compiled(scaled_with_count, dynamic=True)
    for shape in ((3, 6), (5, 2), (4, 4)):
        x = torch.randn(shape)
        (got, count), (want, want_count) = cf(x), scaled_with_count(x)
        torch.testing.assert_close(got, want)
        assert count == want_count and type(count) is int
    assert [r.kind for r in fusegrad.compile_history()] == ["for every size"]


def _exactly_as_eager(got, want, x) -> None:
    """Every output bit for bit (NaN where eager's is), and the first output's gradient
    with respect to `x`."""
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)
    grad, = torch.autograd.grad(got[0].nan_to_num().sum(), x)
    want_grad, = torch.autograd.grad(want[0].nan_to_num().sum(), x)
    torch.testing.assert_close(grad, want_grad)


def test_a_sort_along_a_dim_of_symbolic_size_compiles_once():
    """A sort along a dim whose size changes (a mixture-of-experts router sorts its
    token-expert pairs) is compiled once for every size, in a stable sort's order:
    ties by index, NaN last; its values' gradient is that of a gather."""
    from fusegrad.frontend import compile_history

    def sort_rows(x, ids):
        values, index = torch.sort(x, dim=0, descending=True, stable=True)
        expert, pair = torch.sort(ids.reshape(-1), stable=True)
        return values * torch.arange(1.0, x.shape[0] + 1).unsqueeze(1), index, expert, pair

    torch._dynamo.reset()
    compile_history.clear()
    cf = compiled(sort_rows)
    for rows in (3, 4, 6, 9, 5):
        x = torch.randn(rows, 3, dtype=torch.float64)
        x[0, 0] = x[rows - 1, 0]  # a tie
        x[1, 1] = float("nan")
        ids = torch.randint(0, 4, (rows, 2))
        x.requires_grad_()
        _exactly_as_eager(cf(x, ids), sort_rows(x, ids), x)
    assert [r.kind for r in fusegrad.compile_history()] == ["static", "for every size"]


def test_a_topk_of_more_than_16_along_a_dim_of_symbolic_size_compiles_once():
    """topk beyond 16 selection rounds along a dim whose size changes is a sort by rank,
    sliced: values, indices (NaN largest) and the values' gradient match eager's."""
    from fusegrad.frontend import compile_history

    def top_rows(x):
        return (torch.topk(x, 20, dim=0).values * 2,
                torch.topk(x, 18, dim=0, largest=False).indices)

    torch._dynamo.reset()
    compile_history.clear()
    cf = compiled(top_rows)
    for rows in (21, 22, 24, 40):
        x = torch.randn(rows, 3, dtype=torch.float64)
        x[2, 1] = float("nan")
        x.requires_grad_()
        _exactly_as_eager(cf(x), top_rows(x), x)
    assert [r.kind for r in fusegrad.compile_history()] == ["static", "for every size"]


def test_an_integer_input_below_one_gets_a_program_of_its_own_value():
    """dg's sizes are positive: an integer input that is a size of its own (a diagonal,
    an offset) at 0 or below runs a program with its value baked in, not the program for
    every size, whose reasoning assumes it positive (triu's diagonal at -1 gave wrong
    values everywhere)."""
    from fusegrad.frontend import compile_history

    def upper(x, k: int):
        return torch.triu(x, k) + k

    torch._dynamo.reset()
    compile_history.clear()
    cf = compiled(upper, dynamic=True)
    for k in (2, -1, 3, 0, -2, 4):
        x = torch.randn(6, 5)
        torch.testing.assert_close(cf(x, k), upper(x, k))
    history = fusegrad.compile_history()
    assert [r.kind for r in history] == ["for every size"] + ["per shape"] * 3, str(history)
    assert [r.serves.split(", ")[-1] for r in history[1:]] == ["L_k_ = -1", "L_k_ = 0",
                                                               "L_k_ = -2"]
    assert "L_k_ below 1" in history[1].note


def test_a_program_whose_only_size_is_an_integer_input_trains():
    """Tensors of static shapes and one integer input made a size: the backward, whose
    entry has no size, was called with the forward's sizes (a TypeError at backward)."""
    def fill(x, m, v: int):
        return x.masked_fill(m, v) * x

    torch._dynamo.reset()
    cf = compiled(fill, dynamic=True)
    for v in (10, 3):
        x = torch.tensor(1.5, requires_grad=True)  # 0-d: no symbolic size
        m = torch.tensor(v > 5)
        got, want = cf(x, m, v), fill(x, m, v)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(torch.autograd.grad(got.sum(), x)[0],
                                   torch.autograd.grad(want.sum(), x)[0])


def test_a_cnn_at_changing_image_sizes_compiles_once_for_every_size():
    """A strided convolution over symbolic spatial sizes: dg-channels-last weighs its
    layouts at the size hints (comparing symbolic element counts raised, and every
    shape compiled a program of its own); values and gradients match eager."""
    from fusegrad.frontend import compile_history

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 4, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(4, 2)).double()
    torch._dynamo.reset()
    compile_history.clear()
    cf = compiled(model)
    for shape in ((2, 3, 16, 16), (3, 3, 20, 18), (2, 3, 15, 17), (4, 3, 24, 24)):
        x = torch.randn(shape, dtype=torch.float64)
        got, want = cf(x), model(x)
        torch.testing.assert_close(got, want)
        params = list(model.parameters())
        for g, w in zip(torch.autograd.grad(got.sum(), params),
                        torch.autograd.grad(want.sum(), params)):
            torch.testing.assert_close(g, w)
    assert [r.kind for r in fusegrad.compile_history()] == ["static", "for every size"]


def test_a_reshape_next_to_a_channels_last_convolution_at_symbolic_sizes():
    """dg-channels-last follows the channel dim through reshapes: sizes it cannot order
    (a 1x1x1 3-d convolution's reshapes at symbolic batch and channels) keep the layout
    there instead of raising (the graph compiled per shape)."""
    from fusegrad.frontend import compile_history

    conv = lambda x, w, b: torch.nn.functional.conv3d(x, w, b, padding="same")
    torch._dynamo.reset()
    compile_history.clear()
    cf = compiled(conv, dynamic=True)
    for n in (2, 3, 5):
        args = [torch.randn(n, n, 4, 4, 4), torch.randn(n, n, 1, 1, 1), torch.randn(n)]
        torch.testing.assert_close(cf(*args), conv(*args))
    assert [r.kind for r in fusegrad.compile_history()] == ["for every size"]


@pytest.mark.parametrize("name, fn, shapes", [
    ("glu", lambda x: torch.nn.functional.glu(x, 2), [(3, 6, 8), (4, 6, 10), (2, 5, 12)]),
    ("unfold", lambda x: x.unfold(0, 3, 1) * 2, [(10,), (13,), (7,)]),
    ("max_pool2d", lambda x: torch.nn.functional.max_pool2d(x, 3, 2),
     [(1, 2, 9, 9), (2, 2, 11, 12), (1, 2, 7, 10)]),
    # padded (ResNet's stem): whether the last window reads the right padding depends on
    # the sizes' parity, so the input is padded on both sides
    ("padded max_pool2d", lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 1),
     [(1, 2, 9, 9), (2, 2, 12, 11), (1, 2, 7, 10), (2, 2, 16, 16)]),
])
def test_cotangents_of_slices_of_symbolic_size_sum(name, fn, shapes):
    """The cotangents of slices of one tensor (glu's halves, unfold's windows) are zero
    pads of symbolic sizes: merged where their order is decided, else added (comparing
    the pads raised, and the graph compiled per shape)."""
    from fusegrad.frontend import compile_history

    torch._dynamo.reset()
    compile_history.clear()
    cf = compiled(fn, dynamic=True)
    for shape in shapes:
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        got, want = cf(x), fn(x)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(torch.autograd.grad(got.sum(), x)[0],
                                   torch.autograd.grad(want.sum(), x)[0])
    assert {r.kind for r in fusegrad.compile_history()} == {"for every size"}


def test_an_embedding_bag_trains_at_every_size():
    """The backward of an embedding bag takes its offsets less one (`s2 - 1`): the
    compiled code solves s2 from that dim (lowering had no value for it, and the graph
    compiled per shape); values and gradients match eager."""
    from fusegrad.frontend import compile_history

    def bags(w, i, o):
        return torch.nn.functional.embedding_bag(i, w, o, mode="sum",
                                                 include_last_offset=True) * 2
    torch._dynamo.reset()
    compile_history.clear()
    cf = compiled(bags, dynamic=True)
    g = torch.Generator().manual_seed(0)
    for n, rows, count in ((6, 5, 2), (9, 7, 4), (4, 6, 3), (12, 8, 5)):
        w = torch.randn(rows, 5, dtype=torch.float64, requires_grad=True)
        i = torch.randint(0, rows, (n,), generator=g)
        o = torch.cat([torch.tensor([0]), torch.randint(0, n + 1, (count - 1,),
                                                        generator=g).sort().values,
                       torch.tensor([n])])
        got, want = cf(w, i, o), bags(w, i, o)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(torch.autograd.grad(got.pow(2).sum(), w)[0],
                                   torch.autograd.grad(want.pow(2).sum(), w)[0])
    assert {r.kind for r in fusegrad.compile_history()} == {"for every size"}


def _narrow_at(x, pos: int):
    """Reads 4 rows at an integer offset (no tensor's size) and computes with it."""
    return (x.narrow(0, pos, 4) * 2 + pos).sin()


def _write_at(cache, x, pos: int):
    """A KV-cache-like write at an integer position, and a read up to it."""
    new = torch.cat([cache[:pos], x, cache[pos + 1:]], 0)
    return new[: pos + 1].sum(0), new


def test_an_integer_input_that_is_no_size_is_passed_at_run_time():
    """An integer Dynamo makes symbolic that no tensor's shape gives (a position offset)
    is a size of the one program for every size, passed at each call: values, gradients,
    second derivatives and forward-mode tangents match eager at every offset."""
    import torch.autograd.forward_ad as fwAD

    from fusegrad.frontend import compile_history

    torch._dynamo.reset()
    compile_history.clear()
    narrow, write = compiled(_narrow_at), compiled(_write_at)
    x, cache = torch.randn(16, 3, dtype=torch.float64, requires_grad=True), torch.randn(16, 3)
    for pos in (2, 5, 7, 11):
        got, want = narrow(x, pos), _narrow_at(x, pos)
        torch.testing.assert_close(got, want)
        (g,) = torch.autograd.grad(got.sum(), x, create_graph=True)
        (w,) = torch.autograd.grad(want.sum(), x, create_graph=True)
        torch.testing.assert_close(g, w)
        torch.testing.assert_close(torch.autograd.grad(g.pow(2).sum(), x)[0],
                                   torch.autograd.grad(w.pow(2).sum(), x)[0])
        with fwAD.dual_level():
            tangent = torch.randn_like(x)
            got_t = fwAD.unpack_dual(narrow(fwAD.make_dual(x.detach(), tangent), pos)).tangent
            want_t = fwAD.unpack_dual(_narrow_at(fwAD.make_dual(x.detach(), tangent),
                                                 pos)).tangent
        torch.testing.assert_close(got_t, want_t)
        row = torch.randn(1, 3)
        for a, b in zip(write(cache, row, pos), _write_at(cache, row, pos)):
            torch.testing.assert_close(a, b)
    history = fusegrad.compile_history()
    kinds = {(r.origin.function.split(" ")[0], r.kind) for r in history}
    assert ("_narrow_at", "for every size") in kinds and ("_write_at", "for every size") in kinds
    assert not [r for r in history if r.kind == "per shape"], str(history)
    assert "s0 = L_pos_" in [r.serves for r in history if r.kind == "for every size"]

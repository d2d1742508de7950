"""fusegrad.compile and torch.compile(backend="fusegrad") against eager PyTorch."""
from __future__ import annotations

import copy
import functools
import logging
import os
import re
import subprocess
import sys
import warnings

import pytest
import torch

import fusegrad
from compile_options import OPTIONS
from fusegrad.frontend.backend import FusegradFallbackWarning, fusegrad_backend
from fusegrad.devices import DeviceError, select_target



def compiled(fn, **kw):
    return fusegrad.compile(fn, **OPTIONS, **kw)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    with warnings.catch_warnings():
        # a silent fallback to eager would make every comparison below vacuous
        warnings.simplefilter("error", FusegradFallbackWarning)
        yield


def f_pointwise(x, y):
    return torch.tanh(x) * y + torch.exp(-y).sum(dim=1, keepdim=True)


def test_public_names_survive_importing_their_modules():
    """A submodule named like the function it defines would replace the package's
    attribute when imported (`import fusegrad.export` made `fusegrad.export` a module)."""
    code = ("import importlib, fusegrad\n"
            "for m in set(fusegrad._EXPORTS.values()):\n"
            "    importlib.import_module('fusegrad.' + m)\n"
            "bad = [n for n in fusegrad.__all__ if type(getattr(fusegrad, n)).__name__ == 'module']\n"
            "assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_function_matches_eager():
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    torch.testing.assert_close(compiled(f_pointwise)(x, y), f_pointwise(x, y))


def test_torch_compile_backend_name():
    x, y = torch.randn(3, 5), torch.randn(3, 5)
    cf = torch.compile(f_pointwise, backend="fusegrad", options=OPTIONS)
    torch.testing.assert_close(cf(x, y), f_pointwise(x, y))


def test_nested_and_non_tensor_outputs():
    def f(x):
        return {"a": x.sin(), "b": (x.cos(), None)}
    x = torch.randn(6)
    out = compiled(f)(x)
    assert out["b"][1] is None
    torch.testing.assert_close(out["a"], x.sin())
    torch.testing.assert_close(out["b"][0], x.cos())


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


def test_unsupported_op_warns_once_and_runs_eagerly():
    def f(x):
        return torch.special.bessel_j0(x) + 1

    x = torch.rand(8)
    cf = compiled(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out1, out2 = cf(x), cf(x)
    msgs = [str(w.message) for w in caught if issubclass(w.category, FusegradFallbackWarning)]
    assert len(msgs) == 1, msgs
    assert "bessel_j0" in msgs[0] and "test_compile.py" in msgs[0]
    torch.testing.assert_close(out1, f(x))
    torch.testing.assert_close(out2, f(x))


def test_no_grad_inference():
    lin = torch.nn.Linear(5, 3)
    cm = compiled(lin)
    x = torch.randn(4, 5)
    with torch.no_grad():
        out = cm(x)
        expected = lin(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, expected)


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


def test_dump_dir_writes_parseable_stages(tmp_path):
    from mlir import ir

    from fusegrad.context import make_context

    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
    compiled(f_pointwise, dump_dir=str(tmp_path))(x, y).sum().backward()
    index = [line.split("\t")[:3] for line in (tmp_path / "index.txt").read_text().splitlines()]
    assert sorted(name for name, _, _ in index) == sorted(
        p.name for p in tmp_path.iterdir() if p.name != "index.txt")
    stages = [stage.split("-")[0] for _, _, stage in index]
    assert stages == ["aten", "imported", "autodiff", "remat", "channels", "fused", "cpu", "cpu",
                      "cpu"]
    assert all(stage.endswith("-wrt0") for _, _, stage in index[2:])
    assert [stage for _, _, stage in index][-3:] == [
        "cpu-linalg-wrt0", "cpu-bufferized-wrt0", "cpu-llvm-wrt0"]
    ctx = make_context()
    for name, _, _ in index:
        if name.endswith(".mlir"):
            ir.Module.parse((tmp_path / name).read_text(), ctx)


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


def test_dump_names_stay_short_for_many_differentiated_inputs(tmp_path):
    """A model with hundreds of parameters, some frozen, and a hundred outputs without a
    gradient (a backward of its own): the stage names (file names) fit in a file
    system's 255 bytes, and dumping does not stop the compile."""
    params = [torch.randn(3, requires_grad=i % 3 != 1) for i in range(300)]

    def f(x, *ps):
        return sum(x * p for p in ps), *(p * 2 for p in ps[:150])
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        outs = compiled(f, dump_dir=str(tmp_path))(x, *params)
        (outs[0].sum() + sum(outs[1::2]).sum()).backward()  # none for outputs 2, 4, ...
    torch.testing.assert_close(params[0].grad, x + 2)
    stages = [line.split("\t")[2] for line in (tmp_path / "index.txt").read_text().splitlines()]
    assert re.fullmatch(r"cpu-llvm-wrt200-\w{12}-bwd-without\d+-\w{12}", stages[-1])
    assert max(map(len, stages)) < 80


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


def test_fusegrad_compile_takes_more_shapes_than_dynamos_recompile_limit(monkeypatch):
    """With `dynamic` left to Dynamo, a graph made dynamic after a shape change is
    compiled per shape by fusegrad: no shape reaches Dynamo's recompile limit (which
    would run it eagerly)."""
    from fusegrad.frontend import backend

    shapes = []
    compile_graph = backend.compile_graph

    def counting(gm, example_inputs, options):
        shapes.append(tuple(example_inputs[0].shape))
        return compile_graph(gm, example_inputs, options)
    monkeypatch.setattr(backend, "compile_graph", counting)
    cf = compiled(f_pointwise)
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


def test_inference_calls_go_straight_to_the_compiled_forward(monkeypatch):
    """After the first call, a call that records no gradient skips `run_program`; a
    call with grad mode on still goes through autograd."""
    from fusegrad.frontend import backend

    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 3)
    cf = compiled(layer)
    x = torch.randn(4, 6)
    with torch.no_grad():
        torch.testing.assert_close(cf(x), layer(x))
        with monkeypatch.context() as patched:
            patched.setattr(backend, "run_program", None)  # a second trip there would raise
            torch.testing.assert_close(cf(x), layer(x))
            assert not cf(x).requires_grad
    out = cf(x)
    out.sum().backward()
    weight_grad = layer.weight.grad.clone()
    layer.weight.grad = None
    layer(x).sum().backward()
    torch.testing.assert_close(weight_grad, layer.weight.grad)


def test_tensors_on_several_devices_raise_naming_them():
    """No silent copies and no eager fallback: the error names a tensor per device."""
    def f(x, y):
        return x.sin(), y.cos()
    with pytest.raises(DeviceError, match=r"several devices \(L_x_ on cpu, L_y_ on meta\)"):
        compiled(f)(torch.randn(3), torch.randn(3, device="meta"))


def test_tensors_created_on_another_device_raise_naming_the_op():
    def f(x):
        return x.sin(), torch.zeros_like(x, device="meta")
    with pytest.raises(DeviceError, match=r"several devices \(L_x_ on cpu, the result of "
                                          r"aten.full_like.default on meta\)"):
        compiled(f)(torch.randn(3))


def test_target_must_match_the_tensors():
    with pytest.raises(DeviceError, match=r"target='cuda', but L_x_ is on cpu; move the model "
                                          r"and its inputs to cuda"):
        compiled(f_pointwise, target="cuda")(torch.randn(2, 3), torch.randn(2, 3))
    with pytest.raises(ValueError, match="target='tpu' is not one of"):
        compiled(f_pointwise, target="tpu")


def test_select_target():
    cpu, meta = torch.ones(1), torch.ones(1, device="meta")
    assert select_target(None, [("a", cpu)]) == "cpu"
    assert select_target("cpu", []) == "cpu"
    with pytest.raises(DeviceError, match="a is on meta; fusegrad compiles for cpu and cuda"):
        select_target(None, [("a", meta)])


def test_out_of_range_token_raises_like_eager_without_fallback():
    emb = torch.nn.Embedding(10, 4)
    compiled = fusegrad.compile(emb)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        with pytest.raises(IndexError, match="aten.embedding"):
            compiled(torch.tensor([[1, 10]]))
        tokens = torch.tensor([[1, 9]])
        torch.testing.assert_close(compiled(tokens), emb(tokens))


def test_runtime_assertions_compile_and_raise_like_eager():
    """one_hot asserts its class range (`_assert_async`): the graph compiles whole, and
    bad input raises eager's error before the in-place update is written back."""
    def f(labels, w, count):
        count.add_(1)
        return (torch.nn.functional.one_hot(labels, num_classes=5).float() @ w).sum()

    w = torch.randn(5, 3, requires_grad=True)
    count = torch.zeros(())
    compiled = fusegrad.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        labels = torch.tensor([1, 2, 4, 4])
        loss = compiled(labels, w, count)
        loss.backward()
        torch.testing.assert_close(loss, f(labels, w.detach(), torch.zeros(())))
        torch.testing.assert_close(w.grad, torch.tensor([0, 1, 1, 0, 2.0])[:, None].expand(5, 3))
        assert count.item() == 1
        for bad, message in ((torch.tensor([1, 5, 0, 0]), "smaller than num_classes"),
                             (torch.tensor([1, -1, 0, 0]), "must be non-negative")):
            for grad in (True, False):
                with torch.set_grad_enabled(grad), pytest.raises(RuntimeError, match=message):
                    compiled(bad, w, count)
        assert count.item() == 1


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


@pytest.mark.parametrize("bag", [False, True])
def test_sparse_embeddings_give_sparse_gradients(bag):
    """sparse=True: eager's weight gradient is a sparse tensor (SparseAdam takes only
    those); dg's are dense, so the lookup runs eagerly, said in a warning, and the rest
    compiles."""
    from fusegrad.frontend.backend import FusegradEagerOpWarning
    torch.manual_seed(0)
    emb = torch.nn.EmbeddingBag(10, 4, sparse=True) if bag else torch.nn.Embedding(10, 4, sparse=True)
    head = torch.nn.Linear(4, 1)
    ids = torch.tensor([[1, 2, 2], [5, 9, 1]])

    def loss(ids):
        return head(torch.tanh(emb(ids))).sum()
    with pytest.warns(FusegradEagerOpWarning, match="sparse=True"):
        compiled(loss)(ids).backward()
    got, emb.weight.grad = emb.weight.grad, None
    loss(ids).backward()
    assert got.layout == torch.sparse_coo
    torch.testing.assert_close(got.to_dense(), emb.weight.grad.to_dense())


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


def test_fusegrad_log_shows_compile_stages():
    """FUSEGRAD_LOG=debug: the log goes to stderr, with the compile time of each stage."""
    import subprocess
    import sys

    code = ("import torch, fusegrad\n"
            "fusegrad.compile(lambda x: x.sin().sum())(torch.randn(4, requires_grad=True))\n")
    env = {**os.environ, "FUSEGRAD_LOG": "debug", "FUSEGRAD_CACHE": "0"}
    err = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stderr
    (line,) = [x for x in err.splitlines() if "compiled in" in x]
    assert line.startswith("[fusegrad.frontend.backend DEBUG] graph")
    for stage in ("capture", "import", "autodiff", "remat", "fused", "cpu-linalg", "llvm-codegen"):
        assert f"{stage} " in line, line


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


def test_an_unwritable_dump_dir_warns_and_still_compiles(tmp_path, caplog):
    import logging

    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the dump directory would be
    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="fusegrad"):
        warnings.simplefilter("error", FusegradFallbackWarning)
        compiled(f_pointwise, dump_dir=str(blocker / "dump"))(x, y).sum().backward()
    assert any("FUSEGRAD_DUMP: cannot write" in r.getMessage() for r in caplog.records)
    twin = x.detach().requires_grad_()
    f_pointwise(twin, y).sum().backward()
    torch.testing.assert_close(x.grad, twin.grad)


@pytest.mark.parametrize("mode, cuda_graphs", [("default", "auto"), ("reduce-overhead", True),
                                               ("max-autotune", True),
                                               ("max-autotune-no-cudagraphs", False)])
def test_torch_compile_modes_compile_with_fusegrad(mode, cuda_graphs):
    from fusegrad.frontend.backend import backend_options

    assert backend_options(mode=mode).cuda_graphs == cuda_graphs
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        out = torch.compile(f_pointwise, backend="fusegrad", mode=mode)(x, y)
        torch._dynamo.reset()
        same = fusegrad.compile(f_pointwise, mode=mode)(x, y)  # fusegrad.compile takes it too
    torch.testing.assert_close(out, f_pointwise(x, y))
    torch.testing.assert_close(same, f_pointwise(x, y))


def test_unknown_option_or_mode_is_an_error_not_a_silent_fallback():
    from torch._dynamo.exc import BackendCompilerFailed

    x, y = torch.randn(2, 3), torch.randn(2, 3)
    torch._dynamo.reset()
    with pytest.raises(BackendCompilerFailed, match=r"unknown option\(s\) \['fuse'\]; the "
                                                    r"options are \['channels_last', 'cuda_graphs'"):
        torch.compile(f_pointwise, backend="fusegrad", options={"fuse": False})(x, y)
    torch._dynamo.reset()
    with pytest.raises(BackendCompilerFailed, match="mode='fast' is not one of"):
        torch.compile(f_pointwise, backend="fusegrad", mode="fast")(x, y)
    with pytest.raises(ValueError, match="mode='fast' is not one of"):
        fusegrad.compile(f_pointwise, mode="fast")


def _graphs_of_first_call(model: torch.nn.Module, x: torch.Tensor) -> int:
    from torch._dynamo.utils import counters

    before = counters["stats"]["unique_graphs"]
    fusegrad.compile(model)(x)
    return counters["stats"]["unique_graphs"] - before


def test_every_compiled_torch_nn_module_compiles_not_just_the_first_eight():
    """Dynamo enters torch.nn modules through one shared code object, whose recompile
    limit is 8: the ninth nn.Sequential ran eagerly before `own_top_frame`."""
    graphs = [_graphs_of_first_call(torch.nn.Sequential(torch.nn.Linear(4 + i, 8),
                                                        torch.nn.ReLU()), torch.randn(2, 4 + i))
              for i in range(10)]
    assert graphs == [1] * 10


def _decorated(forward):
    """A decorator like HuggingFace's `can_return_tuple`: one wrapper code object."""
    @functools.wraps(forward)
    def wrapper(self, *args, **kwargs):
        return forward(self, *args, **kwargs)
    return wrapper


def test_every_compiled_model_with_a_decorated_forward_compiles():
    """Every HuggingFace model's forward is entered through one decorator's wrapper, whose
    code object they all share: the ninth model compiled in a process ran eagerly."""
    def model(width: int) -> torch.nn.Module:
        class Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.linear = torch.nn.Linear(4, width)

            @_decorated
            def forward(self, x):
                return self.linear(x).relu()
        return Model()
    graphs = [_graphs_of_first_call(model(4 + i), torch.randn(2, 4)) for i in range(10)]
    assert graphs == [1] * 10


def test_reaching_dynamos_recompile_limit_is_a_fallback_warning():
    """Dynamo only logs that it stopped compiling a function; fusegrad warns."""
    f = fusegrad.compile(lambda x, flag: x + 1 if flag else x - 1)
    x = torch.randn(3)
    with torch._dynamo.config.patch(recompile_limit=1):
        f(x, True)
        with pytest.warns(FusegradFallbackWarning, match=r"torch._dynamo.config.recompile_limit \(1\) at .*run eagerly"):
            assert torch.equal(f(x, False), x - 1)


def test_a_module_dynamo_gives_up_on_does_not_turn_off_later_ones():
    """Dynamo cannot trace nn.GRU and marks the frame it entered "won't convert"; that
    frame used to be every torch.nn module's."""
    from fusegrad.frontend.backend import FusegradEagerOpWarning

    with pytest.warns(FusegradEagerOpWarning, match=r"the model \(nn.GRU\)"):
        gru = fusegrad.compile(torch.nn.GRU(4, 8, batch_first=True))
    gru(torch.randn(2, 3, 4))
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU())
    assert _graphs_of_first_call(model, torch.randn(2, 4)) == 1
    report = fusegrad.explain(torch.nn.Sequential(torch.nn.Linear(4, 2)), torch.randn(2, 4))
    assert len(report.graphs) == 1


class _Tagger(torch.nn.Module):
    def __init__(self, rnn: type):
        super().__init__()
        self.embed = torch.nn.Linear(4, 8)
        self.rnn = rnn(8, 8, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x):
        y, _ = self.rnn(torch.tanh(self.embed(x)))
        return self.head(y).logsumexp(-1).sum()


@pytest.mark.parametrize("rnn", [torch.nn.GRU, torch.nn.LSTM])
def test_recurrent_modules_compile_around_lstm_or_say_they_run_eagerly(rnn):
    """Dynamo gives up on a forward calling nn.LSTM/GRU/RNN. With LSTMs only, fusegrad
    traces them (PyTorch's LSTM kernel runs inside the graph, the rest compiles);
    otherwise it says, once, that the model runs eagerly and how to trace it. Either
    way it trains like eager."""
    from torch._dynamo.utils import counters

    from fusegrad.frontend.backend import FusegradEagerOpWarning

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = _Tagger(rnn)
    reference = copy.deepcopy(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = fusegrad.compile(model)
        x = torch.randn(2, 5, 4)
        loss = compiled(x)
        loss.backward()
    messages = [str(w.message) for w in caught if issubclass(w.category, FusegradEagerOpWarning)]
    graphs = counters["stats"].get("unique_graphs", 0)
    if rnn is torch.nn.GRU:
        assert len(messages) == 1 and messages[0].startswith(
            "fusegrad does not compile rnn (nn.GRU): Dynamo does not trace recurrent modules "
            "and then runs the whole model eagerly. Set torch._dynamo.config.allow_rnn = True")
        assert graphs == 0
    else:
        assert graphs == 1 and messages and all(
            "mkldnn_rnn_layer" in m and "LSTM kernel (oneDNN), kept as it is by design" in m
            for m in messages), messages
        assert not torch._dynamo.config.allow_rnn  # on in this model's calls only
    want = reference(x)
    want.backward()
    torch.testing.assert_close(loss, want)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


@pytest.mark.parametrize("shape, perm", [
    ((128, 32, 64), (1, 2, 0)),  # attention heads: rows 8 KiB apart, 16 x 16 tiles
    ((40, 8, 32), (1, 2, 0)),  # rows 1 KiB apart, partial tiles (40 = 2 x 16 + 8)
    ((2, 64, 16, 16), (0, 2, 3, 1)),  # NCHW -> NHWC
    ((30, 20, 50), (1, 2, 0)),  # other strides keep dim order
    ((256, 512), (1, 0)),  # 2-D: the kernel runs over blocks of 16 input rows
    ((264, 256), (1, 0)),  # 2-D, partial tiles staged by scalar loops
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_transposing_copies_and_their_gradients_match_eager(shape, perm, dtype):
    def f(x):
        return (x.permute(perm) * 0.5 + 1.0).contiguous()
    x = torch.randn(shape, dtype=dtype, requires_grad=True)
    dy = torch.randn(f(x).shape, dtype=dtype)
    y = compiled(f)(x)
    (g,) = torch.autograd.grad(y, x, dy)
    y_ref = f(x)
    (g_ref,) = torch.autograd.grad(y_ref, x, dy)
    assert torch.equal(y, y_ref) and torch.equal(g, g_ref)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_float_matmuls_accumulate_in_f32_like_eager(dtype):
    """bf16/f16 products call PyTorch's kernel (f32 accumulation), transposed operands
    included; linalg's loops had accumulated in bf16, 9x further from the exact product."""
    torch.manual_seed(0)
    a, b = torch.randn(3, 64, 96).to(dtype), torch.randn(3, 128, 96).to(dtype)
    for f in (lambda a, b: a @ b.transpose(1, 2), lambda a, b: a[0] @ b[1].t(),
              lambda a, b: (a.transpose(1, 2) @ a) * 2):
        torch._dynamo.reset()
        assert torch.equal(compiled(f)(a, b), f(a, b))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_float_linear_layers_round_once_like_eager(dtype):
    """PyTorch's addmm decomposition widens 16-bit floats to f32; dg-narrow-matmuls runs
    the products on the 16-bit values, the bias as the gemm's accumulator (rounded once,
    as eager's addmm), backward products too: bitwise eager's forward, under autocast as
    well, and eager's gradients."""
    torch.manual_seed(0)
    x, w, bias = torch.randn(4, 16, 64), torch.randn(32, 64), torch.randn(32)
    f = torch.nn.functional.linear
    torch._dynamo.reset()
    args = [t.to(dtype).requires_grad_() for t in (x, w, bias)]
    got, want = compiled(f)(*args), f(*args)
    assert torch.equal(got, want)
    cotangent = torch.randn_like(want)
    for g, e in zip(torch.autograd.grad(got, args, cotangent),
                    torch.autograd.grad(want, args, cotangent)):
        torch.testing.assert_close(g, e)
    torch._dynamo.reset()
    with torch.autocast("cpu", dtype=dtype):
        assert torch.equal(compiled(f)(x, w, bias), f(x, w, bias))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_float_sums_accumulate_in_f32_like_eager(dtype):
    """A variance (the importer's own reduce_sums) and a bias gradient (autodiff's) of 4096
    values: accumulated in bf16, the variance had come out 2.0 instead of 1.0."""
    torch.manual_seed(0)
    x = (torch.randn(8, 4096) + 3).to(dtype)
    torch.testing.assert_close(compiled(lambda a: a.var(1))(x), x.var(1))
    bias = torch.zeros(64, dtype=dtype, requires_grad=True)
    h = torch.randn(4096, 64).to(dtype)
    (got,) = torch.autograd.grad(compiled(lambda b: (h + b).float().square().sum())(bias), bias)
    (want,) = torch.autograd.grad((h + bias).float().square().sum(), bias)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("n", [9, 10, 14, 15, 16])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_small_16_bit_float_transposes_compile(n, dtype):
    """LLVM's SLP vectorizer turned a 9 x 9 bf16 transpose into a masked load of a
    <75 x bfloat> vector, on which the X86 backend with AVX512-BF16 asserted and aborted
    the process (dg-half-loads-as-i16)."""
    x = torch.randn(n, n).to(dtype)
    assert torch.equal(compiled(lambda a: a.t().contiguous())(x), x.t())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_float_reductions_link_without_avx512_bf16(dtype):
    """An outlined reduction loop took its running max as a bf16 argument: on a CPU
    without AVX512-BF16 LLVM narrowed it with __truncsfbf2, which the JIT could not
    find (libgcc_s before GCC 13), and the graph ran eagerly (dg-half-loads-as-i16)."""
    x = torch.randn(7, 9).to(dtype)
    assert torch.equal(compiled(torch.max)(x), torch.max(x))
    assert torch.equal(compiled(lambda a: torch.amax(a, 1))(x), torch.amax(x, 1))


@pytest.mark.parametrize("shape, dim", [((3, 1000), 1), ((1000, 3), 0), ((2, 300, 5), 1),
                                        ((200,), 0), ((4, 129), -1)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64])
def test_long_cumsums_run_in_blocks_and_match_eager(shape, dim, dtype):
    # longer than CUMSUM_DIRECT_MAX: prefix sums within blocks plus the blocks' carries
    x = torch.randint(-3, 4, shape).to(dtype)
    if dtype.is_floating_point:
        x = x + torch.rand(shape, dtype=dtype)
    y = compiled(lambda t: t.cumsum(dim))(x)
    assert y.dtype == x.cumsum(dim).dtype
    torch.testing.assert_close(y, x.cumsum(dim), rtol=1e-12, atol=1e-12)
    if dtype.is_floating_point:
        x.requires_grad_(True)
        # along random directions: a full numerical Jacobian of 3000 elements took 45 s
        assert torch.autograd.gradcheck(compiled(lambda t: t.cumsum(dim).sin()), (x,),
                                        fast_mode=True)


def test_concatenations_written_by_one_row_kernel_match_eager():
    # parts along dim 1 share a row kernel (subviews keep rows); along dim 0 they do not
    def f(x, y):
        wide = torch.cat([x * 2, y.exp(), x - y], 1) * 3
        tall = torch.cat([x, y[:7] + 1], 0).sum(1)
        return wide.softmax(-1), tall
    x, y = torch.randn(33, 40, requires_grad=True), torch.randn(33, 40, requires_grad=True)
    out, ref = compiled(f)(x, y), f(x, y)
    torch.testing.assert_close(out, ref)
    grads = torch.autograd.grad([o.sum() for o in out], (x, y))
    torch.testing.assert_close(grads, torch.autograd.grad([o.sum() for o in ref], (x, y)))


def test_data_dependent_sizes_stop_compiling_when_no_signature_is_reused(monkeypatch):
    """x[mask] has a new size at nearly every call: once a graph has compiled
    SIGNATURES_BEFORE_REUSE_CHECK signatures and most calls brought a new one, new ones
    run eagerly (one warning naming the inputs); sizes that recur keep compiling."""
    from fusegrad.frontend import backend

    monkeypatch.setattr(backend, "SIGNATURES_BEFORE_REUSE_CHECK", 3)

    def f(x, mask):
        return (x[mask] * 2).sum()
    torch._dynamo.reset()
    cf = fusegrad.compile(f)
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


@pytest.mark.parametrize("size,stride,offset", [((2, 2), (1, 2), 1), ((2, 2), (2, 1), 0),
                                                ((3,), (4,), 0)])
def test_as_strided_scatter_writes_the_view(size, stride, offset):
    """x with src written into as_strided(x, size, stride, offset): a scatter at the
    view's positions. Gradients by gradcheck: eager's own gradient for x is the view's
    complement here (it fails gradcheck for the first two views)."""
    def f(x, src):
        return torch.as_strided_scatter(x * 2, src * 3, size, stride, offset)
    x = torch.randn(3, 3, dtype=torch.float64, requires_grad=True)
    src = torch.randn(size, dtype=torch.float64, requires_grad=True)
    cf = compiled(f)
    torch.testing.assert_close(cf(x, src), f(x, src))
    assert torch.autograd.gradcheck(cf, (x, src))

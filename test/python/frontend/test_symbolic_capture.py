"""Capture and import for every size (`capture_symbolic`): Dynamo graphs traced with their
symbolic example values import to dg functions of symbolic sizes, which the reference
interpreter runs at sizes other than the traced ones, matching eager."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn
from mlir import ir

from fusegrad.context import make_context
from fusegrad.dialects.interpreter import run_function
from fusegrad.dialects.types import SIZE_HINTS_ATTR, TensorSpec, size_hints
from fusegrad.frontend.capture import capture_symbolic
from fusegrad.frontend.importer import import_graph
from fusegrad.runtime import abi


class SymbolicBackend:
    """A Dynamo backend that captures and imports each graph once for every size, and
    runs the dg function with the reference interpreter at each call."""

    def __init__(self) -> None:
        self.ctx = make_context()
        self.graphs: list[tuple] = []  # (captured, module)

    def __call__(self, gm, example_inputs):
        captured = capture_symbolic(gm, example_inputs)
        module = import_graph(captured.gm, ctx=self.ctx)
        self.graphs.append((captured, module))
        (fn,) = [op for op in module.body.operations]
        symbolic = captured.symbolic

        def call(*args):
            inputs = [*captured.lifted, *[args[i] for i in symbolic.where]]
            for i in symbolic.unguarded:
                assert args[i] == symbolic.numbers[i]
            tensors = [inputs[k].detach() for k in symbolic.tensors]
            sizes = {name: inputs[k] for name, k in symbolic.scalars.items()}
            with self.ctx:
                outputs = run_function(fn, tensors, sizes)
            return captured.finish(inputs, outputs)
        return call


def compiled(fn, backend):
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, dynamic=True)


def check(fn, backend, inputs_at_sizes, atol=1e-5, grad=False):
    """`fn` compiled by `backend` against eager at each size; `grad`: called with grad
    enabled (an eval TransformerEncoderLayer under no_grad takes PyTorch's fused kernel)."""
    f = compiled(fn, backend)
    with torch.set_grad_enabled(grad):
        for args in inputs_at_sizes:
            want, got = fn(*args), f(*args)
            want = torch.utils._pytree.tree_map(lambda t: t.detach(), want)
            torch.testing.assert_close(got, want, atol=atol, rtol=1e-5)


def test_mlp_dynamic_batch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4))
    backend = SymbolicBackend()
    check(model, backend, [(torch.randn(n, 8),) for n in (5, 3, 17)])
    assert len(backend.graphs) == 1  # one compile served every batch size
    captured, module = backend.graphs[0]
    assert captured.symbolic.hints == {"s0": 5}
    (fn,) = module.body.operations
    args = [TensorSpec.from_mlir(t) for t in fn.type.inputs]
    assert [a.shape for a in args if not a.is_static] == [(abi.symbol("s0"), 8)]


def test_ir_has_symbolic_dims_and_hints():
    model = nn.Linear(8, 4)
    backend = SymbolicBackend()
    with torch.no_grad():
        compiled(lambda x: model(x).softmax(-1).mean(0), backend)(torch.randn(3, 7, 8))
    (captured, module), = backend.graphs
    text = str(module)
    assert re.search(r'tensor<\?x\?x8xf32, "s0, s1">', text), text
    assert "dg.size_hints = {s0 = 3 : i64, s1 = 7 : i64}" in text
    with backend.ctx:
        assert size_hints(module.operation) == {"s0": 3, "s1": 7}
        assert SIZE_HINTS_ATTR in module.operation.attributes
        again = ir.Module.parse(text)  # the sizes' text parses back
        (fn,) = again.body.operations
        by_shape = {(4, 8): model.weight.detach(), (4,): model.bias.detach()}
        x = torch.randn(5, 2, 8)
        args = [by_shape.get(TensorSpec.from_mlir(t).shape, x) for t in fn.type.inputs]
        (out,) = run_function(fn, args)
    torch.testing.assert_close(out, model(x).softmax(-1).mean(0).detach())
    assert sorted(captured.symbolic.symbols) == ["s0", "s1"]  # dg's names -> Dynamo's
    # Dynamo passes each size as an integer input too: not an argument of the function
    assert len(captured.symbolic.tensors) == len(args)
    assert set(captured.symbolic.integers.values()) == {abi.symbol("s0"), abi.symbol("s1")}


def test_transformer_encoder_layer_dynamic_batch_and_sequence():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True).eval()
    backend = SymbolicBackend()
    check(layer, backend, [(torch.randn(b, t, 32),) for b, t in ((3, 7), (2, 5), (4, 11))],
          atol=1e-4, grad=True)
    assert len(backend.graphs) == 1


def test_slices_views_and_sources():
    """Symbolic slice bounds (negative, INT64_MAX, a size), views with -1, arange/full/
    zeros/new_*/empty of symbolic sizes, means over symbolic dims, sizes read as values."""
    def fn(x, y):
        b, t, _ = x.shape
        a = x[:, 1:, :] - x[:, :-1, :]
        w = y[:, :t - 2]
        pos = torch.arange(t - 1, dtype=torch.float32)
        z = (a * pos[None, :, None]).sum((1, 2))
        ones = x.new_ones(b, t)
        full = torch.full((t,), t, dtype=torch.float32) + torch.empty(b, t).fill_(1.0).sum(0)
        return (z + w.mean(1) + ones.sum(1) / t + full.mean() + x.mean((0, 1)).sum(),
                torch.zeros(b, t - 1).flatten(), x.view(-1, 4).mean(0) * b)
    backend = SymbolicBackend()
    check(fn, backend, [(torch.randn(b, t, 4), torch.randn(b, t + 3))
                        for b, t in ((3, 6), (2, 9), (5, 4))])
    assert len(backend.graphs) == 1


def test_size_arithmetic():
    """Sizes read as values and computed with (sym_size, sym_numel, sym_stride, operator's
    floordiv/mod/neg/mul, sym_max/sym_min, a float power of a size), symbolic slice starts,
    a concatenation of parts that may be empty, a runtime assertion Dynamo's ranges ensure."""
    def fn(x):
        b, t, c = x.shape
        torch._check(t >= 2)
        past, cur = x[:, :3], x[:, 3:]
        pos = torch.arange(past.shape[1], past.shape[1] + cur.shape[1])
        y = torch.cat([past, cur * pos[None, :, None]], 1)
        return (y.sum(1) / x.numel() + x.stride(0) - t,
                torch.full((t // 2,), t % 3, dtype=torch.float32) * (-b) + x[0, 0, 0],
                x[:, :torch.sym_max(t - 2, 1)].clone(), x[:, torch.sym_min(t, 3):].clone(),
                x[:, t - 3:].clone(), x[:, -2:].clone(), torch.arange(0, t, 2),
                x * (t ** -0.5), x.var(1), x.std((0, 1)), x[:, -1].clone())
    backend = SymbolicBackend()
    check(fn, backend, [(torch.randn(b, t, 4),) for b, t in ((3, 6), (2, 9), (5, 7))])
    assert len(backend.graphs) == 1


def test_cnn_with_dynamic_batch():
    """Convolutions, batch norm and pooling with the batch marked dynamic (spatial sizes
    static: through a strided convolution, symbolic ones reach sympy floors the dialect's
    shape rules cannot compare yet)."""
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, stride=2), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(8, 5)).eval()
    backend = SymbolicBackend()
    torch._dynamo.reset()
    f = torch.compile(cnn, backend=backend)
    with torch.no_grad():
        for n in (3, 2, 5):
            x = torch.randn(n, 3, 16, 16)
            torch._dynamo.mark_dynamic(x, 0)
            torch.testing.assert_close(f(x), cnn(x), atol=1e-4, rtol=1e-4)
    assert len(backend.graphs) == 1


def test_indexing_scans_and_selection():
    """Advanced indexing (broadcast index shapes, negative wrapping), a float cumsum along
    a symbolic dim, topk over one, attention with a padding mask."""
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 2, batch_first=True)

    def fn(x, i, h, mask):
        return (x[i], x.index_select(0, i % x.shape[0]), x[i[:, None], i[None, :] % x.shape[1]],
                torch.cumsum(x, 0), x.topk(2, 0)[0], x.argmax(0),
                mha(h, h, h, key_padding_mask=mask, need_weights=False)[0])
    backend = SymbolicBackend()
    check(fn, backend, [(torch.randn(b, 6), torch.randint(-b, b, (b,)), torch.randn(b, t, 16),
                         torch.rand(b, t) > 0.7) for b, t in ((3, 7), (5, 4), (8, 9))],
          atol=1e-4)
    assert len(backend.graphs) == 1


def test_an_integer_input_that_is_no_size_is_a_size_of_its_own():
    """An integer no tensor's shape gives (a slice bound, a scale) is a dg size after the
    tensors' sizes, which the caller passes (`symbolic.scalars`: name -> position)."""
    backend = SymbolicBackend()
    check(lambda x, n: x[:, :n] * n, backend, [(torch.randn(b, 6), n) for b, n in
                                               ((3, 4), (5, 2), (2, 3))])
    assert len(backend.graphs) == 1
    captured, module = backend.graphs[0]
    # Dynamo's inputs: x's two sizes, x, n; the tensors' sizes come first in dg's names
    assert captured.symbolic.scalars == {"s2": 3}
    assert captured.symbolic.integers[3] == abi.symbol("s2")
    assert size_hints(module.body.operations[0]) == {"s0": 3, "s1": 6, "s2": 4}


def test_a_view_of_symbolic_geometry_keeps_it_in_dg_sizes():
    """An output that is a view of an input records its size, stride and offset as dg
    size expressions, evaluated at each call: the caller gets a view at every size."""
    backend = SymbolicBackend()
    fn = compiled(lambda x: x[:, 1:], backend)
    for rows, cols in ((3, 6), (5, 4)):
        x = torch.randn(rows, cols)
        got = fn(x)
        torch.testing.assert_close(got, x[:, 1:])
        assert got.data_ptr() == x.data_ptr() + 4 and got.stride() == (cols, 1)
    (captured, _), = backend.graphs
    (view,) = captured.output_views
    assert view.symbolic and [str(d) for d in view.size] == ["s0", "s1 - 1"]


def test_numbers_baked_in():
    """A float Dynamo does not specialize is a 0-d tensor read by .item(): baked in, and
    named as unguarded for the caller to check."""
    seen = []

    def backend(gm, example_inputs):
        captured = capture_symbolic(gm, example_inputs)
        seen.append(captured.symbolic)
        return gm
    compiled(lambda x, scale: x * scale, backend)(torch.randn(3), 0.5)
    (symbolic,) = seen
    if symbolic.numbers:  # Dynamo's float handling: unspecialized (a tensor) or a guard
        (position, value), = symbolic.numbers.items()
        assert value == 0.5 and position not in symbolic.where


def test_arguments_as_the_backend_passes_them_at_a_call():
    """Captured at a call, as LazyGraph would: its graph's .item() reads of unspecialized
    floats removed, the floats passed as numbers and the integers as ints. The integers
    stay sizes (not baked in), the floats are baked in."""
    from fusegrad.frontend.backend import _read_floats
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16))
    calls = []

    def backend(gm, example_inputs):
        floats = _read_floats(gm)
        state = {}

        def call(*args):
            if not state:
                numbers = [a.item() if i in floats else a for i, a in enumerate(args)]
                captured = capture_symbolic(gm, numbers)
                state.update(captured=captured, module=import_graph(captured.gm, ctx=ctx))
            captured, symbolic = state["captured"], state["captured"].symbolic
            assert all(isinstance(args[i], int) for i in symbolic.where
                       if not isinstance(args[i], torch.Tensor))
            inputs = [*captured.lifted, *[args[i] for i in symbolic.where]]
            with ctx:
                (fn,) = state["module"].body.operations
                out = run_function(fn, [inputs[k].detach() for k in symbolic.tensors])
            calls.append(args)
            return captured.finish(inputs, out)
        return call
    ctx = make_context()
    f = compiled(model, backend)
    with torch.no_grad():
        for n in (5, 3, 9):
            x = torch.randn(n, 8)
            torch.testing.assert_close(f(x), model(x))
    assert len(calls) == 3


def test_view_after_slice():
    def fn(x):
        return x[:, 1:].reshape(x.shape[0], -1) * 2  # (a view of x would be no copy)
    check(fn, SymbolicBackend(), [(torch.randn(b, t, 4),) for b, t in ((3, 6), (2, 9))])


def test_gpt2_forward_with_loss():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=256,
                                     n_positions=128, resid_pdrop=0, embd_pdrop=0,
                                     attn_pdrop=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    backend = SymbolicBackend()

    def loss(ids):
        return model(input_ids=ids, labels=ids).loss
    check(loss, backend, [(torch.randint(0, 256, (b, t)),) for b, t in ((3, 11), (2, 7), (4, 16))],
          atol=1e-4)
    assert len(backend.graphs) >= 2  # transformers breaks the graph at the loss
    for captured, module in backend.graphs:
        assert "dg.size_hints" in str(module)



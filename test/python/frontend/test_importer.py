"""Importer unit tests: locations, unsupported ops, type checks, random-op seeds."""
from __future__ import annotations

import math
import operator

import pytest
import torch
from mlir import ir
from torch.func import functionalize
from torch.fx.experimental.proxy_tensor import make_fx

import fusegrad
from fusegrad.frontend.capture import capture
from fusegrad.context import make_context
from fusegrad.frontend.decompositions import DECOMPOSITIONS
from fusegrad.dialects.interpreter import run_function
from fusegrad.frontend.importer import (SEED_ATTR, ImporterError, UnsupportedOp, import_graph,
                                        user_frame)

aten = torch.ops.aten


def trace(fn, *args):
    """A functional core-ATen graph with user stack traces, like capture's from Dynamo."""
    with torch.no_grad():
        return make_fx(functionalize(fn, remove="mutations_and_views"),
                       decomposition_table=DECOMPOSITIONS, record_stack_traces=True)(*args)


def dynamo_trace(fn, *args):
    """The user path: Dynamo's graph (with stack traces) through fusegrad's capture."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(capture(gm, example_inputs).gm)
        return gm
    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    return graphs[0]


@pytest.fixture(autouse=True)
def ctx():
    """Every test runs inside one dg-enabled MLIR context (IR dies with its context)."""
    context = make_context()
    with context:
        yield context


def import_and_run(gm, args):
    module = import_graph(gm)
    func_op = module.body.operations[0]
    return module, func_op, run_function(func_op, list(args))


def _user_line(fn) -> int:
    return fn.__code__.co_firstlineno + 1


def test_location_names_aten_op_and_user_line():
    def f(x):
        return torch.exp(x)  # the line the location must point at

    module, func_op, _ = import_and_run(dynamo_trace(f, torch.randn(3)), [torch.randn(3)])
    op = next(o for o in func_op.regions[0].blocks[0].operations if o.operation.name == "dg.exp")
    loc = str(op.location)
    assert "aten.exp.default" in loc
    assert f"{__file__}\":{_user_line(f)}" in loc


def test_user_frame_skips_library_frames():
    trace_text = (f'  File "{__file__}", line 7, in f\n    y = g(x)\n'
                  f'  File "{torch.__file__}", line 99, in g\n    return h(x)\n')
    assert user_frame(trace_text)[:2] == (__file__, 7)
    assert user_frame(None) is None


def test_unsupported_op_names_op_and_line():
    def f(x):
        return torch.special.i0(x)

    gm = dynamo_trace(f, torch.randn(4))
    with pytest.raises(UnsupportedOp) as info:
        import_and_run(gm, [torch.randn(4)])
    assert info.value.op_name == "aten.i0.default"
    msg = str(info.value)
    assert "aten.i0.default" in msg and f"test_importer.py:{_user_line(f)}" in msg
    assert info.value.node.target is torch.ops.aten.i0.default  # what graph_split blames


def test_unsupported_kwarg_raises_instead_of_wrong_numbers():
    def f(x, grid):
        return torch.nn.functional.grid_sample(x, grid, mode="bicubic", align_corners=False)

    x, grid = torch.randn(1, 2, 5, 4), torch.rand(1, 3, 3, 2)
    with pytest.raises(UnsupportedOp, match="bicubic grid_sample"):
        import_and_run(trace(f, x, grid), [x, grid])


def test_meta_mismatch_is_an_internal_error():
    gm = trace(lambda x: x * 2, torch.randn(3))
    node = next(n for n in gm.graph.nodes if n.target is aten.mul.Tensor)
    node.meta["val"] = torch.empty(4)  # PyTorch "says" 4 elements: the mapping gives 3
    with pytest.raises(ImporterError, match="mul"):
        import_and_run(gm, [torch.randn(3)])


def test_promotion_and_broadcast_are_explicit():
    def f(x, i):
        return x + i, (i < 2.5)

    x, i = torch.randn(2, 3), torch.arange(3, dtype=torch.int32)
    module, _, (s, lt) = import_and_run(trace(f, x, i), [x, i])
    text = str(module)
    assert "dg.convert" in text and "dg.broadcast_in_dim" in text
    torch.testing.assert_close(s, x + i)
    assert torch.equal(lt, i < 2.5)


def test_scaling_by_one_is_not_a_multiplication():
    """A decomposed addmm scales by alpha = beta = 1: importing those as multiplications
    kept the matmul result from BLAS's transpose flags (a strided copy per layer)."""
    def f(b, x, w, i):
        return torch.addmm(b, x, w), x * 1, 1 * x, x / 1, i * 1.0

    b, x, w, i = torch.randn(4), torch.randn(3, 5), torch.randn(5, 4), torch.arange(3)
    module, _, outs = import_and_run(trace(f, b, x, w, i), [b, x, w, i])
    text = str(module)
    assert "dg.mul" not in text and "dg.div" not in text
    want = f(b, x, w, i)
    for got, expected in zip(outs, want):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)


def test_tuple_outputs_are_flattened():
    def f(x):
        return (x.sin(), (x.cos(), x.exp()))

    x = torch.randn(5)
    module, func_op, outs = import_and_run(trace(f, x), [x])
    assert len(outs) == 3
    torch.testing.assert_close(outs[2], x.exp())


def test_non_tensor_output_is_rejected():
    gm = trace(lambda x: x + 1, torch.randn(2))
    out = next(n for n in gm.graph.nodes if n.op == "output")
    out.args = ((out.args[0], 3),)
    with pytest.raises(UnsupportedOp, match="non-tensor"):
        import_and_run(gm, [torch.randn(2)])


def test_max_pool_indices_when_used():
    def f(x):
        v, i = torch.nn.functional.max_pool2d(x, 3, 2, 1, return_indices=True)
        return v, i

    x = torch.randn(2, 3, 7, 6)
    x[0, 0, :3, :3] = float("nan")
    _, _, (v, i) = import_and_run(trace(f, x), [x])
    ev, ei = f(x)
    torch.testing.assert_close(v, ev, equal_nan=True)
    assert torch.equal(i, ei)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_topk_orders_like_a_stable_sort(largest, dtype):
    """Ties, infinities and NaN (the largest value) in the order of a stable sort."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, -inf, 3.0, -inf, -inf, 1.0], [nan, 2.0, nan, inf, -inf, inf],
                      [-inf, -inf, -inf, 2.0, -inf, -inf], [1.0, 1.0, 0.0, 1.0, nan, 1.0]])
    if dtype == torch.int64:
        x = torch.tensor([[2, 2, -3, 9, 2, -3], [0, -(2 ** 63), 2 ** 63 - 1, 0, 5, 5],
                          [1, 1, 1, 1, 1, 1], [4, -1, 4, -1, 7, 4]])
    for dim, k in ((1, 1), (1, 4), (1, 6), (0, 3)):
        _, _, (v, i) = import_and_run(trace(lambda t: torch.topk(t, k, dim, largest), x), [x])
        ev, ei = torch.sort(x, stable=True, dim=dim, descending=largest)
        assert torch.equal(i, ei.narrow(dim, 0, k)), (dim, k)
        torch.testing.assert_close(v, ev.narrow(dim, 0, k), equal_nan=True)


def test_topk_beyond_its_rounds_sorts():
    x = torch.randn(2, 40)
    _, _, (v, i) = import_and_run(trace(lambda t: torch.topk(t, 17), x), [x])
    ev, ei = torch.sort(x, descending=True, stable=True)
    assert torch.equal(i, ei[:, :17]) and torch.equal(v, ev[:, :17])
    with pytest.raises(UnsupportedOp, match="topk with k=17"):
        import_graph(trace(lambda t: torch.topk(t, 17), torch.randn(2, 9000)))


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_sort_is_stable_with_nan_largest(descending, dtype):
    """The bitonic network orders like eager's stable sort: ties by index, NaN largest,
    any length (padded to a power of two), any dim."""
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, -inf, 3.0, -inf, nan, 1.0, 2.0], [nan, 2.0, nan, inf, -inf, inf, 0.0],
                      [0.0, -0.0, 0.0, 1.0, 1.0, -1.0, nan]])
    if dtype != torch.float32:
        x = torch.randint(-2, 2, (3, 7)).to(dtype)
    for dim in (0, 1):
        _, _, (v, i) = import_and_run(trace(lambda t: torch.sort(t, dim, descending), x), [x])
        ev, ei = torch.sort(x, dim=dim, descending=descending, stable=True)
        assert torch.equal(i, ei), dim
        torch.testing.assert_close(v, ev, equal_nan=True)


@pytest.mark.parametrize("view", ["contiguous", "transposed", "sliced"])
def test_as_strided_gathers_at_storage_positions(view):
    """diagonal/trace decompose to as_strided, which reads storage: of a contiguous
    operand by computed offsets, of a strided view (Dynamo keeps views) through a table."""
    def f(x):
        y = {"contiguous": x, "transposed": x.t(), "sliced": x[1:, 1:]}[view]
        return torch.diagonal(y, 1) * 2, torch.trace(y), torch.einsum("ii->i", y[:2, :2])

    x = torch.randn(5, 5)
    _, _, got = import_and_run(dynamo_trace(f, x), [x])
    for g, e in zip(got, f(x)):
        torch.testing.assert_close(g, e)


def test_as_strided_outside_its_operand_is_unsupported():
    with pytest.raises(UnsupportedOp, match="as_strided view outside its operand"):
        import_graph(dynamo_trace(lambda x: x[:2].as_strided((3,), (2,), 1) * 2,
                                  torch.randn(4, 2)))


def test_index_factories_are_constants():
    def f(x):
        lower = torch.tril_indices(4, 3, -1)
        return x[lower[0], lower[1]], torch.triu_indices(3, 4, 1), torch.eye(3, 4) * x[0, 0]

    x = torch.randn(4, 3)
    _, _, got = import_and_run(dynamo_trace(f, x), [x])
    for g, e in zip(got, f(x)):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("op", ["prod", "cumprod"])
def test_products_differentiate_through_zeros(op):
    """The gradient at a zero (one zero: the product of the others; two: zero), and its
    derivative: prod is a tree of multiplications, cumprod's gradient is eager's
    formula, whose own derivative is exact around zeros (dg.scan_mul_grad)."""
    x = torch.randn(3, 7, dtype=torch.float64)
    x[0, 2] = 0.0
    x[1, 1] = x[1, 5] = 0.0

    def f(t):
        return t.prod(1) if op == "prod" else torch.cumprod(t, 1)
    torch.autograd.gradcheck(fusegrad.compile(f), (x.requires_grad_(),))
    torch.autograd.gradgradcheck(fusegrad.compile(f), (x,))


@pytest.mark.parametrize("n", [6, 300], ids=["short", "long"])
@pytest.mark.parametrize("dim", [0, 1])
def test_cumsum_of_nan_and_infinities_spoils_only_the_later_sums(dim, n):
    """A -inf (a masked log-probability) spoils only the later sums of its row, +inf then
    -inf makes NaN from there on, as in eager's loop (prefix sums written as matmuls
    with a triangle of ones made every earlier sum NaN)."""
    torch.manual_seed(0)
    x = torch.randn(5, n) if dim else torch.randn(n, 5)
    for row, (k, value) in enumerate([(3, -math.inf), (1, math.nan), (4, math.inf),
                                      (0, math.inf), (2, -math.inf)]):
        x[(row, k) if dim else (k, row)] = value
    x[(3, 5) if dim else (5, 3)] = -math.inf  # +inf then -inf: NaN from there on
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = fusegrad.compile(lambda t: torch.cumsum(t, dim))(got_x), torch.cumsum(want_x, dim)
    torch.testing.assert_close(got, want, equal_nan=True)
    weight = torch.randn(x.shape)
    (torch.where(got.isfinite(), got, 0) * weight).sum().backward()
    (torch.where(want.isfinite(), want, 0) * weight).sum().backward()
    torch.testing.assert_close(got_x.grad, want_x.grad)


def test_random_ops_take_a_seed_input():
    def f(x):
        return torch.nn.functional.dropout(x, 0.25, training=True), torch.bernoulli(x, 0.5)

    x = torch.ones(64, 64)
    module = import_graph(trace(f, x))
    func_op = module.body.operations[0]
    seed_index = ir.IntegerAttr(func_op.attributes[SEED_ATTR]).value
    assert seed_index == 1
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    assert str(ftype.inputs[seed_index]) == "tensor<i64>"
    y1, b1 = run_function(func_op, [x, torch.tensor(1)])
    y1_again, _ = run_function(func_op, [x, torch.tensor(1)])
    y2, _ = run_function(func_op, [x, torch.tensor(2)])
    assert torch.equal(y1, y1_again) and not torch.equal(y1, y2)
    kept = (y1 != 0).float().mean().item()
    assert abs(kept - 0.75) < 0.03
    torch.testing.assert_close(y1[y1 != 0], torch.full_like(y1[y1 != 0], 1 / 0.75))
    assert abs(b1.mean().item() - 0.5) < 0.03
    assert not torch.equal((y1 != 0).float(), b1), "random ops must use distinct streams"


def test_getitem_of_multi_output_op():
    def f(x):
        return torch.max(x, dim=1)

    x = torch.randn(4, 5)
    _, _, (v, i) = import_and_run(trace(f, x), [x])
    ev, ei = torch.max(x, dim=1)
    assert torch.equal(v, ev) and torch.equal(i, ei)
    assert operator.getitem in {n.target for n in trace(f, x).graph.nodes}


def test_import_graph_takes_ctx_or_needs_one(ctx):
    gm = trace(lambda x: x.abs(), torch.randn(2))
    other = make_context()
    module = import_graph(gm, name="absval", ctx=other)
    assert "@absval" in str(module) and module.context is other
    ctx.__exit__(None, None, None)
    try:
        with pytest.raises(RuntimeError, match="MLIR context"):
            import_graph(gm)
    finally:
        ctx.__enter__()


def test_a_matrix_broadcast_over_a_batch_is_one_product_of_the_stacked_rows():
    """PyTorch's matmul of a non-contiguous 3-d input by a weight expands the weight over
    the batch and calls bmm: imported as one 2-d product, no broadcast weight."""
    x, w = torch.randn(8, 5, 6).transpose(0, 1), torch.randn(6, 7)
    module, func_op, (got,) = import_and_run(trace(lambda a, b: a @ b, x, w), [x, w])
    text = str(module)
    matmuls = [line for line in text.splitlines() if '"dg.matmul"' in line]
    assert len(matmuls) == 1 and "(tensor<40x6xf32>, tensor<6x7xf32>)" in matmuls[0]
    torch.testing.assert_close(got, x @ w)


@pytest.mark.parametrize("name, fn, wide", [
    ("layer_norm", lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)), False),
    ("group_norm", lambda x: torch.nn.functional.group_norm(x, 2), False),
    ("var", lambda x: x.var(-1), True),
    ("std_mean", lambda x: torch.std_mean(x, -1)[0], True),
])
def test_variances_square_in_f64_but_normalization_layers_in_f32(name, fn, wide):
    """var and std square their deviations in f64 (eager's accumulate in double); the
    statistics of a normalization layer stay f32, as eager's layer and group norm
    kernels and hot in training (the traced node names its layer by another overload
    object than `aten`'s: the check compares names)."""
    module = str(import_graph(dynamo_trace(fn, torch.randn(4, 6, 8))))
    assert ("xf64>" in module or "tensor<f64>" in module) == wide, name

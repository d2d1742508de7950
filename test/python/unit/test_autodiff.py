"""dg-autodiff against torch.autograd: every differentiable op, first and second order.

Each case is a small dg function built with the Builder. The pass's @f_fwd /
@f_bwd are run with the reference interpreter in float64 and compared with
torch.autograd.grad through the same computation done by torch (the reference
rules). Running the pass again differentiates @f_bwd, which is checked the same
way; Hessian-vector products come from the joint function differentiated twice.
"""
from __future__ import annotations

from typing import Callable

import pytest
import torch
from mlir import ir
from mlir.dialects import func

from fusegrad.context import make_context
from fusegrad.dialects import OPS
from fusegrad.dialects.builder import Builder
from fusegrad.dialects.interpreter import bound_sizes, run_function
from fusegrad.dialects.types import TensorSpec
from fusegrad.pass_manager import run_pipeline
from fusegrad.runtime import abi
from fusegrad.passes import PassError
from fusegrad.transforms.autodiff.autodiff import (build_joint, default_saved, drop_cotangents,
                                                   partition)

F64 = torch.float64
NAN = float("nan")


def rnd(*shape):
    return torch.randn(*shape, dtype=F64)


def pos(*shape):
    return torch.rand(*shape, dtype=F64) + 0.5


def idx(high, *shape):
    return torch.randint(0, high, shape, dtype=torch.int64)


def unary(op):
    return lambda b, x: b.create(op, (x,))


def binary(op):
    return lambda b, x, y: b.create(op, (x, y))


def with_ties(*shape):
    x = rnd(*shape)
    return [x, torch.where(torch.rand(*shape) < 0.5, x, rnd(*shape))]


def row_ties():
    x = rnd(3, 4)
    x[:, 2] = x.max(1).values
    x[0, 0] = x[0, 2]
    return [x]


def zeros_in_rows():
    x = rnd(3, 7)
    x[0, 2] = 0.0
    x[1, 1] = x[1, 5] = 0.0
    x[2, 0] = x[2, 3] = x[2, 4] = 0.0
    return [x]


def f64(b, v):
    return b.convert(v, dtype="f64")


def unit(*shape):
    """Inside (-1, 1), away from the ends where asin/acos/atanh's derivatives blow up."""
    return torch.rand(*shape, dtype=F64) * 1.6 - 0.8


_UNARY_INPUTS = {"log": pos, "sqrt": pos, "rsqrt": pos, "reciprocal": pos, "log1p": pos,
                 "asin": unit, "acos": unit, "atanh": unit,
                 "acosh": lambda *s: pos(*s) + 1.0,
                 "abs": lambda *s: torch.cat([rnd(5), torch.zeros(1, dtype=F64)]).reshape(2, 3)}
CONV_ATTRS = dict(stride=[2, 1], padding=[1, 0], dilation=[1, 2], groups=2)
# name -> (inputs, body); one case at least for every op of the table
CASES: dict[str, tuple[Callable[[], list[torch.Tensor]], Callable]] = {
    **{op: (lambda op=op: [_UNARY_INPUTS.get(op, rnd)(2, 3)], unary(op))
       for op in ("neg", "abs", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh",
                  "sigmoid", "erf", "sin", "cos", "reciprocal", "sign", "floor", "ceil", "round",
                  "stop_gradient", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh",
                  "atanh", "erfc", "exp2")},
    **{op: (lambda: [rnd(2, 3), rnd(2, 3)], binary(op)) for op in ("add", "sub", "mul",
                                                                  "atan2")},
    "div": (lambda: [rnd(2, 3), pos(2, 3)], binary("div")),
    "pow": (lambda: [pos(2, 3), rnd(2, 3)], binary("pow")),
    # constant exponents (RMSNorm's square): the derivative c * x ** (c - 1) is folded
    "pow_constant": (lambda: [pos(2, 3)],
                     lambda b, x: [b.pow(x, b.full(shape=(2, 3), dtype="f64", value=c))
                                   for c in (0.0, 1.0, 2.0, 3.0, 0.5)]),
    "pow_zero_base": (lambda: [torch.tensor([0.0, 0.0, 2.0, 0.5], dtype=F64),
                               torch.tensor([2.0, 0.0, 0.0, 3.0], dtype=F64)], binary("pow")),
    "max": (lambda: with_ties(2, 4), binary("max")),
    "min": (lambda: with_ties(2, 4), binary("min")),
    "and_or_not": (lambda: [rnd(2, 3), idx(4, 2, 3), idx(4, 2, 3)],
                   lambda b, x, i, j: b.mul(x, f64(b, b.create("or", (
                       b.create("and", (i, j)), b.create("not", (j,))))))),
    "compare_select": (lambda: [rnd(2, 3), rnd(2, 3)],
                       lambda b, x, y: b.select(b.compare(x, y, direction="lt"), x, b.exp(y))),
    "convert": (lambda: [rnd(2, 3), idx(5, 2, 3)],
                lambda b, x, i: b.mul(f64(b, b.convert(x, dtype="f32")), f64(b, i))),
    "reduce_sum": (lambda: [rnd(2, 3, 4)], lambda b, x: b.reduce_sum(x, dims=[0, 2])),
    "reduce_max": (row_ties, lambda b, x: b.reduce_max(x, dims=[1])),
    "reduce_min": (lambda: [-row_ties()[0]], lambda b, x: b.reduce_min(x, dims=[1])),
    # max() and median() without a dim: ties and NaNs share the gradient
    "evenly_read": (lambda: [torch.tensor([[1.0, 3.0, 0.5], [3.0, -2.0, 3.0]], dtype=F64)],
                    lambda b, x: b.evenly_read(x, b.reduce_max(x, dims=[0, 1]))),
    "evenly_read_nan": (lambda: [torch.tensor([1.0, NAN, 3.0, NAN], dtype=F64)],
                        lambda b, x: b.evenly_read(x, b.reduce_max(x, dims=[0]))),
    "argmax_argmin": (lambda: [rnd(3, 4)],
                      lambda b, x: b.mul(b.reduce_sum(x, dims=[1]),
                                         f64(b, b.add(b.argmax(x, dim=1), b.argmin(x, dim=1))))),
    "broadcast_in_dim": (lambda: [rnd(3, 1)],
                         lambda b, x: b.mul(b.broadcast_in_dim(x, shape=(2, 3, 4), dims=[1, 2]),
                                            b.full(shape=(2, 3, 4), dtype="f64", value=1.5))),
    "reshape": (lambda: [rnd(2, 6)], lambda b, x: b.reshape(x, shape=(3, 4))),
    "transpose": (lambda: [rnd(2, 3, 4)], lambda b, x: b.transpose(x, perm=[2, 0, 1])),
    "slice": (lambda: [rnd(5, 7)],
              lambda b, x: b.slice(x, start=[1, 0], limit=[5, 7], stride=[2, 3])),
    "reverse": (lambda: [rnd(3, 4)], lambda b, x: b.reverse(x, dims=[1])),
    "pad": (lambda: [rnd(2, 3)],
            lambda b, x: b.pad(x, low=[1, 0], high=[0, 2], interior=[1, 2], value=1.5)),
    "concatenate": (lambda: [rnd(2, 1), rnd(2, 3), rnd(2, 2)],
                    lambda b, x, y, z: b.concat([x, y, z], dim=1)),
    "gather": (lambda: [rnd(3, 5), idx(5, 2, 4)], lambda b, x, i: b.gather(x, i, dim=1)),
    # one index per row (a loss's target logit): the gradient is a one-hot select
    "gather_one_per_row": (lambda: [rnd(3, 5), idx(5, 3, 1)],
                           lambda b, x, i: b.gather(x, i, dim=1)),
    "index_select": (lambda: [rnd(4, 3), idx(4, 2, 3)],
                     lambda b, x, i: b.index_select(x, i, dim=0)),
    "scatter_add": (lambda: [rnd(3, 5), idx(5, 2, 4), rnd(2, 4)],
                    lambda b, x, i, s: b.scatter_add(x, i, s, dim=1)),
    # distinct indices per row: a repeated one's loser gets eager's gradient, not a true one
    "scatter": (lambda: [rnd(3, 5), torch.stack([torch.randperm(5)[:4] for _ in range(2)]),
                         rnd(2, 4)],
                lambda b, x, i, s: b.scatter(x, i, s, dim=1)),
    # random values: no ties, so the result is differentiable where checked; a product
    # with a zero (its partials divide out only nonzero elements)
    **{op: (lambda: [rnd(3, 5), idx(5, 2, 4), rnd(2, 4)],
            lambda b, x, i, s, op=op: b.create(op, [x, i, s], dim=1))
       for op in ("scatter_max", "scatter_min", "scatter_mul")},
    "scatter_mul_zero": (lambda: [rnd(3, 5), torch.tensor([[0, 0, 1, 0], [2, 0, 1, 4]]),
                                  torch.tensor([[0.0, 2.0, 0.5, 3.0], [1.5, -1.0, 0.0, 2.0]],
                                               dtype=F64)],
                         lambda b, x, i, s: b.scatter_mul(x, i, s, dim=1)),
    # scans: rows with one, two and three zeros (a product's gradient there is the
    # product of the others, and its derivative is exact: not eager's masks held fixed)
    **{f"scan_{combiner}{'_reverse' if reverse else ''}": (
        (lambda: zeros_in_rows()) if combiner == "mul" else (lambda: [rnd(3, 5)]),
        lambda b, x, combiner=combiner, reverse=reverse: b.scan(x, dim=1, combiner=combiner,
                                                                reverse=reverse))
       for combiner in ("add", "mul", "max", "min", "logaddexp") for reverse in (0, 1)},
    "scan_columns": (lambda: [rnd(4, 3)],
                     lambda b, x: b.scan(x, dim=0, combiner="mul", reverse=0)),
    "scan_mul_grad": (lambda: [zeros_in_rows()[0], rnd(3, 7)],
                      lambda b, x, g: b.scan_mul_grad(x, g, dim=1, reverse=0)),
    "matmul": (lambda: [rnd(2, 3, 4), rnd(2, 4, 5)], binary("matmul")),
    "matmul_add": (lambda: [rnd(2, 3, 4), rnd(2, 4, 5), rnd(2, 3, 5)],
                   lambda b, x, y, z: b.matmul_add(x, y, z)),
    # the mask is a constant, as the importer's masks are; the gradient ops' derivatives
    # (second order) go through the decomposition, where the mask is an input too
    "attention": (lambda: [rnd(2, 2, 3, 4), rnd(2, 2, 5, 4), rnd(2, 2, 5, 4)],
                  lambda b, q, k, v: b.attention(q, k, v, b.constant(rnd(2, 1, 3, 5)), scale=0.4,
                                                 causal=1)[0]),
    "attention_lse": (lambda: [rnd(1, 2, 4, 3), rnd(1, 2, 4, 3), rnd(1, 2, 4, 3)],
                      lambda b, q, k, v: b.attention(q, k, v, b.full(shape=(1, 1, 1, 1),
                                                                     dtype="f64", value=0.0),
                                                     scale=1.0, causal=0)),
    "attention_grad": (lambda: [rnd(2, 2, 3, 4), rnd(2, 2, 3, 4), rnd(2, 2, 5, 4),
                                rnd(2, 2, 5, 4), rnd(2, 2, 3, 4), rnd(2, 2, 3), rnd(1, 2, 1, 5)],
                       lambda b, *xs: b.attention_grad(*xs, scale=0.7, causal=0)),
    "conv2d": (lambda: [rnd(2, 4, 7, 6), rnd(6, 2, 3, 2)],
               lambda b, x, w: b.conv2d(x, w, **CONV_ATTRS)),
    "conv2d_grads": (lambda: [rnd(2, 4, 7, 6), rnd(6, 2, 3, 2), rnd(2, 6, 4, 4)],
                     lambda b, x, w, g: [
                         b.conv2d_input_grad(g, w, input_shape=(2, 4, 7, 6), **CONV_ATTRS),
                         b.conv2d_weight_grad(x, g, weight_shape=(6, 2, 3, 2), **CONV_ATTRS)]),
    "conv2d_nhwc": (lambda: [rnd(2, 7, 6, 4), rnd(6, 2, 3, 2)],
                    lambda b, x, w: b.conv2d_nhwc(x, w, **CONV_ATTRS)),
    "conv2d_nhwc_grads": (lambda: [rnd(2, 7, 6, 4), rnd(6, 2, 3, 2), rnd(2, 4, 4, 6)],
                          lambda b, x, w, g: [
                              b.conv2d_nhwc_input_grad(g, w, input_shape=(2, 7, 6, 4), **CONV_ATTRS),
                              b.conv2d_nhwc_weight_grad(x, g, weight_shape=(6, 2, 3, 2),
                                                        **CONV_ATTRS)]),
    "constant_full_iota": (lambda: [rnd(2, 3)],
                           lambda b, x: b.add(b.mul(x, b.constant(torch.arange(6.0, dtype=F64)
                                                                  .reshape(2, 3))),
                                              b.iota(shape=(2, 3), dtype="f64", dim=1))),
    "rng": (lambda: [rnd(3, 4), torch.tensor(7)],
            lambda b, x, s: b.mul(b.mul(x, b.rng_uniform(s, shape=(3, 4), dtype="f64")),
                                  b.rng_bernoulli(s, shape=(3, 4), dtype="f64", p=0.5))),
    # composites: fan-out, softmax, log-softmax, normalisation, max-subtraction
    "fan_out": (lambda: [rnd(2, 3)], lambda b, x: b.mul(b.mul(x, x), b.sin(x))),
    "softmax": (lambda: [rnd(3, 5)], lambda b, x: _softmax(b, x)),
    "log_softmax": (lambda: [rnd(3, 5)],
                    lambda b, x: b.sub(x, b.broadcast_in_dim(
                        b.log(b.reduce_sum(b.exp(x), dims=[1])), shape=(3, 5), dims=[0]))),
    "layer_norm": (lambda: [rnd(3, 6)], lambda b, x: _layer_norm(b, x)),
    "two_outputs": (lambda: [rnd(2, 3), rnd(2, 3)],
                    lambda b, x, y: [b.tanh(b.mul(x, y)), b.argmax(x, dim=1), b.exp(x)]),
}


def _softmax(b, x):
    shape = (3, 5)
    m = b.broadcast_in_dim(b.reduce_max(x, dims=[1]), shape=shape, dims=[0])
    e = b.exp(b.sub(x, m))
    return b.div(e, b.broadcast_in_dim(b.reduce_sum(e, dims=[1]), shape=shape, dims=[0]))


def _layer_norm(b, x):
    shape = (3, 6)

    def mean(v):
        return b.broadcast_in_dim(b.div(b.reduce_sum(v, dims=[1]),
                                        b.full(shape=(3,), dtype="f64", value=6.0)),
                                  shape=shape, dims=[0])
    c = b.sub(x, mean(x))
    return b.mul(c, b.rsqrt(b.add(mean(b.mul(c, c)), b.full_like(x, 1e-5))))


# ---------------------------------------------------------------- harness
def build(inputs: list[torch.Tensor], body: Callable, name: str = "f"):
    """A module with `func.func @<name>` built by `body(b, *args)`; returns (ctx, module)."""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        types = [TensorSpec.of(t).to_mlir() for t in inputs]
        with ir.InsertionPoint(module.body):
            @func.FuncOp.from_py_func(*types, name=name)
            def _(*args):
                return body(Builder(), *args)
    return ctx, module


def get_func(module, name):
    for op in module.body.operations:
        if op.operation.name == "func.func" and \
                ir.StringAttr(op.attributes["sym_name"]).value == name:
            return op.operation
    raise KeyError(f"no @{name} in\n{module}")


def i64s(fn, attr):
    return list(ir.DenseI64ArrayAttr(fn.attributes[attr]))


def torch_vjp(fn, inputs, wrt, ct_outputs, cts, sizes=None):
    """(outputs, grads) of `fn` by torch.autograd through the reference rules."""
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    outs = run_function(fn, leaves, sizes)
    pairs = [(outs[i], c) for i, c in zip(ct_outputs, cts) if outs[i].requires_grad]
    targets = [leaves[i] for i in wrt]
    grads = torch.autograd.grad([o for o, _ in pairs], targets, [c for _, c in pairs],
                                allow_unused=True, create_graph=False) if pairs else \
        [None] * len(targets)
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, targets)]
    return [o.detach() for o in outs], grads


def assert_close(got, want, what):
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, f"{what} #{k}: {g.shape} vs {w.shape}"
        torch.testing.assert_close(g, w, rtol=1e-7, atol=1e-9, equal_nan=True,
                                   msg=lambda m: f"{what} #{k}: {m}")


def check_split(module, name, inputs, sizes=None):
    """@name_fwd/@name_bwd agree with torch.autograd on @name; returns bwd's inputs.
    `sizes`: symbolic sizes bound where @name's own forward ran."""
    fwd, bwd = get_func(module, f"{name}_fwd"), get_func(module, f"{name}_bwd")
    n_out = ir.IntegerAttr(fwd.attributes["dg.num_outputs"]).value
    wrt, ct_outputs = i64s(bwd, "dg.wrt"), i64s(bwd, "dg.ct_outputs")
    sizes = bound_sizes(fwd, inputs, sizes)
    res = run_function(fwd, inputs, sizes)
    outs, saved = res[:n_out], res[n_out:]
    cts = [torch.randn_like(outs[i]) for i in ct_outputs]
    grads = run_function(bwd, saved + cts, sizes)
    want_outs, want_grads = torch_vjp(get_func(module, name), inputs, wrt, ct_outputs, cts,
                                      sizes)
    assert_close(outs, want_outs, f"@{name}_fwd outputs")
    assert_close(grads, want_grads, f"@{name}_bwd grads")
    return saved + cts


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ---------------------------------------------------------------- tests
def test_every_op_has_rules():
    missing = [f"dg.{n}: {slot}" for n, d in OPS.items() for slot in ("vjp", "jvp") if getattr(d, slot) is None]
    assert not missing, f"ops without autodiff rules: {missing}"


def test_every_op_has_a_case():
    covered = set()
    for make_inputs, body in CASES.values():
        _, module = build(make_inputs(), body)
        covered |= {op.operation.name[3:] for op in get_func(module, "f").regions[0].blocks[0]}
    assert not set(OPS) - covered


@pytest.mark.parametrize("case", sorted(CASES))
def test_first_and_second_order(case):
    make_inputs, body = CASES[case]
    inputs = make_inputs()
    ctx, module = build(inputs, body)
    run_pipeline(module, "dg-autodiff")
    bwd_inputs = check_split(module, "f", inputs)
    run_pipeline(module, "dg-autodiff")  # differentiates @f_bwd: second order
    check_split(module, "f_bwd", bwd_inputs)
    assert "dg.differentiated" in get_func(module, "f_bwd").attributes


def joint_hvp(inputs, body, v):
    """H v of the scalar @f by differentiating the joint @f_vjp a second time."""
    ctx, module = build(inputs, body)
    run_pipeline(module, "dg-autodiff{joint=true},dg-autodiff{joint=true}")
    one = torch.ones((), dtype=F64)
    zero = torch.zeros((), dtype=F64)
    res = run_function(get_func(module, "f_vjp_vjp"), list(inputs) + [one, zero] + list(v))
    n = len(inputs)
    return res[1 + n: 1 + 2 * n]  # after y and the grads: d/dx of <grads, v>


HVP_CASES = {
    "matmul": ([rnd(3, 4), rnd(4, 2)],
               lambda b, x, w: b.reduce_sum(b.tanh(b.matmul(x, w)), dims=[0, 1])),
    "conv2d": ([rnd(1, 2, 5, 5), rnd(4, 1, 2, 3)],
               lambda b, x, w: b.reduce_sum(b.mul(*[b.conv2d(x, w, stride=[2, 1], padding=[1, 1],
                                                             dilation=[1, 2], groups=2)] * 2),
                                            dims=[0, 1, 2, 3])),
    "softmax": ([rnd(3, 5)],
                lambda b, x: b.reduce_sum(b.mul(_softmax(b, x), b.sin(x)), dims=[0, 1])),
    "reduce_max": ([rnd(3, 4)],
                   lambda b, x: b.reduce_sum(b.mul(b.reduce_max(b.mul(x, x), dims=[1]),
                                                   b.reduce_sum(x, dims=[1])), dims=[0])),
    "layer_norm": ([rnd(3, 6)],
                   lambda b, x: b.reduce_sum(b.exp(_layer_norm(b, x)), dims=[0, 1])),
    "cumprod_zeros": (zeros_in_rows(),
                      lambda b, x: b.reduce_sum(b.sin(b.scan(x, dim=1, combiner="mul",
                                                              reverse=0)[0]), dims=[0, 1])),
}


@pytest.mark.parametrize("case", sorted(HVP_CASES))
def test_hessian_vector_product(case):
    inputs, body = HVP_CASES[case]
    v = [torch.randn_like(t) for t in inputs]
    ctx, module = build(inputs, body)
    f = get_func(module, "f")
    _, want = torch.autograd.functional.hvp(lambda *xs: run_function(f, xs)[0], tuple(inputs),
                                            tuple(v))
    assert_close(joint_hvp(inputs, body, v), list(want), f"{case}: H v")


CONV_CONFIGS = [  # (N, C, H, W), (O, KH, KW), stride, padding, dilation, groups
    ((2, 3, 7, 6), (4, 3, 2), (1, 1), (0, 0), (1, 1), 1),
    ((1, 4, 8, 7), (6, 3, 3), (2, 3), (1, 2), (1, 1), 2),
    ((2, 2, 9, 9), (4, 2, 3), (2, 2), (3, 1), (2, 1), 2),  # padding > dilated kernel: crops
    ((1, 6, 10, 8), (3, 3, 3), (3, 2), (0, 1), (2, 2), 3),
    ((1, 4, 6, 6), (4, 3, 3), (1, 1), (1, 1), (1, 1), 4),  # depthwise
    ((1, 2, 9, 9), (2, 1, 1), (3, 3), (0, 0), (1, 1), 1),  # stride > kernel: skipped rows
    ((1, 2, 8, 5), (4, 2, 2), (2, 2), (0, 0), (3, 1), 1),  # trailing rows never read
]


@pytest.mark.parametrize("config", CONV_CONFIGS)
def test_conv2d_grid(config):
    (n, c, h, w), (o, kh, kw), stride, padding, dilation, groups = config
    x, wt = rnd(n, c, h, w), rnd(o, c // groups, kh, kw)
    ctx, module = build([x, wt], lambda b, x, w: b.conv2d(
        x, w, stride=list(stride), padding=list(padding), dilation=list(dilation), groups=groups))
    run_pipeline(module, "dg-autodiff")
    fwd, bwd = get_func(module, "f_fwd"), get_func(module, "f_bwd")
    res = run_function(fwd, [x, wt])
    g = torch.randn_like(res[0])
    got = run_function(bwd, res[1:] + [g])
    xl, wl = x.clone().requires_grad_(), wt.clone().requires_grad_()
    y = torch.nn.functional.conv2d(xl, wl, None, stride, padding, dilation, groups)
    assert_close(got, list(torch.autograd.grad(y, [xl, wl], g)), f"conv2d {config}")


# ---------------------------------------------------------------- the pass's contract
def test_integer_input_and_output_get_no_gradient():
    ctx, module = build([rnd(3), idx(3, 3)],
                        lambda b, x, i: [b.mul(x, f64(b, i)), b.add(i, i)])
    run_pipeline(module, "dg-autodiff")
    bwd = get_func(module, "f_bwd")
    assert i64s(bwd, "dg.wrt") == [0] and i64s(bwd, "dg.ct_outputs") == [0]
    assert len(ir.FunctionType(ir.TypeAttr(bwd.attributes["function_type"]).value).results) == 1


def test_wrt_option_and_attribute():
    inputs = [rnd(3), rnd(3)]
    ctx, module = build(inputs, binary("mul"))
    run_pipeline(module, "dg-autodiff{wrt=1}")
    assert i64s(get_func(module, "f_bwd"), "dg.wrt") == [1]
    check_split(module, "f", inputs)
    ctx, module = build(inputs, binary("mul"))
    get_func(module, "f").attributes["dg.wrt"] = ir.DenseI64ArrayAttr.get([0], context=ctx)
    run_pipeline(module, "dg-autodiff")
    assert i64s(get_func(module, "f_bwd"), "dg.wrt") == [0]


def test_drop_cotangents_is_the_backward_at_zero():
    inputs = [rnd(3, 4), rnd(4)]
    ctx, module = build(inputs, lambda b, x, y: [b.exp(x), b.mul(x, b.broadcast_in_dim(
        y, shape=(3, 4), dims=[1])), b.reduce_sum(x, dims=[1])])
    run_pipeline(module, "dg-autodiff")
    fwd = get_func(module, "f_fwd")
    res = run_function(fwd, inputs)
    saved = res[3:]
    cts = [torch.randn(3, 4, dtype=F64), torch.randn(3, 4, dtype=F64), torch.randn(3, dtype=F64)]
    want = run_function(get_func(module, "f_bwd"), saved + [cts[0], torch.zeros(3, 4, dtype=F64),
                                                            cts[2]])
    with ctx, ir.Location.unknown():
        drop_cotangents(get_func(module, "f_bwd"), [1])
        bwd = get_func(module, "f_bwd")
        assert i64s(bwd, "dg.ct_outputs") == [0, 2]
        assert_close(run_function(bwd, saved + [cts[0], cts[2]]), want, "@f_bwd without #1")
        with pytest.raises(PassError, match=r"no cotangent for outputs \[1\]"):
            drop_cotangents(bwd, [1])


def test_output_independent_of_input_gives_zeros():
    inputs = [rnd(3), rnd(3)]
    ctx, module = build(inputs, lambda b, x, y: b.exp(x))
    run_pipeline(module, "dg-autodiff")
    check_split(module, "f", inputs)


def test_partition_with_other_saved_set_recomputes():
    """Saving only the inputs makes the backward recompute exp(x * y)."""
    inputs = [rnd(3), rnd(3)]
    ctx, module = build(inputs, lambda b, x, y: b.exp(b.mul(x, y)))
    f = get_func(module, "f")
    with ctx, ir.Location.unknown():
        joint = build_joint(f)
        saved_default = default_saved(joint)
        assert len(saved_default) == 3  # exp's result, x and y (for the mul)
        args = list(joint.regions[0].blocks[0].arguments)
        fwd, bwd = partition(joint, args[:2], fwd_name="g_fwd", bwd_name="g_bwd")
    names = [op.operation.name for op in bwd.regions[0].blocks[0]]
    assert "dg.exp" in names
    res = run_function(fwd, inputs)
    ct = torch.randn(3, dtype=F64)
    _, want = torch_vjp(f, inputs, [0, 1], [0], [ct])
    assert_close(run_function(bwd, res[1:] + [ct]), want, "recomputing backward")
    with ctx, ir.Location.unknown(), pytest.raises(PassError, match="not saved"):
        partition(joint, [args[0]], fwd_name="h_fwd", bwd_name="h_bwd")


def test_backward_locations_point_at_forward_ops():
    with make_context():
        module = ir.Module.parse("""
          func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
            %0 = "dg.exp"(%x) : (tensor<3xf32>) -> tensor<3xf32> loc("model.py":12:3)
            return %0 : tensor<3xf32>
          }""")
        run_pipeline(module, "dg-autodiff")
        text = get_func(module, "f_bwd").get_asm(enable_debug_info=True)
    assert 'loc("grad of dg.exp"("model.py":12:3))' in text


def test_non_dg_op_is_a_located_error():
    ctx = make_context()
    with ctx:
        module = ir.Module.parse("""
          func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
            %0 = arith.addf %x, %x : tensor<3xf32>
            return %0 : tensor<3xf32>
          }""")
        with pytest.raises(Exception, match="only dg ops are differentiable"):
            run_pipeline(module, "dg-autodiff")


# ---------------------------------------------------------------- symbolic sizes
def symbolic_specs(inputs: list[torch.Tensor], dims: dict[int, list[int]] | None) \
        -> list[TensorSpec]:
    """The inputs' specs with sizes above 1 symbolic, one symbol per distinct size (so
    sizes that must agree do): all of them, or `dims[i]` of input i."""
    symbols: dict[int, object] = {}
    specs = []
    for i, t in enumerate(inputs):
        shape = list(t.shape)
        for d, n in enumerate(shape):
            if n > 1 and (dims is None or d in dims.get(i, ())):
                shape[d] = symbols.setdefault(n, abi.symbol(f"s{len(symbols)}"))
        specs.append(TensorSpec(tuple(shape), TensorSpec.of(t).dtype))
    return specs


def build_symbolic(inputs: list[torch.Tensor], body: Callable,
                   dims: dict[int, list[int]] | None = None):
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        types = [s.to_mlir() for s in symbolic_specs(inputs, dims)]
        with ir.InsertionPoint(module.body):
            @func.FuncOp.from_py_func(*types, name="f")
            def _(*args):
                return body(Builder(), *args)
    return ctx, module


# cases whose bodies name sizes (`full(shape=(2, 3))`, a reshape's target, an
# attention mask) are built for static shapes only; so are the convolutions, where one
# symbol per distinct size would tie kernel sizes and channel counts to unrelated dims
# (their symbolic batch: test_conv2d_symbolic_batch)
STATIC_ONLY = {"broadcast_in_dim", "pow_constant", "reshape", "attention", "layer_norm",
               "constant_full_iota", "rng", "softmax", "log_softmax", "conv2d",
               "conv2d_grads", "conv2d_nhwc", "conv2d_nhwc_grads"}


@pytest.mark.parametrize("case", sorted(set(CASES) - STATIC_ONLY))
def test_first_and_second_order_symbolic(case):
    """Each rule on symbolic sizes: the derivatives, run at the inputs' sizes, are the
    static ones'."""
    check_symbolic(*CASES[case])


@pytest.mark.parametrize("case", ["conv2d", "conv2d_nhwc"])
def test_conv2d_symbolic_batch(case):
    check_symbolic(*CASES[case], dims={0: [0]})


def check_symbolic(make_inputs, body, dims=None):
    inputs = make_inputs()
    ctx, module = build_symbolic(inputs, body, dims)
    assert "?" in str(get_func(module, "f").attributes["function_type"])
    run_pipeline(module, "dg-autodiff")
    sizes = bound_sizes(get_func(module, "f"), inputs)
    bwd_inputs = check_split(module, "f", inputs, sizes)
    run_pipeline(module, "dg-autodiff")
    check_split(module, "f_bwd", bwd_inputs, sizes)

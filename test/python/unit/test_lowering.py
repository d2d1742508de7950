"""Every dg op lowered (dg-lower-to-linalg + CPU pipeline) against the reference interpreter.

Cases are grouped by op family; each family is one module with one public
function per case, compiled once. Every case runs on contiguous inputs and on
non-contiguous (strided) copies of them. Integer, bool and random results must
be bit-exact; floats close (rtol 1e-5 for f32).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import pytest
import torch
from mlir import ir
from mlir.dialects import func

from fusegrad.context import make_context
from fusegrad.dialects import OPS, ShapeError, TensorSpec
from fusegrad.dialects.builder import Builder
from fusegrad.dialects.elementwise import BINARY, COMPARE_DIRECTIONS, UNARY
from fusegrad.dialects.interpreter import run_function
from fusegrad.codegen.cpu.compile import compile_cpu
from fusegrad.runtime import abi

NAN = float("nan")


@dataclass
class Case:
    op: str
    args: list[torch.Tensor]
    build: Callable  # (Builder, *values) -> value or list of values
    rtol: float = 1e-5


def _f(*shape, dtype=torch.float32, positive=False, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    t = torch.randn(shape, generator=g, dtype=torch.float64)
    return (t.abs() + 0.1 if positive else t).to(dtype)


def _i(*shape, lo=-5, hi=6, dtype=torch.int64, seed=0):
    g = torch.Generator().manual_seed(seed + 7 + sum(shape))
    return torch.randint(lo, hi, tuple(shape), generator=g).to(dtype)


def _b(*shape, seed=0):
    return _i(*shape, lo=0, hi=2, seed=seed).bool()


def _with_specials(t):
    t = t.clone()
    flat = t.view(-1)
    if flat.numel() >= 3:
        flat[0], flat[1], flat[2] = 0.0, NAN, -0.0
    return t


def unary_cases():
    cases = []
    float_in = {"log": True, "sqrt": True, "rsqrt": True, "log1p": True}
    for op in UNARY:
        if op == "not":
            for t in (_b(3, 4), _i(3, 4), _i(5, dtype=torch.int32)):
                cases.append(Case(op, [t], lambda b, x: b.create("not", [x])))
            continue
        for dt in (torch.float32, torch.float64):
            for shape in ((3, 4), (), (1, 5)):
                t = _f(*shape, dtype=dt, positive=float_in.get(op, False))
                if op in ("sign", "abs", "neg", "floor", "ceil", "round") and shape == (3, 4):
                    t = _with_specials(t * 3)
                    t.view(-1)[3] = 2.5  # round half to even
                cases.append(Case(op, [t], lambda b, x, op=op: b.create(op, [x])))
        if op in ("neg", "abs", "sign"):
            for dt in (torch.int64, torch.int32):
                cases.append(Case(op, [_i(2, 3, dtype=dt)], lambda b, x, op=op: b.create(op, [x])))
    return cases


def binary_cases():
    cases = []
    for op in BINARY:
        fn = lambda b, x, y, op=op: b.create(op, [x, y])  # noqa: E731
        if op in ("and", "or"):
            for mk in (lambda s: _b(3, 4, seed=s), lambda s: _i(3, 4, seed=s)):
                cases.append(Case(op, [mk(1), mk(2)], fn))
            continue
        for dt in (torch.float32, torch.float64):
            pos = op == "pow"
            x, y = _f(3, 4, dtype=dt, positive=pos, seed=1), _f(3, 4, dtype=dt, positive=pos, seed=2)
            if op in ("max", "min"):
                x.view(-1)[0], y.view(-1)[1] = NAN, NAN
            cases.append(Case(op, [x, y], fn))
            cases.append(Case(op, [_f(dtype=dt, positive=pos, seed=3), _f(dtype=dt, positive=pos)], fn))
        if op == "atan2":  # float only
            continue
        for dt in (torch.int64, torch.int32):
            x = _i(3, 4, dtype=dt, seed=1)
            y = _i(3, 4, lo=0, hi=4, dtype=dt, seed=2) if op == "pow" else _i(3, 4, dtype=dt, seed=2)
            if op == "div":
                y = torch.where(y == 0, torch.ones_like(y) * -3, y)
            cases.append(Case(op, [x, y], fn))
        if op in ("max", "min"):
            cases.append(Case(op, [_b(2, 3, seed=1), _b(2, 3, seed=2)], fn))
    return cases


def compare_cases():
    cases = []
    for d in COMPARE_DIRECTIONS:
        fn = lambda b, x, y, d=d: b.compare(x, y, direction=d)  # noqa: E731
        x, y = _f(4, 3, seed=1), _f(4, 3, seed=2)
        x.view(-1)[0], y.view(-1)[1], x.view(-1)[2], y.view(-1)[2] = NAN, NAN, 1.0, 1.0
        cases += [Case("compare", [x, y], fn),
                  Case("compare", [_i(4, 3, lo=0, hi=3, seed=1), _i(4, 3, lo=0, hi=3, seed=2)], fn),
                  Case("compare", [_b(5, seed=1), _b(5, seed=2)], fn)]
    for x, y in ((_f(3, 4, seed=1), _f(3, 4, seed=2)), (_i(2, 2), _i(2, 2, seed=3)),
                 (_b(3), _b(3, seed=4)), (_f(dtype=torch.float64), _f(dtype=torch.float64, seed=1))):
        cases.append(Case("select", [_b(*x.shape, seed=5), x, y], lambda b, p, x, y: b.select(p, x, y)))
    conversions = [
        (_with_specials(_f(3, 4) * 10), "f64"), (_f(3, 4, dtype=torch.float64) * 10, "f32"),
        (_f(3, 4) * 10, "i32"), (_f(3, 4) * 10, "i64"), (_i(3, 4), "f32"), (_i(3, 4), "f64"),
        (_b(3, 4), "f32"), (_with_specials(_f(3, 4)), "i1"), (_i(3, 4, lo=-1, hi=2), "i1"),
        (_i(3, 4, dtype=torch.int32), "i64"), (_i(3, 4) * 1000000000, "i32"), (_b(3, 4), "i64"),
        (_f(3, 4), "f16"), (_f(3, 4), "bf16"), (_f(3, 4).to(torch.bfloat16), "f32"),
        (_f(3, 4).to(torch.float16), "bf16"), (_f(), "i64"), (_f(3, 4) * 100, "i8"),
    ]
    for x, dt in conversions:
        cases.append(Case("convert", [x], lambda b, x, dt=dt: b.convert(x, dtype=dt), rtol=1e-3))
    return cases


def reduction_cases():
    cases = []
    for op in ("reduce_sum", "reduce_max", "reduce_min"):
        for dims in ((1,), (0, 2), (), (0, 1, 2)):
            for x in (_with_specials(_f(2, 3, 4)), _f(2, 3, 4, dtype=torch.float64), _i(2, 3, 4),
                      _i(2, 3, 4, dtype=torch.int32)):
                cases.append(Case(op, [x], lambda b, x, op=op, dims=dims: b.create(op, [x], dims=list(dims))))
        if op != "reduce_sum":
            cases.append(Case(op, [_b(3, 4)], lambda b, x, op=op: b.create(op, [x], dims=[1])))
    cases.append(Case("reduce_sum", [_f(1, 0, 3)], lambda b, x: b.reduce_sum(x, dims=[1])))
    for op in ("argmax", "argmin"):
        ties = torch.tensor([[1.0, 3.0, 3.0, 0.0], [NAN, 2.0, NAN, 5.0], [-1.0, -1.0, -1.0, -1.0]])
        for x in (ties, _f(3, 4, 5), _i(3, 4, lo=0, hi=3), _f(5, dtype=torch.float64)):
            for dim in range(x.dim()):
                cases.append(Case(op, [x], lambda b, x, op=op, dim=dim: b.create(op, [x], dim=dim)))
    cases.append(Case("evenly_read", [_f(2, 3)],
                      lambda b, x: b.evenly_read(x, b.reduce_max(x, dims=[0, 1]))))
    return cases


def shape_cases():
    c = []
    for x in (_f(3), _i(3), _b(3)):
        c.append(Case("broadcast_in_dim", [x], lambda b, x: b.broadcast_in_dim(x, shape=(2, 3), dims=[1])))
    c.append(Case("broadcast_in_dim", [_f(3, 1)], lambda b, x: b.broadcast_in_dim(x, shape=(3, 2, 4), dims=[0, 2])))
    c.append(Case("broadcast_in_dim", [_f()], lambda b, x: b.broadcast_in_dim(x, shape=(2, 2), dims=[])))
    for src, dst in (((2, 3), (3, 2)), ((6,), (1, 2, 3)), ((), (1, 1)), ((1, 1), ()), ((2, 3, 4), (4, 6)),
                     ((0, 3), (3, 0))):
        for x in (_f(*src), _i(*src)):
            c.append(Case("reshape", [x], lambda b, x, dst=dst: b.reshape(x, shape=dst)))
    for x, perm in ((_f(3, 4), (1, 0)), (_i(2, 3, 4), (2, 0, 1)), (_b(2, 3), (1, 0)), (_f(2, 3), (0, 1))):
        c.append(Case("transpose", [x], lambda b, x, perm=perm: b.transpose(x, perm=list(perm))))
    for x in (_f(5, 7), _i(5, 7)):
        c.append(Case("slice", [x], lambda b, x: b.slice(x, start=[1, 0], limit=[5, 7], stride=[2, 3])))
        c.append(Case("slice", [x], lambda b, x: b.slice(x, start=[2, 2], limit=[2, 5], stride=[1, 1])))
    for x, dims in ((_f(3, 4), (0,)), (_i(3, 4), (0, 1)), (_f(2, 3, 4), (1, 2)), (_b(4), ()), (_f(3), (0,))):
        c.append(Case("reverse", [x], lambda b, x, dims=dims: b.reverse(x, dims=list(dims))))
    for x, value in ((_f(3, 4), 1.5), (_i(3, 4), 7.0), (_b(3, 4), 1.0), (_f(2, 3, dtype=torch.float64), -2.0)):
        c.append(Case("pad", [x], lambda b, x, v=value: b.pad(x, low=[1, 0], high=[0, 2], interior=[1, 2], value=v)))
        c.append(Case("pad", [x], lambda b, x, v=value: b.pad(x, low=[0, 0], high=[0, 0], interior=[0, 0], value=v)))
    for xs, dim in (([_f(2, 3), _f(4, 3, seed=1)], 0), ([_i(2, 1), _i(2, 3), _i(2, 2)], 1),
                    ([_b(3)], 0), ([_f(2, 0), _f(2, 2)], 1)):
        c.append(Case("concatenate", xs, lambda b, *xs, dim=dim: b.concat(xs, dim=dim)))
    return c


def gather_cases():
    c = []
    for x in (_f(3, 4), _i(3, 4)):
        c.append(Case("gather", [x, _i(2, 4, lo=0, hi=3)], lambda b, x, i: b.gather(x, i, dim=0)))
        c.append(Case("gather", [x, _i(3, 2, lo=0, hi=4, dtype=torch.int32)], lambda b, x, i: b.gather(x, i, dim=1)))
    c.append(Case("gather", [_f(2, 3, 4), _i(2, 3, 5, lo=0, hi=4)], lambda b, x, i: b.gather(x, i, dim=2)))
    for x, idx, dim in ((_f(4, 5), _i(3, lo=0, hi=4), 0), (_f(4, 5), _i(2, 2, lo=0, hi=5), 1),
                        (_i(2, 3, 4), _i(5, lo=0, hi=3, dtype=torch.int32), 1),
                        (_f(4, 5), _i(lo=0, hi=4), 0)):
        c.append(Case("index_select", [x, idx], lambda b, x, i, dim=dim: b.index_select(x, i, dim=dim)))
    for x, src, idx, dim in ((_f(3, 4), _f(5, 4, seed=1), _i(5, 4, lo=0, hi=3), 0),
                             (_i(3, 4), _i(3, 6, seed=1), _i(3, 6, lo=0, hi=4, dtype=torch.int32), 1),
                             (_f(4, dtype=torch.float64), _f(6, dtype=torch.float64), _i(6, lo=0, hi=4), 0)):
        c.append(Case("scatter_add", [x, idx, src], lambda b, x, i, s, dim=dim: b.scatter_add(x, i, s, dim=dim)))
        # repeated indices: the last one stays, as in eager's CPU kernel
        c.append(Case("scatter", [x, idx, src], lambda b, x, i, s, dim=dim: b.scatter(x, i, s, dim=dim)))
        for op in ("scatter_max", "scatter_min", "scatter_mul"):
            c.append(Case(op, [x, idx, src],
                          lambda b, x, i, s, dim=dim, op=op: b.create(op, [x, i, s], dim=dim)))
    nan = torch.tensor([1.0, float("nan"), 3.0, -1.0])
    c.append(Case("scatter_max", [_f(3), _i(4, lo=0, hi=3), nan],  # NaN propagates, as eager's
                  lambda b, x, i, s: b.scatter_max(x, i, s, dim=0)))
    flags = torch.tensor([[True, False, False], [False, False, True]])
    c.append(Case("scatter_add", [flags[0], _i(3, lo=0, hi=3), flags[1]],  # booleans: or
                  lambda b, x, i, s: b.scatter_add(x, i, s, dim=0)))
    return c


def scan_cases():
    """Every combiner along rows (the CPU's vector path: a row of 37 is two vectors of 16
    and a scalar tail) and columns, both ways, with NaN and infinities where eager has
    a rule for them; 16-bit floats accumulate in f32."""
    c = []
    specials = _f(5, 37, seed=4)
    specials[0, 3], specials[1, 20], specials[2, 17], specials[3, 35] = NAN, math.inf, -math.inf, NAN
    specials[4, 5], specials[4, 30] = math.inf, -math.inf  # both: NaN from the second on
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0, -0.0, 0.0, NAN, 5.0, NAN, 2.0]])
    for combiner in ("add", "mul", "max", "min", "logaddexp"):
        inputs = [specials if combiner != "mul" else 1 + specials * 0.05,
                  _f(37, 3, dtype=torch.float64, seed=5), _f(2, 19, 3, seed=6),
                  _f(3, 40, seed=7).to(torch.bfloat16)]
        if combiner != "logaddexp":
            inputs += [_i(4, 33, lo=-3, hi=4), _i(33, 2, lo=-3, hi=4, dtype=torch.int32)]
        if combiner in ("max", "min"):
            inputs.append(ties)
        for x in inputs:
            for dim in range(x.dim()):
                for reverse in (0, 1):
                    c.append(Case("scan", [x], lambda b, x, combiner=combiner, dim=dim,
                                  reverse=reverse: b.scan(x, dim=dim, combiner=combiner,
                                                          reverse=reverse),
                                  rtol=1e-2 if x.dtype == torch.bfloat16 else 1e-5))
    for result in (0, 1):  # one of max's results read: the other's stores are gone
        for x, dim in ((specials, 1), (_i(33, 2, lo=-3, hi=4), 0)):
            c.append(Case("scan", [x], lambda b, x, dim=dim, result=result:
                          b.scan(x, dim=dim, combiner="max", reverse=0)[result]))
    zeros = _f(3, 7, dtype=torch.float64, seed=8)
    zeros[0, 2] = zeros[1, 1] = zeros[1, 5] = zeros[2, 4] = 0.0
    zeros[2, 6] = NAN
    for reverse in (0, 1):
        c.append(Case("scan_mul_grad", [zeros, _f(3, 7, dtype=torch.float64, seed=9)],
                      lambda b, x, g, reverse=reverse: b.scan_mul_grad(x, g, dim=1,
                                                                       reverse=reverse)))
    return c


def contraction_cases():
    c = []
    for a, bb in ((_f(3, 4), _f(4, 5, seed=1)), (_f(2, 3, 4), _f(2, 4, 5, seed=1)),
                  (_f(2, 2, 3, 4, dtype=torch.float64), _f(2, 2, 4, 5, dtype=torch.float64, seed=1)),
                  (_i(3, 4), _i(4, 2, seed=1)), (_f(1, 1), _f(1, 1, seed=1))):
        c.append(Case("matmul", [a, bb], lambda b, x, y: b.matmul(x, y)))
        acc = _f(*torch.matmul(a, bb).shape, dtype=a.dtype, seed=2) if a.is_floating_point() \
            else _i(*torch.matmul(a, bb).shape, seed=2)
        c.append(Case("matmul_add", [a, bb, acc], lambda b, x, y, z: b.matmul_add(x, y, z)))
    for x, w, kw in ((_f(2, 3, 8, 8), _f(4, 3, 3, 3, seed=1), dict(stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1)),
                     (_f(1, 2, 9, 7), _f(3, 2, 2, 3, seed=1), dict(stride=[2, 1], padding=[0, 1], dilation=[2, 1], groups=1)),
                     (_f(1, 4, 6, 6, dtype=torch.float64), _f(6, 2, 3, 3, dtype=torch.float64, seed=1),
                      dict(stride=[1, 2], padding=[1, 0], dilation=[1, 1], groups=2))):
        c.append(Case("conv2d", [x, w], lambda b, x, w, kw=kw: b.conv2d(x, w, **kw), rtol=1e-4))
        g = torch.nn.functional.conv2d(x, w, None, **kw)
        g = _f(*g.shape, dtype=g.dtype, seed=2)
        c.append(Case("conv2d_input_grad", [g, w], lambda b, g, w, kw=kw, s=tuple(x.shape):
                      b.conv2d_input_grad(g, w, input_shape=s, **kw), rtol=1e-4))
        c.append(Case("conv2d_weight_grad", [x, g], lambda b, x, g, kw=kw, s=tuple(w.shape):
                      b.conv2d_weight_grad(x, g, weight_shape=s, **kw), rtol=1e-4))
        # the channels-last twins (PyTorch's kernels on the NHWC buffers as they are)
        xn, gn = (t.permute(0, 2, 3, 1).contiguous() for t in (x, g))
        c.append(Case("conv2d_nhwc", [xn, w], lambda b, x, w, kw=kw: b.conv2d_nhwc(x, w, **kw),
                      rtol=1e-4))
        c.append(Case("conv2d_nhwc_input_grad", [gn, w], lambda b, g, w, kw=kw, s=tuple(xn.shape):
                      b.conv2d_nhwc_input_grad(g, w, input_shape=s, **kw), rtol=1e-4))
        c.append(Case("conv2d_nhwc_weight_grad", [xn, gn], lambda b, x, g, kw=kw,
                      s=tuple(w.shape): b.conv2d_nhwc_weight_grad(x, g, weight_shape=s, **kw),
                      rtol=1e-4))
    # attention (the CPU pipeline calls PyTorch's flash kernels): a mask broadcast over
    # batch and heads with a fully masked row (out 0, log-sum-exp 0), causal, f64
    masked = _f(2, 1, 5, 7, seed=3)
    masked[:, :, 1] = float("-inf")
    for q, k, mask, scale, causal in ((_f(2, 3, 5, 4), _f(2, 3, 7, 4, seed=1), masked, 0.5, 0),
                                      (_f(1, 2, 6, 8, dtype=torch.float64),
                                       _f(1, 2, 6, 8, dtype=torch.float64, seed=1),
                                       torch.zeros(1, 1, 1, 1, dtype=torch.float64), 0.35, 1)):
        v = _f(*k.shape, dtype=k.dtype, seed=2)
        attrs = dict(scale=scale, causal=causal)
        c.append(Case("attention", [q, k, v, mask],
                      lambda b, *xs, attrs=attrs: list(b.attention(*xs, **attrs))))
        g = _f(*q.shape, dtype=q.dtype, seed=4)
        out, lse = OPS["attention"].reference(q, k, v, mask, op="attention", attrs=attrs, out=None)
        c.append(Case("attention_grad", [g, q, k, v, out, lse, mask],
                      lambda b, *xs, attrs=attrs: list(b.attention_grad(*xs, **attrs))))
    return c


def source_cases():
    c = []
    for t in (_f(2, 3), _i(4), _b(2, 2), torch.tensor(3.5, dtype=torch.float64), _f(3).to(torch.float16)):
        c.append(Case("constant", [], lambda b, t=t: b.constant(t)))
    for shape, dt, v in (((2, 3), "f32", 1.5), ((), "f64", -2.0), ((4,), "i64", 7.0), ((2, 2), "i1", 1.0),
                         ((3,), "bf16", 0.3), ((3,), "f16", 65504.0), ((2,), "i32", -3.0)):
        c.append(Case("full", [], lambda b, s=shape, d=dt, v=v: b.full(shape=s, dtype=d, value=v)))
    for shape, dt, dim in (((3, 4), "i64", 1), ((3, 4), "f32", 0), ((5,), "i32", 0), ((2, 3), "i1", 1),
                           ((2, 3, 2), "f64", 1)):
        c.append(Case("iota", [], lambda b, s=shape, d=dt, dim=dim: b.iota(shape=s, dtype=d, dim=dim)))
    for seed in (0, 12345, (1 << 40) + 99, -7):
        s = torch.tensor(seed, dtype=torch.int64)
        for shape, dt in (((3, 5), "f32"), ((7,), "f64"), ((), "f32"), ((2, 3), "f16")):
            c.append(Case("rng_uniform", [s], lambda b, s, sh=shape, d=dt: b.rng_uniform(s, shape=sh, dtype=d)))
        c.append(Case("rng_bernoulli", [s], lambda b, s: b.rng_bernoulli(s, shape=(4, 6), dtype="f32", p=0.3)))
    return c


FAMILIES = {
    "unary": unary_cases, "binary": binary_cases, "compare_select_convert": compare_cases,
    "reduction": reduction_cases, "shape": shape_cases, "gather": gather_cases,
    "scan": scan_cases, "contraction": contraction_cases, "source_random": source_cases,
}


def _strided(t: torch.Tensor) -> torch.Tensor:
    """The same values in a non-contiguous layout (every other element of a wider tensor)."""
    if t.dim() == 0 or t.numel() < 2:
        return t
    wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype)
    wide[..., ::2] = t
    nc = wide[..., ::2]
    assert not nc.is_contiguous()
    return nc


def _assert_same(got: torch.Tensor, want: torch.Tensor, case: Case, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if want.is_floating_point() and case.op not in ("rng_uniform", "rng_bernoulli", "constant", "full"):
        torch.testing.assert_close(got, want, rtol=case.rtol, atol=1e-6, equal_nan=True, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(got.view(torch.uint8) if got.dtype == torch.bool else got,
                           want.view(torch.uint8) if want.dtype == torch.bool else want) or \
            (want.is_floating_point() and torch.equal(got.isnan(), want.isnan())
             and torch.equal(got.nan_to_num(), want.nan_to_num())), f"{what}: {got} != {want}"


@pytest.mark.parametrize("family", FAMILIES)
def test_family_matches_reference(family):
    cases = FAMILIES[family]()
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        funcs = []
        with ir.InsertionPoint(module.body):
            for k, case in enumerate(cases):
                types = [TensorSpec.of(t).to_mlir() for t in case.args]

                def body(*vals, case=case):
                    out = case.build(Builder(), *vals)
                    return out if isinstance(out, list) else [out]
                funcs.append(func.FuncOp.from_py_func(*types, name=f"{case.op}_{k}")(body).func_op)
        expected = [run_function(f.operation, c.args) for f, c in zip(funcs, cases)]
        cm = compile_cpu(module)
    for k, (case, want) in enumerate(zip(cases, expected)):
        fn = cm.function(f"{case.op}_{k}")
        for inputs, how in ((case.args, "contiguous"), ([_strided(t) for t in case.args], "strided")):
            before = [t.clone() for t in inputs]
            got = fn(*inputs)
            what = f"{case.op}_{k} ({how}, inputs {[TensorSpec.of(t) for t in case.args]})"
            for t, b in zip(inputs, before):  # the caller's tensors are never written
                assert torch.equal(t, b) or (t.is_floating_point() and
                                             torch.equal(t.isnan(), b.isnan())), what
            assert len(got) == len(want), what
            for g, w in zip(got, want):
                _assert_same(g, w, case, what)


def test_every_op_has_a_lowering_and_a_case():
    import fusegrad.passes  # noqa: F401  (registers the lowering pass)
    missing = [n for n, d in OPS.items() if d.lower is None]
    assert not missing, f"dg ops without a lower rule: {missing}"
    covered = {c.op for fam in FAMILIES.values() for c in fam()}
    untested = sorted(set(OPS) - covered)
    assert not untested, f"dg ops without a lowering test case: {untested}"


def test_missing_lower_rule_is_a_located_pass_error(monkeypatch):
    from fusegrad.pass_manager import run_pipeline
    monkeypatch.setattr(OPS["exp"], "lower", None)
    with make_context():
        module = ir.Module.parse("""
          func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
            %0 = "dg.exp"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc("model.py":3:1)
            return %0 : tensor<2xf32>
          }""")
        with pytest.raises(Exception, match="dg.exp has no lowering rule"):
            run_pipeline(module, "dg-lower-to-linalg")


def _break_return(module: ir.Operation) -> None:
    """A pass that leaves invalid IR: the first function returns a value of the wrong type."""
    from mlir.dialects import arith

    fn = module.regions[0].blocks[0].operations[0]
    ret = fn.regions[0].blocks[0].operations[0]
    with ir.InsertionPoint(ret):
        wrong = arith.ConstantOp(ir.IntegerType.get_signless(64), 1)
    ret.operation.operands[0] = wrong.result


@pytest.mark.parametrize("each", ["0", "1"])
def test_invalid_ir_from_a_pass_is_an_error_either_way(monkeypatch, each):
    """Verified after every pass or once after the pipeline, a pass that leaves invalid
    IR (here: a return of the wrong type) fails run_pipeline with MLIR's diagnostic."""
    from fusegrad.pass_manager import run_pipeline
    from fusegrad.passes import PASSES, Pass

    monkeypatch.setitem(PASSES, "test-break-return",
                        Pass("test-break-return", f"{__name__}:_break_return", ""))
    monkeypatch.setenv("FUSEGRAD_VERIFY_EACH", each)
    with make_context():
        module = ir.Module.parse("func.func @f(%a: i32) -> i32 { return %a : i32 }")
        with pytest.raises(ir.MLIRError, match="doesn't match function result type"):
            run_pipeline(module, "test-break-return,canonicalize")


def _symbolic_types(args: list[torch.Tensor]) -> tuple[list[ir.Type], dict[int, str]]:
    """The args' types with each size above 1 symbolic, one symbol per distinct size."""
    symbols: dict[int, str] = {}
    types = []
    for t in args:
        shape = [abi.symbol(symbols.setdefault(n, f"s{len(symbols)}")) if n > 1 else n
                 for n in t.shape]
        types.append(TensorSpec(tuple(shape), TensorSpec.of(t).dtype).to_mlir())
    return types, symbols


def _resized(t: torch.Tensor, symbols: dict[int, str], grow: int) -> torch.Tensor:
    shape = [n + grow if n in symbols else n for n in t.shape]
    g = torch.Generator().manual_seed(sum(shape))
    if t.is_floating_point():
        return torch.randn(shape, dtype=torch.float64, generator=g).to(t.dtype)
    return torch.randint(0, 2, shape, generator=g).to(t.dtype)


def symbolic_cases(family: str, skip=lambda case: False) -> tuple[ir.Module, list]:
    """In the current context: a module of `family`'s cases built with their sizes symbolic
    (those whose ops name sizes, a reshape's target, a fill's shape, build for static sizes
    only and are left out; so are `skip(case)`), and per built case `(name, case, runs)`:
    the reference's `(inputs, outputs)` at its sizes and, for float cases, at sizes one
    larger."""
    built = []
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        for k, case in enumerate(FAMILIES[family]()):
            types, symbols = _symbolic_types(case.args)
            if not symbols or any(0 in t.shape for t in case.args) or \
                    case.op.startswith("conv2d") or skip(case):
                # Dynamo makes no empty tensor's sizes symbolic; a convolution's
                # channels symbolic by value would be unrelated to its groups
                continue

            def body(*vals, case=case):
                out = case.build(Builder(), *vals)
                return out if isinstance(out, list) else [out]
            try:
                f = func.FuncOp.from_py_func(*types, name=f"{case.op}_{k}")(body).func_op
            except ShapeError:  # drop the function it began
                ops = module.body.operations
                ops[len(ops) - 1].operation.erase()
                continue
            runs = [(case.args, run_function(f.operation, case.args))]
            if all(t.is_floating_point() for t in case.args) and case.op not in (
                    "rng_uniform", "rng_bernoulli"):
                try:
                    bigger = [_resized(t, symbols, 1) for t in case.args]
                    runs.append((bigger, run_function(f.operation, bigger)))
                except Exception:  # the case's ops need its own sizes (a slice's bounds)
                    pass
            built.append((f"{case.op}_{k}", case, runs))
    assert built, f"no case of {family} builds with symbolic sizes"
    return module, built


def assert_runs_match(call, case, runs, target: str = "") -> None:
    """`call(*inputs)` against each reference run of a symbolic case (`symbolic_cases`)."""
    for inputs, want in runs:
        got = call(*inputs)
        what = f"{case.op} symbolic{target} at {[tuple(t.shape) for t in inputs]}"
        assert len(got) == len(want), what
        # resized inputs are plain random numbers, not the case's tuned ones
        tolerant = case if inputs is case.args else replace(case, rtol=max(case.rtol, 1e-4))
        for g, w in zip(got, want):
            _assert_same(g, w, tolerant, what)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "source_random"])
def test_family_matches_reference_symbolic(family):
    """Every case built with its sizes symbolic, compiled once, matches the reference at
    its sizes; float-only cases also at sizes one larger."""
    with make_context(), ir.Location.unknown():
        module, built = symbolic_cases(family)
        cm = compile_cpu(module)
    for name, case, runs in built:
        fn = cm.function(name)
        assert fn.symbolic
        assert_runs_match(fn, case, runs)

"""dg-jvp against torch.autograd.functional.jvp, on the same cases as dg-autodiff."""
from __future__ import annotations

import pytest
import torch
from mlir import ir

from fusegrad.dialects.interpreter import run_function
from fusegrad.pass_manager import run_pipeline
from test_autodiff import CASES, assert_close, build, get_func, i64s, rnd


# torch's forward-mode formula for scatter_reduce "prod" returns zeros (torch 2.13):
# these cases are checked against its reverse mode (the double-backward trick)
TORCH_FORWARD_AD_WRONG = {"scatter_mul", "scatter_mul_zero"}


def torch_jvp(fn, inputs, wrt, tangent_outputs, tangents, reverse: bool = False):
    """Output tangents of `fn` along `tangents` (for inputs `wrt`) by torch's forward mode
    (or its reverse mode)."""
    def restricted(*xs):
        args = list(inputs)
        for i, x in zip(wrt, xs):
            args[i] = x
        outs = run_function(fn, args)
        return tuple(outs[i] for i in tangent_outputs)
    jvp = torch.autograd.functional.jvp if reverse else torch.func.jvp
    _, out = jvp(restricted, tuple(inputs[i] for i in wrt), tuple(tangents))
    return list(out)


def check_jvp(module, name, inputs, reverse: bool = False):
    """@name_jvp agrees with torch on @name; returns the @name_jvp inputs used."""
    fn_jvp = get_func(module, f"{name}_jvp")
    wrt, tangent_outputs = i64s(fn_jvp, "dg.wrt"), i64s(fn_jvp, "dg.tangent_outputs")
    n_out = ir.IntegerAttr(fn_jvp.attributes["dg.num_outputs"]).value
    tangents = [torch.randn_like(inputs[i]) for i in wrt]
    res = run_function(fn_jvp, list(inputs) + tangents)
    fn = get_func(module, name)
    assert_close(res[:n_out], run_function(fn, inputs), f"@{name}_jvp outputs")
    if tangent_outputs:
        assert_close(res[n_out:], torch_jvp(fn, inputs, wrt, tangent_outputs, tangents, reverse),
                     f"@{name}_jvp tangents")
    return list(inputs) + tangents


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_jvp_matches_torch(case):
    make_inputs, body = CASES[case]
    inputs = make_inputs()
    ctx, module = build(inputs, body)
    run_pipeline(module, "dg-jvp")
    check_jvp(module, "f", inputs, reverse=case in TORCH_FORWARD_AD_WRONG)


@pytest.mark.parametrize("case", ["softmax", "matmul", "conv2d", "layer_norm", "reduce_max"])
def test_second_order_forward(case):
    """Running dg-jvp twice differentiates @f_jvp (forward over forward)."""
    make_inputs, body = CASES[case]
    inputs = make_inputs()
    ctx, module = build(inputs, body)
    run_pipeline(module, "dg-jvp")
    fn_jvp = get_func(module, "f_jvp")
    tangents = [torch.randn_like(inputs[i]) for i in i64s(fn_jvp, "dg.wrt")]
    run_pipeline(module, "dg-jvp")
    check_jvp(module, "f_jvp", inputs + tangents)


def test_reverse_over_forward():
    """dg-autodiff differentiates @f_jvp: grads of a directional derivative."""
    x = rnd(3, 4)
    ctx, module = build([x], lambda b, x: b.reduce_sum(b.tanh(b.mul(x, x)), dims=[1]))
    run_pipeline(module, "dg-jvp,dg-autodiff")
    t = torch.randn_like(x)
    fwd, bwd = get_func(module, "f_jvp_fwd"), get_func(module, "f_jvp_bwd")
    res = run_function(fwd, [x, t])
    cts = [torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)]
    got = run_function(bwd, res[2:] + cts)
    xl, tl = x.clone().requires_grad_(), t.clone().requires_grad_()
    y, ty = torch.autograd.functional.jvp(lambda v: torch.tanh(v * v).sum(1), xl, tl,
                                          create_graph=True)
    want = torch.autograd.grad([y, ty], [xl, tl], cts)
    assert_close(got, list(want), "reverse over forward")


def test_wrt_option_limits_tangents():
    inputs = [rnd(3), rnd(3)]
    ctx, module = build(inputs, lambda b, x, y: b.mul(x, y))
    run_pipeline(module, "dg-jvp{wrt=1}")
    fn_jvp = get_func(module, "f_jvp")
    assert i64s(fn_jvp, "dg.wrt") == [1]
    check_jvp(module, "f", inputs)

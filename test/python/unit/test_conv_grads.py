"""dg.conv2d_input_grad / dg.conv2d_weight_grad against eager PyTorch's convolution
gradients: the reference rules, the CPU pipeline (PyTorch's convolution_backward through
dg-outline-conv-grads and dg-conv-to-torch), the outlined functions left as loops, and the
generic lowering (the decomposition into forward convolutions)."""
from __future__ import annotations

import pytest
import torch
from mlir import ir
from mlir.dialects import func

from fusegrad.context import make_context
from fusegrad.dialects.builder import Builder
from fusegrad.dialects.interpreter import run_function
from fusegrad.dialects.types import TensorSpec
from fusegrad.pass_manager import run_pipeline
from fusegrad.codegen.common.entries import entry_signatures
from fusegrad.codegen.cpu.llvm.jit import jit_module
from fusegrad.pipelines import PIPELINES as NAMED_PIPELINES

# entries given a C interface, as compile_cpu does, so jit_module can call them
CPU_PIPELINE = "dg-c-interface," + NAMED_PIPELINES["dg-lower-to-llvm"][0]

CONFIGS = {  # (N, C, H, W), (O, KH, KW), stride, padding, dilation, groups
    "stride2": ((2, 3, 9, 9), (4, 3, 3), (2, 2), (1, 1), (1, 1), 1),
    "padding0": ((2, 3, 8, 7), (4, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    "padding1": ((2, 3, 8, 8), (5, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    "padding2": ((2, 3, 8, 8), (4, 3, 3), (1, 1), (2, 2), (1, 1), 1),
    "dilation2": ((1, 2, 9, 9), (3, 3, 3), (1, 1), (1, 1), (2, 2), 1),
    "groups2": ((2, 4, 6, 6), (6, 3, 3), (1, 1), (1, 1), (1, 1), 2),
    "kernel3x2": ((2, 3, 8, 9), (4, 3, 2), (2, 1), (1, 0), (1, 1), 1),
    # everything at once; the last input row is never read (a zero gradient)
    "mixed": ((1, 4, 10, 9), (4, 2, 3), (2, 2), (2, 1), (2, 1), 2),
}

PIPELINES = {
    "library": CPU_PIPELINE,
    "library_nchw": CPU_PIPELINE.replace("dg-conv-to-torch,", "dg-conv-to-torch{layout=nchw},"),
    "library_channels_last": CPU_PIPELINE.replace("dg-conv-to-torch,",
                                                  "dg-conv-to-torch{layout=channels-last},"),
    "outlined_loops": CPU_PIPELINE.replace("dg-conv-to-torch,", ""),
    "decomposition": CPU_PIPELINE.replace("dg-outline-conv-grads,", ""),
}


def _problem(config, dtype):
    (n, c, h, w), (o, kh, kw), stride, padding, dilation, groups = config
    gen = torch.Generator().manual_seed(n + c + h + w + o + kh + kw)
    x = torch.randn(n, c, h, w, generator=gen, dtype=dtype)
    wt = torch.randn(o, c // groups, kh, kw, generator=gen, dtype=dtype)
    attrs = dict(stride=list(stride), padding=list(padding), dilation=list(dilation),
                 groups=groups)
    xl, wl = x.clone().requires_grad_(), wt.clone().requires_grad_()
    y = torch.nn.functional.conv2d(xl, wl, None, stride, padding, dilation, groups)
    g = torch.randn(y.shape, generator=gen, dtype=dtype)
    dx, dw = torch.autograd.grad(y, [xl, wl], g)
    return x, wt, g, attrs, dx, dw


def _module(x, wt, g, attrs):
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            func.FuncOp.from_py_func(TensorSpec.of(g).to_mlir(), TensorSpec.of(wt).to_mlir(),
                                     name="input_grad")(
                lambda g_, w_: Builder().conv2d_input_grad(g_, w_, input_shape=tuple(x.shape),
                                                           **attrs))
            func.FuncOp.from_py_func(TensorSpec.of(x).to_mlir(), TensorSpec.of(g).to_mlir(),
                                     name="weight_grad")(
                lambda x_, g_: Builder().conv2d_weight_grad(x_, g_, weight_shape=tuple(wt.shape),
                                                            **attrs))
    return module


def _function(module, name):
    for op in module.body.operations:
        if ir.StringAttr(op.operation.attributes["sym_name"]).value == name:
            return op.operation
    raise KeyError(name)


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_gradient_ops_match_eager(config, dtype):
    x, wt, g, attrs, dx, dw = _problem(CONFIGS[config], dtype)
    module = _module(x, wt, g, attrs)
    with module.context:
        (got_dx,) = run_function(_function(module, "input_grad"), [g, wt])
        (got_dw,) = run_function(_function(module, "weight_grad"), [x, g])
    torch.testing.assert_close(got_dx, dx, **_tol(dtype))
    torch.testing.assert_close(got_dw, dw, **_tol(dtype))
    for how, pipeline in PIPELINES.items():
        module = _module(x, wt, g, attrs)
        with module.context:
            entries = entry_signatures(module)
            run_pipeline(module, pipeline)
        cm = jit_module(module, entries)
        (got_dx,) = cm.function("input_grad")(g, wt)
        (got_dw,) = cm.function("weight_grad")(x, g)
        torch.testing.assert_close(got_dx, dx, **_tol(dtype), msg=lambda m: f"{how} dx: {m}")
        torch.testing.assert_close(got_dw, dw, **_tol(dtype), msg=lambda m: f"{how} dw: {m}")


def test_cpu_pipeline_calls_convolution_backward_once_per_gradient():
    x, wt, g, attrs, _, _ = _problem(CONFIGS["mixed"], torch.float32)
    module = _module(x, wt, g, attrs)
    with module.context:
        run_pipeline(module, "dg-cpu-linalg,dg-cpu-bufferize,dg-conv-to-torch")
    text = str(module)
    assert text.count("call @__fusegrad_conv2d_backward(") == 2
    assert "linalg.conv" not in text and "linalg.transpose" not in text


def test_generic_lowering_keeps_the_decomposition():
    x, wt, g, attrs, _, _ = _problem(CONFIGS["mixed"], torch.float32)
    module = _module(x, wt, g, attrs)
    with module.context:
        run_pipeline(module, "dg-lower-to-linalg")
    text = str(module)
    assert text.count("linalg.conv_2d_ngchw_gfchw") == 2 and '"dg.' not in text


def test_outlining_shares_one_function_per_signature():
    x, wt, g, attrs, _, _ = _problem(CONFIGS["groups2"], torch.float64)
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            @func.FuncOp.from_py_func(TensorSpec.of(g).to_mlir(), TensorSpec.of(wt).to_mlir())
            def f(g_, w_):
                b = Builder()
                a = b.conv2d_input_grad(g_, w_, input_shape=tuple(x.shape), **attrs)
                return b.add(a, b.conv2d_input_grad(g_, w_, input_shape=tuple(x.shape), **attrs))
        run_pipeline(module, "dg-outline-conv-grads")
        text = str(module)
        assert text.count("func.func private @__dg_conv2d_input_grad_0(") == 1
        assert text.count("call @__dg_conv2d_input_grad_0(") == 2
        assert "dg.conv2d_backward = {" in text
        (got,) = run_function(_function(module, "f"), [g, wt])  # through func.call
    _, _, _, _, dx, _ = _problem(CONFIGS["groups2"], torch.float64)
    torch.testing.assert_close(got, 2 * dx)


@pytest.mark.parametrize("layout", ["nchw", "channels-last"])
@pytest.mark.parametrize("config", ["groups2", "mixed"])
def test_grouped_convolutions_match_eager_in_either_layout(config, layout):
    # the forward convolution and both gradients, activations passed channels-last or not
    x, wt, g, attrs, dx, dw = _problem(CONFIGS[config], torch.float32)
    (n, c, h, w), (o, kh, kw), stride, padding, dilation, groups = CONFIGS[config]
    y = torch.nn.functional.conv2d(x, wt, None, stride, padding, dilation, groups)
    module = _module(x, wt, g, attrs)
    with module.context, ir.Location.unknown(), ir.InsertionPoint(module.body):
        func.FuncOp.from_py_func(TensorSpec.of(x).to_mlir(), TensorSpec.of(wt).to_mlir(),
                                 name="forward")(lambda x_, w_: Builder().conv2d(x_, w_, **attrs))
        entries = entry_signatures(module)
        run_pipeline(module, CPU_PIPELINE.replace("dg-conv-to-torch,",
                                                  f"dg-conv-to-torch{{layout={layout}}},"))
    assert str(module).count("call @__fusegrad_conv2d(") == 1
    cm = jit_module(module, entries)
    torch.testing.assert_close(cm.function("forward")(x, wt)[0], y, **_tol(torch.float32))
    torch.testing.assert_close(cm.function("input_grad")(g, wt)[0], dx, **_tol(torch.float32))
    torch.testing.assert_close(cm.function("weight_grad")(x, g)[0], dw, **_tol(torch.float32))

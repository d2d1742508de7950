"""The public entry points against eager PyTorch: `fusegrad.compile` and
`torch.compile(backend="fusegrad")`, their options and modes, outputs' structure,
inference without autograd."""
from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
import torch

import fusegrad
from compile_options import OPTIONS, compiled, f_pointwise
from fusegrad.frontend.backend import FusegradFallbackWarning

pytestmark = pytest.mark.usefixtures("no_fallback")


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


def test_no_grad_inference():
    lin = torch.nn.Linear(5, 3)
    cm = compiled(lin)
    x = torch.randn(4, 5)
    with torch.no_grad():
        out = cm(x)
        expected = lin(x)
    assert not out.requires_grad
    torch.testing.assert_close(out, expected)


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

"""The transforms' calling conventions: hvp (and jvp) with plain tensors as
torch.autograd.functional.hvp takes them, clear errors for what they cannot take, and
compile options as keywords everywhere (`options=` still accepted, not with keywords)."""
from __future__ import annotations

import pytest
import torch

import fusegrad
from compile_options import OPTIONS
from fusegrad.program import CompileOptions


def h(x):
    return (x.sin() * x).sum()


def test_hvp_takes_plain_tensors_like_torch_autograd_functional():
    torch.manual_seed(0)
    x, v = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    value, product = fusegrad.hvp(h, x, v, **OPTIONS)
    want_value, want = torch.autograd.functional.hvp(h, x, v)
    assert isinstance(product, torch.Tensor)
    torch.testing.assert_close(value, want_value)
    torch.testing.assert_close(product, want)
    value, (product,) = fusegrad.hvp(h, (x,), (v,), **OPTIONS)  # tuples as before
    torch.testing.assert_close(product, want)
    out, tangent = fusegrad.jvp(h, x, v, **OPTIONS)
    torch.testing.assert_close(tangent, torch.func.jvp(h, (x,), (v,))[1])


def test_hvp_says_what_to_pass():
    x = torch.randn(5)
    with pytest.raises(TypeError, match=r"pass primals and tangents alike, both tensors "
                                        r"\(hvp\(f, x, v\)\) or both tuples"):
        fusegrad.hvp(h, x, (x,))
    with pytest.raises(ValueError, match=r"tangent #0 has shape \(4,\), its primal \(5,\)"):
        fusegrad.hvp(h, x, torch.randn(4))
    with pytest.raises(TypeError, match="primal and tangent #0 must be tensors, got a float"):
        fusegrad.hvp(h, (1.0,), (x,))


def test_options_are_keywords_everywhere(tmp_path):
    def f(x):
        return (x.exp() * 2).sum()
    x = torch.randn(6)
    want = torch.func.grad(f)(x)
    torch.testing.assert_close(fusegrad.grad(f, fusion=False, remat=False)(x), want)
    torch.testing.assert_close(fusegrad.grad(f, executor="reference")(x), want)
    torch.testing.assert_close(fusegrad.value_and_grad(f, fusion=False)(x)[1], want)
    torch.testing.assert_close(fusegrad.vjp(f, x, fusion=False)[1](torch.tensor(1.0))[0], want)
    torch.testing.assert_close(fusegrad.hessian(f, fusion=False)(x), torch.diag(2 * x.exp()))
    # the older style still works
    torch.testing.assert_close(fusegrad.grad(f, options=CompileOptions(fusion=False))(x), want)
    path = fusegrad.export(f, x, path=tmp_path / "f", fusion=False, remat=False)
    torch.testing.assert_close(fusegrad.runtime.load(path)(x), f(x))


def test_one_style_per_call():
    def f(x):
        return x.sum()
    with pytest.raises(TypeError, match=r"fusegrad.grad: pass options as keywords \(fusion=...\) "
                                        r"or as options=CompileOptions\(...\), not both"):
        fusegrad.grad(f, options=CompileOptions(), fusion=False)
    with pytest.raises(TypeError, match="fusegrad.hvp: unknown option.s. fuse; the options "
                                        "are fusion, remat, executor"):
        fusegrad.hvp(f, torch.randn(2), torch.randn(2), fuse=False)
    with pytest.raises(TypeError, match="fusegrad.export: unknown option.s. dynamic"):
        fusegrad.export(f, torch.randn(2), path="unused", dynamic=True)
    with pytest.raises(TypeError, match="options= takes a fusegrad.CompileOptions, got a dict"):
        fusegrad.jvp(f, torch.randn(2), torch.randn(2), options={"fusion": False})

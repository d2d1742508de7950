"""x ** c at signed zeros, infinities and NaN: eager's pow(Tensor, Scalar) kernel
special-cases the exponent (0.5 sqrt, -0.5 rsqrt, -1 reciprocal, 2 x*x, 3 x*x*x,
-2 1/(x*x)), which differ from std::pow at -0 and -inf; compiled values and gradients
are eager's there (frontend.md, "Powers with a scalar exponent")."""
from __future__ import annotations

import math

import pytest
import torch

from compile_options import compiled

pytestmark = pytest.mark.usefixtures("no_fallback")

INF, NAN = math.inf, math.nan
EDGES = [-INF, -0.0, 0.0, INF, NAN, -2.0, 2.0]
EXPONENTS = [0.5, -0.5, 2, 3, -1, -2, 1.5]
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def assert_same(got: torch.Tensor, want: torch.Tensor, what: str, exact: torch.Tensor) -> None:
    """NaN where eager's is NaN, and elsewhere the same value and sign bit: exactly where
    `exact` (the special inputs), to rounding at the finite ones (libm and eager's
    vectorized sqrt can differ in the last bit)."""
    assert torch.equal(got.isnan(), want.isnan()), f"{what}: NaN at {got} vs eager {want}"
    keep = ~want.isnan()
    assert torch.equal(got.signbit()[keep], want.signbit()[keep]), f"{what}: {got} vs eager {want}"
    assert torch.equal(got[keep & exact], want[keep & exact]), f"{what}: {got} vs eager {want}"
    torch.testing.assert_close(got[keep], want[keep], msg=what)


def _values_and_grads(fn, x: torch.Tensor, cotangent: float):
    x = x.detach().clone().requires_grad_()
    y = fn(x)
    (g,) = torch.autograd.grad(y, x, torch.full_like(y, cotangent))
    return y.detach(), g


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("exponent", EXPONENTS)
def test_pow_scalar_at_edges_is_eagers(exponent, dtype):
    x = torch.tensor(EDGES, dtype=dtype)
    exact = torch.tensor([v != 2.0 for v in EDGES])
    fn = compiled(lambda t: t ** exponent)
    for cotangent in (1.0, -1.0):
        y, g = _values_and_grads(fn, x, cotangent)
        y0, g0 = _values_and_grads(lambda t: t ** exponent, x, cotangent)
        assert_same(y, y0, f"{dtype} x ** {exponent}", exact)
        if exponent == 1.5 and dtype != torch.float16:  # (the CPU's f16 pow is std::pow)
            # eager's value at -inf is std::pow's (+inf), its derivative 1.5 sqrt(x)'s
            # (NaN): no form of dg ops has both; fusegrad's derivative there is pow's
            assert g[0].item() == cotangent * INF and math.isnan(g0[0].item())
            g, g0, exact_g = g[1:], g0[1:], exact[1:]
        else:
            exact_g = exact
        assert_same(g, g0, f"{dtype} gradient of x ** {exponent} (cotangent {cotangent})",
                    exact_g)


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_pow_scalar_gradcheck(exponent):
    """First and second derivatives in float64, on positive inputs (and negative ones
    where the power of a negative number is real)."""
    torch.manual_seed(0)
    x = torch.rand(3, 4, dtype=torch.float64) + 0.5
    if float(exponent).is_integer():
        x = x * torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    x.requires_grad_()
    fn = compiled(lambda t: t ** exponent)
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


def test_16_bit_rounding_as_eagers():
    """bf16: the exponent in bf16 (1.1 is 1.1015625) and x*x rounded before x*x*x; f16 on
    the CPU: std::pow for every exponent, so -0 ** 0.5 is +0 there."""
    torch.manual_seed(0)
    x = (torch.randn(512, dtype=torch.float64) * 3).to(torch.bfloat16)
    for exponent in (3, 1.1, -2):
        torch._dynamo.reset()
        got = compiled(lambda t: t ** exponent)(x)
        want = x ** exponent
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got[~want.isnan()], want[~want.isnan()]), exponent
    h = torch.tensor([-0.0, -INF], dtype=torch.float16)
    got = compiled(lambda t: t ** 0.5)(h)
    assert got.tolist() == [0.0, INF] and not got.signbit().any()


@pytest.mark.parametrize("exponent", [0.5, -0.5, 1.5, -2.0])
def test_pow_tensor_tensor_is_std_pow(exponent):
    """tensor ** tensor is std::pow in eager, special cases not taken: pow(-0, 0.5) = +0,
    pow(-inf, 0.5) = +inf; so it stays compiled."""
    x = torch.tensor(EDGES, dtype=torch.float32)
    exact = torch.tensor([v != 2.0 for v in EDGES])

    def fn(t):
        return t ** torch.full_like(t, exponent)
    for cotangent in (1.0, -1.0):
        y, g = _values_and_grads(compiled(fn), x, cotangent)
        y0, g0 = _values_and_grads(fn, x, cotangent)
        assert_same(y, y0, f"x ** full({exponent})", exact)
        assert_same(g, g0, f"gradient of x ** full({exponent})", exact)

"""dg-expand-math's polynomials against PyTorch, in ulps, over wide ranges.

Each f32 op is compiled through the whole CPU pipeline (where dg-expand-math
replaces libm) and run on log-uniform magnitudes of both signs from 1e-39 to
1e39, a dense sweep of [-20, 20], and the special values (+-0, +-inf, NaN,
denormals, overflow and underflow thresholds). The error is measured against
float64 PyTorch in units of the float32 spacing of the result, and NaN/inf
must appear exactly where PyTorch has them. Both ways of scaling by 2**n are
checked: integer exponent tricks, and `llvm.intr.ldexp` (what AVX-512 hosts get;
elsewhere it is a libm call, slower but exact).
"""
from __future__ import annotations

import math
from unittest import mock

import pytest
import torch
from mlir import ir

from fusegrad.context import make_context
from fusegrad.codegen.cpu import compile as cpu_compile
from fusegrad.codegen.cpu.compile import compile_cpu

SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan, 1e-45, -1e-45, 1.17e-38, -1.17e-38,
            3.4e38, -3.4e38, 88.7, 88.72, 89.0, -87.3, -88.0, -103.9, -104.5, 1.0, -1.0,
            1e-10, -1e-10, 0.5, -0.999999, 1e6, -1e6]


def _inputs(limit: float = math.inf) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    mags = torch.exp(torch.empty(50000, dtype=torch.float64).uniform_(-90, 90, generator=g))
    signs = torch.where(torch.rand(50000, generator=g) < 0.5, -1.0, 1.0).double()
    x = torch.cat([mags * signs, torch.linspace(-20, 20, 40001, dtype=torch.float64),
                   torch.tensor(SPECIALS, dtype=torch.float64)]).float()
    return x[~(x.abs() > limit)]


# op -> (max ulps allowed, input magnitude limit)
OPS = {
    "exp": (2, math.inf), "expm1": (2, math.inf), "log": (2, math.inf),
    "log1p": (3, math.inf), "tanh": (3, math.inf), "erf": (6, math.inf),
    "sin": (2, 1e6), "cos": (2, 1e6), "sigmoid": (3, math.inf),
}


@pytest.fixture(scope="module", params=[False, True], ids=["shifts", "ldexp"])
def compiled(request):
    n = _inputs().numel()
    text = "\n".join(
        f'func.func @{op}(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n'
        f'  %0 = "dg.{op}"(%x) : (tensor<{n}xf32>) -> tensor<{n}xf32>\n'
        f'  return %0 : tensor<{n}xf32>\n}}' for op in OPS)
    with make_context(), mock.patch.object(cpu_compile, "_host_has_avx512f",
                                           lambda: request.param):
        return compile_cpu(ir.Module.parse(text))


def _ulp_error(got: torch.Tensor, x: torch.Tensor, op: str) -> torch.Tensor:
    """Distance from float64 PyTorch in float32 spacings; 0 where it equals float32 PyTorch."""
    ref = getattr(torch, op)(x.double())
    want = getattr(torch, op)(x)
    rounded = ref.float().abs()
    spacing = (torch.nextafter(rounded, torch.tensor(math.inf)) - rounded).double()
    spacing = spacing.clamp_min(2.0 ** -149)
    err = (got.double() - ref).abs() / spacing
    same = (got == want) | (got.isnan() & want.isnan())
    return torch.where(same, torch.zeros_like(err), err)


@pytest.mark.parametrize("op", sorted(OPS))
def test_f32_within_a_few_ulp_of_pytorch(compiled, op):
    bound, limit = OPS[op]
    full = _inputs()
    keep = ~(full.abs() > limit)  # NaN kept
    x = torch.where(keep, full, torch.zeros_like(full))
    (got,) = compiled.function(op)(x)
    got, x = got[keep], x[keep]
    want = getattr(torch, op)(x)
    assert torch.equal(got.isnan(), want.isnan()), f"{op}: NaN at {x[got.isnan() != want.isnan()][:8]}"
    assert torch.equal(got.isinf(), want.isinf()), f"{op}: inf at {x[got.isinf() != want.isinf()][:8]}"
    inf = got.isinf()
    assert torch.equal(got[inf], want[inf]), f"{op}: wrong sign of infinity"
    err = _ulp_error(got, x, op)
    worst = int(err.argmax())
    assert err.max() <= bound, (f"dg.{op}: {err.max():.2f} ulp at x={x[worst].item()!r}: "
                                f"got {got[worst].item()!r}, torch {want[worst].item()!r}")


def test_f64_log1p_within_a_few_ulp_of_pytorch_down_to_tiny_arguments():
    """f64 log1p is Goldberg's formula around libm's log (LLVM's own lowering, log(1 + x),
    returned 0 below 1e-16; this is within 2 ulp); its special values are PyTorch's."""
    g = torch.Generator().manual_seed(0)
    mags = torch.exp(torch.empty(20000, dtype=torch.float64).uniform_(-690, 690, generator=g))
    specials = [0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, -2.0, 5e-324, -5e-324,
                1e-300, 1e-17, -1e-17, -0.999999999, 1.7e308]
    x = torch.cat([mags, -mags[mags < 1], torch.tensor(specials, dtype=torch.float64)])
    text = (f'func.func @log1p(%x: tensor<{x.numel()}xf64>) -> tensor<{x.numel()}xf64> {{\n'
            f'  %0 = "dg.log1p"(%x) : (tensor<{x.numel()}xf64>) -> tensor<{x.numel()}xf64>\n'
            f'  return %0 : tensor<{x.numel()}xf64>\n}}')
    with make_context():
        (got,) = compile_cpu(ir.Module.parse(text)).function("log1p")(x)
    want = torch.log1p(x)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got[want.isinf()], want[want.isinf()])
    finite = want.isfinite()
    spacing = (torch.nextafter(want[finite].abs(), torch.tensor(math.inf, dtype=torch.float64))
               - want[finite].abs()).clamp_min(5e-324)
    ulps = (got[finite] - want[finite]).abs() / spacing
    assert ulps.max() <= 4, f"{ulps.max():.2f} ulp at x={x[finite][ulps.argmax()].item()!r}"

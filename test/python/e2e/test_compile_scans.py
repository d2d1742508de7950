"""cumsum, cumprod, cummax/cummin and logcumsumexp compiled (one dg.scan each) against
eager: values and gradients with NaN, infinities and zeros where eager's rules for them
show (cumprod's gradient is NaN at a NaN and the product of the others at a zero),
integer cumsums, float64 gradcheck and gradgradcheck, and one program for every size
of the scanned dim."""
from __future__ import annotations

import math

import pytest
import torch

import fusegrad
from compile_options import compiled

pytestmark = pytest.mark.usefixtures("no_fallback")

SCANS = {
    "cumsum": lambda t, d: torch.cumsum(t, d),
    "cumprod": lambda t, d: torch.cumprod(t, d),
    "cummax": lambda t, d: torch.cummax(t, d),
    "cummin": lambda t, d: torch.cummin(t, d),
    "logcumsumexp": lambda t, d: torch.logcumsumexp(t, d),
}


def _specials(rows: int, length: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows holding a NaN, +inf, -inf, both infinities, zeros (one, two), ties."""
    x = torch.randn(rows, length, dtype=dtype, generator=torch.Generator().manual_seed(0))
    x[0, 3] = math.nan
    x[1, 5] = math.inf
    x[2, 7] = -math.inf
    x[3, 2], x[3, 9] = math.inf, -math.inf
    x[4, 4] = 0.0
    x[5, 1] = x[5, 6] = 0.0
    x[6, 0] = x[6, 8] = x[6, length - 1]  # ties
    x[7, 2], x[7, 6] = 0.0, math.nan
    return x


def _outputs(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple) else [out]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [1, 0])
@pytest.mark.parametrize("length", [12, 70])
@pytest.mark.parametrize("op", sorted(SCANS))
def test_values_and_gradients_match_eager_at_nan_infinities_and_zeros(op, length, dim, dtype):
    x = _specials(8, length, dtype)
    x = x if dim == 1 else x.t().contiguous()
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    got = _outputs(compiled(lambda t: SCANS[op](t, dim))(got_x))
    want = _outputs(SCANS[op](want_x, dim))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True)
    weight = torch.randn(x.shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
    (got[0] * weight).sum().backward()
    (want[0] * weight).sum().backward()
    torch.testing.assert_close(got_x.grad, want_x.grad, equal_nan=True)


def test_cumprod_gradient_is_nan_at_a_nan_and_the_others_product_at_a_zero():
    x = torch.tensor([[2.0, math.nan, 3.0], [2.0, 0.0, 3.0]], requires_grad=True)
    compiled(lambda t: torch.cumprod(t, 1))(x).sum().backward()
    assert x.grad[0].isnan().all()
    torch.testing.assert_close(x.grad[1], torch.tensor([1.0, 2.0 + 2.0 * 3.0, 0.0]))


@pytest.mark.parametrize("result", [0, 1])
def test_cummax_values_or_indices_alone(result):
    """Inference reading one of cummax's results (the other one's stores are dropped)."""
    x = _specials(8, 70, torch.float32)
    with torch.no_grad():
        got = compiled(lambda t: torch.cummax(t, 1)[result])(x)
    torch.testing.assert_close(got, torch.cummax(x, 1)[result], equal_nan=True)


@pytest.mark.parametrize("op", sorted(SCANS))
def test_float64_gradcheck_and_gradgradcheck(op):
    x = torch.randn(3, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    if op == "cumprod":
        x[0, 2] = x[1, 1] = x[1, 5] = 0.0
    f = compiled(lambda t: _outputs(SCANS[op](t, 1))[0])
    torch.autograd.gradcheck(f, (x.requires_grad_(),))
    torch.autograd.gradgradcheck(f, (x,))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integer_cumsum_and_cumprod_match_eager(dtype):
    x = torch.randint(-3, 4, (5, 1000), generator=torch.Generator().manual_seed(3))
    x = (x > 0) if dtype == torch.bool else x.to(dtype)
    for op in ("cumsum", "cumprod", "cummax"):
        for dim in (0, 1):
            got = _outputs(compiled(lambda t: SCANS[op](t, dim))(x))
            want = _outputs(SCANS[op](x, dim))
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and torch.equal(g, w), (op, dim)


@pytest.mark.parametrize("op", sorted(SCANS))
def test_one_program_for_every_length_of_the_scanned_dim(op):
    """dynamic=True: the scanned dim and the other one symbolic, values and gradients as
    eager's at lengths across the CPU's vector width, with one graph compiled."""
    from fusegrad.frontend import compile_history

    compile_history.clear()
    f = fusegrad.compile(lambda t: _outputs(SCANS[op](t, 1))[0].sin(), dynamic=True)
    for rows, length in ((3, 5), (2, 16), (4, 37), (3, 300)):
        x = torch.randn(rows, length, dtype=torch.float64,
                        generator=torch.Generator().manual_seed(length))
        got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, want = f(got_x), _outputs(SCANS[op](want_x, 1))[0].sin()
        torch.testing.assert_close(got, want)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(got_x.grad, want_x.grad)
    assert [r.kind for r in fusegrad.compile_history()] == ["for every size"]

"""Ties, infinities, NaN and extreme magnitudes as eager treats them (issue 47 item 2).

- max(), min(), median() and nanmedian() without a dim share the gradient evenly among
  the elements equal to the result, the NaNs where it is NaN (`dg.evenly_read`);
  amax/amin keep theirs (a NaN result gives the whole slice NaN, as eager's).
- Adaptive average pooling (and interpolate's area mode) to sizes that do not divide:
  each output sums its own window, so an infinity or NaN reaches the outputs (and a
  cotangent's the inputs) it reaches in eager, not the whole channel.
- Linear interpolation: eager's weights and order, so an infinite pixel's neighbours
  are infinite, or NaN exactly where eager's 0 * inf is.
- var and std square in f64, as eager's: values near 1e19 no longer overflow, and a std
  of values near 1e-25 or of denormals does not underflow to 0.

Values and gradients are compared with eager's: NaN and infinities at the same
positions always, the values themselves exactly where eager's arithmetic is the same.
"""
from __future__ import annotations

import math
from typing import Callable

import pytest
import torch

from compile_options import compiled

pytestmark = pytest.mark.usefixtures("no_fallback")

F = torch.nn.functional
INF, NAN = math.inf, math.nan
TINY = 1e-40  # a float32 denormal


def values_and_grads(fn: Callable, x: torch.Tensor, cotangent: torch.Tensor | float):
    x = x.detach().clone().requires_grad_()
    y = fn(x)
    ct = torch.full_like(y, cotangent) if isinstance(cotangent, float) else cotangent
    (g,) = torch.autograd.grad(y, x, ct)
    return y.detach(), g


def assert_eagers(fn: Callable, eager: Callable, x: torch.Tensor, cotangent, what: str,
                  exact: bool = False, relative: float | None = None) -> None:
    """fn's value and gradient are eager's: NaN and infinities at the same places, and the
    rest equal (`exact`), or to rounding (within `relative` of the largest magnitude)."""
    for got, want, part in zip(values_and_grads(fn, x, cotangent),
                               values_and_grads(eager, x, cotangent), ("value", "gradient")):
        finite = want[want.isfinite()]
        tol = dict(rtol=0.0, atol=0.0) if exact else \
            dict(rtol=relative, atol=relative * finite.abs().max().item() if finite.numel()
                 else 0.0) if relative else {}
        torch.testing.assert_close(got, want, equal_nan=True, **tol,
                                   msg=lambda m: f"{what}, {part}: {m}\n{got}\nvs eager\n{want}")


# ---------------------------------------------------------------- ties and NaN
TIED = {
    "ties": [3.0, 1.0, 3.0, -2.0, 3.0, -2.0],
    "nan": [1.0, NAN, 2.0, NAN, 3.0, -1.0],
    "all nan": [NAN] * 6,
    "infinities": [INF, 1.0, INF, -INF, -INF, 0.0],
    "signed zeros": [0.0, -0.0, -1.0, -0.0, 1.0, 1.0],
    "denormals": [TINY, 2 * TINY, 2 * TINY, TINY, 0.0, 2 * TINY],
    "tied median": [1.0, 2.0, 2.0, 3.0, 2.0, 0.0],
}
WHOLE = {"max": torch.max, "min": torch.min, "median": torch.median,
         "nanmedian": torch.nanmedian, "amax": torch.amax, "amin": torch.amin}


@pytest.mark.parametrize("name", sorted(WHOLE))
def test_whole_tensor_extremes_and_medians_at_ties_and_nan(name):
    """Exactly eager's values and gradients: the cotangent over the count of tied
    elements (or NaNs), 0 elsewhere even for an infinite cotangent (eager's masked_fill);
    amax and amin: NaN everywhere where the result is NaN."""
    op = WHOLE[name]
    fn = compiled(op)
    for case, values in TIED.items():
        for shape in ((6,), (2, 3)):
            x = torch.tensor(values).reshape(shape)
            for cotangent in (1.0, -3.0, INF):
                assert_eagers(fn, op, x, cotangent, f"{name} of {case} {shape}, cotangent "
                              f"{cotangent}", exact=True)


@pytest.mark.parametrize("name", ["max", "min", "median", "nanmedian"])
def test_whole_tensor_extremes_and_medians_gradcheck(name):
    torch.manual_seed(0)
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    fn = compiled(lambda t: WHOLE[name](t) * t.sum())
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


# ---------------------------------------------------------------- windows and interpolation
POOLS = {
    "adaptive_avg_pool2d 7x9 to 3x4": lambda t: F.adaptive_avg_pool2d(t, (3, 4)),
    "adaptive_avg_pool2d 7x9 to 5x5 (overlapping)": lambda t: F.adaptive_avg_pool2d(t, 5),
    "adaptive_avg_pool1d 63 to 5": lambda t: F.adaptive_avg_pool1d(t.flatten(2), 5),
    "adaptive_avg_pool3d 7x3x3 to 3x2x2":
        lambda t: F.adaptive_avg_pool3d(t.reshape(1, 2, 7, 3, 3), (3, 2, 2)),
    "area 7x9 to 5x6": lambda t: F.interpolate(t, size=(5, 6), mode="area"),
    "area 7x9 to 10x11": lambda t: F.interpolate(t, size=(10, 11), mode="area"),
}
INTERPOLATIONS = {
    **{f"bilinear {size} align_corners={corners}":
       (lambda t, size=size, corners=corners: F.interpolate(t, size=size, mode="bilinear",
                                                            align_corners=corners))
       for size in ((12, 13), (4, 5), (7, 13), (1, 1)) for corners in (False, True)},
    **{f"bilinear x{scale} align_corners={corners}":
       (lambda t, scale=scale, corners=corners: F.interpolate(
           t, scale_factor=scale, mode="bilinear", align_corners=corners))
       for scale in (2.0, 0.7) for corners in (False, True)},
    "linear 9 to 20": lambda t: F.interpolate(t.flatten(1, 2), size=20, mode="linear"),
    "trilinear 7x9 to 3x10x5":
        lambda t: F.interpolate(t.unsqueeze(2).expand(1, 2, 2, 7, 9), size=(3, 10, 5),
                                mode="trilinear"),
}


def special_images(dtype: torch.dtype = torch.float32) -> list[tuple[str, torch.Tensor]]:
    """[1, 2, 7, 9] images with an infinity at every pixel of one channel in turn, -inf
    and NaN at every third, opposite infinities side by side, and denormals."""
    torch.manual_seed(0)
    base = torch.rand(1, 2, 7, 9, dtype=dtype)
    images = []
    for value, step in ((INF, 1), (-INF, 3), (NAN, 3)):
        for k in range(0, 63, step):
            x = base.clone()
            x[0, 0].view(-1)[k] = value
            images.append((f"{value} at pixel {k}", x))
    both = base.clone()
    both[0, 1, 3, 4], both[0, 1, 3, 5] = INF, -INF
    images += [("inf beside -inf", both), ("denormals", base * TINY)]
    return images


def special_cotangents(y: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """Ones, and ones with an infinity or NaN at each output of one channel in turn."""
    out = [("ones", torch.ones_like(y))]
    for value in (INF, NAN):
        for k in range(y[0, 0].numel()):
            ct = torch.ones_like(y)
            ct[0, 0].view(-1)[k] = value
            out.append((f"{value} at output {k}", ct))
    return out


@pytest.mark.parametrize("name", sorted({**POOLS, **INTERPOLATIONS}))
def test_windows_spread_non_finite_values_as_eager(name):
    op = {**POOLS, **INTERPOLATIONS}[name]
    fn = compiled(op)
    for case, x in special_images():
        assert_eagers(fn, op, x, 1.0, f"{name}, {case}")
    x = special_images()[0][1].nan_to_num(posinf=0.5)
    for case, ct in special_cotangents(op(x)):
        assert_eagers(fn, op, x, ct, f"{name}, cotangent {case}")


def test_bilinear_of_channels_last_images_as_eager():
    op = INTERPOLATIONS["bilinear (12, 13) align_corners=False"]
    fn = compiled(op)
    for case, x in special_images()[::7]:
        assert_eagers(fn, op, x.to(memory_format=torch.channels_last), 1.0, case)


@pytest.mark.parametrize("name", ["adaptive_avg_pool2d 7x9 to 3x4", "area 7x9 to 10x11",
                                  "adaptive_avg_pool3d 7x3x3 to 3x2x2"])
def test_window_sums_gradcheck(name):
    torch.manual_seed(0)
    x = torch.rand(1, 2, 7, 9, dtype=torch.float64, requires_grad=True)
    fn = compiled(lambda t: POOLS[name](t) ** 2)
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


@pytest.mark.parametrize("corners", [False, True])
def test_bilinear_gradcheck(corners):
    torch.manual_seed(0)
    x = torch.rand(1, 2, 7, 9, dtype=torch.float64, requires_grad=True)
    fn = compiled(lambda t: INTERPOLATIONS[f"bilinear (12, 13) align_corners={corners}"](t) ** 2)
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))


# ---------------------------------------------------------------- var and std
MOMENTS = {
    "var": lambda t: t.var(), "std": lambda t: t.std(), "var over rows": lambda t: t.var(1),
    "std over rows, correction 0": lambda t: t.std(1, correction=0),
    "var_mean over rows": lambda t: torch.var_mean(t, 1)[0],
    "std_mean": lambda t: torch.std_mean(t)[0],
}


@pytest.mark.parametrize("name", sorted(MOMENTS))
def test_var_and_std_of_extreme_magnitudes_as_eager(name):
    """Values and gradients at 1, 1e19 (squares past f32's range), 1e-25 and denormals
    (squares below it), to 1e-6 of their largest (eager's gradient subtracts its f32 mean,
    fusegrad's the f64 one); a std's gradient at denormals is eager's formula overflowing
    (1 / (2 std) is inf), so only its value is compared there."""
    op = MOMENTS[name]
    fn = compiled(op)
    torch.manual_seed(0)
    x = torch.randn(4, 300)
    for scale in (1.0, 1e19, 1e-25, 1e-41):
        what = f"{name} of values near {scale:g}"
        if scale == 1e-41 and name.startswith("std"):
            torch.testing.assert_close(fn(x * scale), op(x * scale), msg=what)
            continue
        assert_eagers(fn, op, x * scale, 1.0, what, relative=1e-6)


@pytest.mark.parametrize("name", ["var", "std over rows, correction 0", "var_mean over rows"])
def test_var_and_std_gradcheck(name):
    torch.manual_seed(0)
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    fn = compiled(MOMENTS[name])
    assert torch.autograd.gradcheck(fn, (x,))
    assert torch.autograd.gradgradcheck(fn, (x,))

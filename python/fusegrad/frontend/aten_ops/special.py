"""Special functions computed in f64: lgamma and digamma (Lanczos, reflection), erfinv."""
from __future__ import annotations

import math
from typing import Callable, Sequence

from mlir import ir

from ...dialects.types import is_float
from .emit import Emit, Unsupported, aten, cast, full_as, handles


def _in_f64(fn: Callable[[Emit, ir.Value], ir.Value]) -> Callable:
    """A unary float op computed in f64 whatever the result's dtype: series whose terms
    cancel (Lanczos' sum loses three digits) would leave f32 results 1e-4 off."""
    def handler(em: Emit, x: ir.Value) -> ir.Value:
        out = em.out0
        if not is_float(out.dtype):
            raise Unsupported(f"integer result {out.dtype}")
        return cast(em, fn(em, cast(em, x, "f64")), out.dtype)
    return handler


# Lanczos' approximation, g = 7, 9 terms: Gamma to ~1e-15 relative for x >= 1/2
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012,
            9.9843695780195716e-6, 1.5056327351493116e-7)


def _reflected(em: Emit, x: ir.Value, right: Callable[[ir.Value], ir.Value],
               left: Callable[[ir.Value, ir.Value], ir.Value]) -> ir.Value:
    """right(x) for x >= 1/2, else left(x, right(1 - x)) (a reflection formula). Each side
    reads a safe stand-in (1 or 1/4) where the other is taken, so neither computes an
    infinity that the select's gradient would multiply by zero into NaN."""
    b = em.b
    small = b.compare(x, full_as(em, x, 0.5), direction="lt")
    mirrored = b.select(small, b.sub(full_as(em, x, 1.0), x), x)
    base = right(mirrored)
    return b.select(small, left(b.select(small, x, full_as(em, x, 0.25)), base), base)


def _lgamma(em: Emit, x: ir.Value) -> ir.Value:
    """Lanczos for x >= 1/2; below, log(pi / |sin(pi x)|) - lgamma(1 - x); +inf at the
    poles (0, -1, -2, ...) as eager. The gradient is the formula's own (digamma to ~1e-13)."""
    b = em.b

    def lanczos(y: ir.Value) -> ir.Value:
        z = b.sub(y, full_as(em, y, 1.0))
        total = full_as(em, z, _LANCZOS[0])
        for i, p in enumerate(_LANCZOS[1:], start=1):
            total = b.add(total, b.div(full_as(em, z, p), b.add(z, full_as(em, z, float(i)))))
        t = b.add(z, full_as(em, z, _LANCZOS_G + 0.5))
        return b.add(b.add(full_as(em, z, 0.5 * math.log(2 * math.pi)),
                           b.mul(b.add(z, full_as(em, z, 0.5)), b.log(t))),
                     b.sub(b.log(total), t))

    def reflect(x: ir.Value, mirrored: ir.Value) -> ir.Value:
        sine = b.abs(b.sin(_pi_times_fraction(em, x)))
        return b.sub(b.log(b.div(full_as(em, x, math.pi), sine)), mirrored)
    y = _reflected(em, x, lanczos, reflect)
    pole = b.create("or", [_nonpositive_integer(em, x),
                           b.compare(x, full_as(em, x, math.inf), direction="eq")])
    return b.select(pole, full_as(em, y, math.inf), y)


def _pi_times_fraction(em: Emit, x: ir.Value) -> ir.Value:
    """pi (x - round(x)): sin and tan of it are those of pi x up to sign (sin) or exactly
    (tan), without pi x's rounding, which near a pole (-8 + 1e-15) is larger than the
    distance to it. x - round(x) is exact."""
    return em.b.mul(em.b.sub(x, em.b.round(x)), full_as(em, x, math.pi))


def _nonpositive_integer(em: Emit, x: ir.Value) -> ir.Value:
    b = em.b
    return b.create("and", [b.compare(x, full_as(em, x, 0.0), direction="le"),
                            b.compare(x, b.floor(x), direction="eq")])


def _digamma(em: Emit, x: ir.Value) -> ir.Value:
    """For x >= 1/2: psi(x) = psi(x + k) - sum 1/(x + j), shifted (k <= 10, unrolled) to
    x + k >= 10, where the asymptotic series to B_14 is exact to ~1e-16; below,
    psi(1 - x) - pi / tan(pi x). -inf at 0 and NaN at the negative integers, as eager."""
    b = em.b

    def shifted(y: ir.Value) -> ir.Value:
        correction = full_as(em, y, 0.0)
        for _ in range(10):
            small = b.compare(y, full_as(em, y, 10.0), direction="lt")
            correction = b.add(correction, b.select(small, b.reciprocal(y), full_as(em, y, 0.0)))
            y = b.select(small, b.add(y, full_as(em, y, 1.0)), y)
        u = b.reciprocal(b.mul(y, y))
        # sum over k of B_2k / (2k y^2k), a polynomial in u = 1 / y^2
        series = b.mul(u, _horner(em, u, (1 / 12, -691 / 32760, 1 / 132, -1 / 240, 1 / 252,
                                          -1 / 120, 1 / 12)))
        psi = b.sub(b.sub(b.log(y), b.div(full_as(em, y, 0.5), y)), series)
        return b.sub(psi, correction)

    def reflect(x: ir.Value, mirrored: ir.Value) -> ir.Value:
        px = _pi_times_fraction(em, x)
        return b.sub(mirrored, b.div(b.mul(full_as(em, x, math.pi), b.cos(px)), b.sin(px)))
    y = _reflected(em, x, shifted, reflect)
    zero = b.compare(x, full_as(em, x, 0.0), direction="eq")
    y = b.select(_nonpositive_integer(em, x), full_as(em, y, math.nan), y)
    return b.select(zero, full_as(em, y, -math.inf), y)


def _horner(em: Emit, x: ir.Value, coefs: Sequence[float]) -> ir.Value:
    """The polynomial with `coefs` (highest degree first) at x."""
    p = full_as(em, x, coefs[0])
    for c in coefs[1:]:
        p = em.b.add(full_as(em, x, c), em.b.mul(p, x))
    return p


def _erfinv(em: Emit, y: ir.Value) -> ir.Value:
    """Giles' single-precision approximation, then four Newton steps on erf(x) = y: f64
    accuracy, and the gradient of the last steps is 1 / erf'(x), eager's
    sqrt(pi) / 2 exp(x^2), to the same accuracy (the approximation's own slope cancels).
    +-inf at +-1, NaN beyond; inside, the steps read y = 0 there."""
    b = em.b
    inside = b.compare(b.abs(y), full_as(em, y, 1.0), direction="lt")
    y_in = b.select(inside, y, full_as(em, y, 0.0))
    one = full_as(em, y, 1.0)
    w = b.neg(b.log(b.mul(b.sub(one, y_in), b.add(one, y_in))))
    central = b.compare(w, full_as(em, w, 5.0), direction="lt")
    w_near = b.sub(b.select(central, w, full_as(em, w, 2.5)), full_as(em, w, 2.5))
    w_far = b.sub(b.sqrt(b.select(central, full_as(em, w, 9.0), w)), full_as(em, w, 3.0))
    near = _horner(em, w_near, (
        2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
        -0.00125372503, -0.00417768164, 0.246640727, 1.50140941))
    far = _horner(em, w_far, (
        -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
        -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))
    x = b.mul(b.select(central, near, far), y_in)
    # in the tails (|y| >= 1/2) on log(erfc(|x|)) = log(1 - |y|), which is nearly
    # quadratic: erf(x) - y there loses its digits, and the approximation (made for f32)
    # is 0.4 off at 1 - 1e-15, which plain steps on erf close 0.08 at a time
    tail = b.compare(b.abs(y_in), full_as(em, y, 0.5), direction="ge")
    sign = b.sign(y_in)
    log_rest = b.log(b.sub(one, b.abs(y_in)))
    for _ in range(4):
        slope = b.mul(b.exp(b.neg(b.mul(x, x))), full_as(em, x, 2 / math.sqrt(math.pi)))
        rest = b.erfc(b.abs(x))
        tail_step = b.mul(sign, b.div(b.mul(b.sub(b.log(rest), log_rest), rest), slope))
        x = b.select(tail, b.add(x, tail_step), b.sub(x, b.div(b.sub(b.erf(x), y_in), slope)))
    edge = b.mul(full_as(em, y, math.inf), b.sign(y))
    beyond = b.compare(b.abs(y), full_as(em, y, 1.0), direction="gt")
    edge = b.select(beyond, full_as(em, y, math.nan), edge)
    return b.select(inside, x, edge)


handles(aten.erfinv.default)(_in_f64(_erfinv))
handles(aten.lgamma.default)(_in_f64(_lgamma))
handles(aten.digamma.default)(_in_f64(_digamma))

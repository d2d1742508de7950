"""The random ops, seeded by an input of the graph (`Emit.seed`): rand/randn, uniform,
randint, randperm, rrelu, bernoulli, dropout."""
from __future__ import annotations

import math
from typing import Any

from mlir import ir

from ...dialects.builder import spec
from .emit import Emit, Unsupported, _opmath, aten, cast, full_as, handles, is_size
from .reductions import SORT_MAX_N, _sort


@handles(aten.rand.default, aten.rand_like.default, random=True)
def _rand(em: Emit, *args: Any, **kwargs: Any) -> ir.Value:
    out = em.out0
    return em.b.rng_uniform(em.seed(), shape=out.shape, dtype=out.dtype)


@handles(aten.uniform.default, random=True)
def _uniform(em: Emit, x: ir.Value, low: float = 0.0, high: float = 1.0, *,
             generator: Any = None) -> ir.Value:
    if generator is not None:
        raise Unsupported("an explicit generator")
    out = em.out0
    u = em.b.rng_uniform(em.seed(), shape=out.shape, dtype=_opmath(out.dtype))
    u = em.b.add(em.b.mul(u, full_as(em, u, float(high) - float(low))), full_as(em, u, float(low)))
    return cast(em, u, out.dtype)


# randint draws from 24-bit uniforms: ranges up to this many values
RANDINT_MAX_RANGE = 1 << 24


@handles(aten.randint.default, aten.randint.low, aten.randint_like.default,
         aten.randint_like.low_dtype, random=True)
def _randint(em: Emit, *args: Any, generator: Any = None, **kwargs: Any) -> ir.Value:
    """floor(u (high - low)) + low from one uniform draw per element (an Informer's
    attention samples its keys so)."""
    if generator is not None:
        raise Unsupported("an explicit generator")
    target = em.node.target
    numbers = [a for a in args if isinstance(a, int) and not isinstance(a, bool) or is_size(a)]
    if any(is_size(a) for a in numbers):
        raise Unsupported("randint over a range of symbolic size")
    if target in (aten.randint.default, aten.randint_like.default):
        low, high = 0, numbers[0]
    else:
        low, high = numbers[0], numbers[1]
    if not 0 < high - low <= RANDINT_MAX_RANGE:
        raise Unsupported(f"randint over {high - low} values (compiled for 1 to "
                          f"{RANDINT_MAX_RANGE})")
    out = em.out0
    u = em.b.rng_uniform(em.seed(), shape=out.shape, dtype="f64")
    r = em.b.floor(em.b.mul(u, full_as(em, u, float(high - low))))
    return cast(em, em.b.add(r, full_as(em, r, float(low))), out.dtype)


@handles(aten.randperm.default, random=True)
def _randperm(em: Emit, n: int, *, generator: Any = None, **kwargs: Any) -> ir.Value:
    """The order that sorts n uniform draws (ties, rare at 24 bits, keep index order)."""
    if generator is not None:
        raise Unsupported("an explicit generator")
    out = em.out0
    if n > SORT_MAX_N:
        raise Unsupported(f"randperm of {n} (a sort, compiled up to {SORT_MAX_N})")
    u = em.b.rng_uniform(em.seed(), shape=(n,), dtype="f32")
    return cast(em, _sort(em, u, 0)[1], out.dtype)


@handles(aten.randn.default, aten.randn_like.default, aten.normal_functional.default,
         random=True)
def _randn(em: Emit, *args: Any, generator: Any = None, **kwargs: Any) -> ir.Value:
    """Standard normal samples by Box-Muller from two uniform streams:
    sqrt(-2 log(1 - u1)) cos(2 pi u2), 1 - u1 in (0, 1] (so no log 0; |z| <= 5.8 from
    the uniforms' 24 bits). normal_ (mean, std) scales them; like eager's, its result
    has no gradient to the tensor it fills."""
    if generator is not None:
        raise Unsupported("an explicit generator")
    out = em.out0
    b = em.b
    ct = _opmath(out.dtype)
    u1 = b.rng_uniform(em.seed(), shape=out.shape, dtype=ct)
    u2 = b.rng_uniform(em.seed(), shape=out.shape, dtype=ct)
    radius = b.sqrt(b.mul(b.log(b.sub(full_as(em, u1, 1.0), u1)), full_as(em, u1, -2.0)))
    z = b.mul(radius, b.cos(b.mul(u2, full_as(em, u2, 2 * math.pi))))
    if em.node.target is aten.normal_functional.default:
        mean, std = (list(args[1:]) + [kwargs.get("mean", 0.0), kwargs.get("std", 1.0)])[:2] \
            if len(args) > 1 else (kwargs.get("mean", 0.0), kwargs.get("std", 1.0))
        z = b.add(b.mul(z, full_as(em, z, float(std))), full_as(em, z, float(mean)))
    return cast(em, z, out.dtype)


@handles(aten.rrelu_with_noise_functional.default, random=True)
def _rrelu(em: Emit, x: ir.Value, noise: ir.Value, lower: float = 0.125, upper: float = 1 / 3,
           training: bool = False, generator: Any = None) -> list[ir.Value]:
    """Randomized leaky ReLU: negative inputs scaled by a slope drawn uniformly from
    [lower, upper] per element in training (the noise result holds the slopes, 1 where
    x >= 0), by their mean in evaluation (noise unchanged)."""
    if generator is not None:
        raise Unsupported("an explicit generator")
    b = em.b
    out = em.out0
    ct = _opmath(out.dtype)
    y = cast(em, x, ct)
    if training:
        u = b.rng_uniform(em.seed(), shape=out.shape, dtype=ct)
        slope = b.add(b.mul(u, full_as(em, u, float(upper) - float(lower))),
                      full_as(em, u, float(lower)))
        negative = b.compare(y, full_as(em, y, 0.0), direction="lt")
        slope = b.select(negative, slope, full_as(em, slope, 1.0))
        noise = cast(em, slope, em.out[1].dtype)
    else:
        negative = b.compare(y, full_as(em, y, 0.0), direction="lt")
        slope = b.select(negative, full_as(em, y, (float(lower) + float(upper)) / 2),
                         full_as(em, y, 1.0))
    return [cast(em, b.mul(y, slope), out.dtype), noise]


@handles(aten.bernoulli.p, random=True)
def _bernoulli_p(em: Emit, x: ir.Value, p: float = 0.5, *, generator: Any = None) -> ir.Value:
    if generator is not None:
        raise Unsupported("an explicit generator")
    out = em.out0
    return em.b.rng_bernoulli(em.seed(), shape=out.shape, dtype=out.dtype, p=float(p))


@handles(aten.bernoulli.default, random=True)
def _bernoulli(em: Emit, probs: ir.Value, *, generator: Any = None) -> ir.Value:
    if generator is not None:
        raise Unsupported("an explicit generator")
    out = em.out0
    u = em.b.rng_uniform(em.seed(), shape=out.shape, dtype=spec(probs).dtype)
    return cast(em, em.b.compare(u, probs, direction="lt"), out.dtype)


@handles(aten.native_dropout.default, random=True)
def _native_dropout(em: Emit, x: ir.Value, p: float, train: bool | None) -> list[ir.Value]:
    out, mask_spec = em.out
    if train is False:
        return [x, em.b.full(shape=mask_spec.shape, dtype="i1", value=1.0)]
    keep = em.b.rng_bernoulli(em.seed(), shape=out.shape, dtype=out.dtype, p=1.0 - float(p))
    scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - float(p))
    y = em.b.mul(em.b.mul(x, keep), full_as(em, x, scale))
    return [y, em.b.compare(keep, full_as(em, keep, 0.0), direction="ne")]

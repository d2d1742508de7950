"""The per-ATen-op mapping table: core-ATen overloads -> dg ops.

`HANDLERS[overload](em, *args, **kwargs)` emits dg at the current insertion
point and returns the node's result value(s). Tensor arguments arrive as
`ir.Value`s, everything else as the Python values in the FX graph. `em.out`
holds the result TensorSpecs PyTorch computed (node.meta['val']): handlers use
them for result shapes and dtypes, and the importer checks that they match.

dg is explicit about dtypes and broadcasting, so handlers promote with
`coerce(em, x, dtype, shape)`: it converts and broadcasts a value, or turns a
Python scalar into `dg.full`. Arithmetic computes in the result dtype (f32 for
f16/bf16 results, like PyTorch's opmath); comparisons in the promoted dtype.

A handler raises `Unsupported(reason)` for an argument combination it cannot
map exactly (the importer turns it into `UnsupportedOp`); it never
approximates silently.
"""
from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.fx
from mlir import ir
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from . import custom_ops  # noqa: F401  (defines torch.ops.fusegrad.stop_gradient)
from ..dialects.builder import Builder, spec
from ..dialects.core import attrs_of
from ..dialects.types import TensorSpec, from_torch_dtype, is_float, torch_dtype
from ..transforms.autodiff.cotangent_sum import sum_cotangents

aten = torch.ops.aten


class Unsupported(Exception):
    """This call of the op has no exact dg mapping (the message says why)."""


@dataclass(frozen=True)
class Unavailable:
    """A result the importer did not compute; using it makes the op unsupported."""

    what: str


@dataclass
class Emit:
    """What a handler sees: a located builder, the node and its result specs."""

    b: Builder
    node: torch.fx.Node
    out: list[TensorSpec | None]
    importer: Any

    @property
    def out0(self) -> TensorSpec:
        return self.out[0]

    def seed(self) -> ir.Value:
        return self.importer.next_seed(self.b)

    def result_used(self, index: int) -> bool:
        return any(u.target is operator.getitem and u.args[1] == index for u in self.node.users)


HANDLERS: dict[torch._ops.OpOverload, Callable[..., Any]] = {}

# ops the importer skips: static metadata checks that tracing already performed on the
# (specialised) shapes and dtypes. Data-dependent asserts (_assert_async) are NOT here:
# dropping one would hide the error eager raises on bad input.
IGNORED = frozenset({torch.ops.aten._assert_tensor_metadata.default})
RANDOM_OPS: set[torch._ops.OpOverload] = set()


def handles(*ops: torch._ops.OpOverload, random: bool = False) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        for op in ops:
            if op in HANDLERS:
                raise ValueError(f"{op} is mapped twice")
            HANDLERS[op] = fn
            if random:
                RANDOM_OPS.add(op)
        return fn
    return register


# ------------------------------------------------------------------ helpers
def _opmath(dtype: str) -> str:
    return "f32" if dtype in ("f16", "bf16") else dtype


def _meta(x: Any) -> Any:
    if isinstance(x, ir.Value):
        s = spec(x)
        return torch.empty(s.shape, dtype=torch_dtype(s.dtype), device="meta")
    return x


def promoted(*xs: Any) -> str:
    """PyTorch's computation dtype for an elementwise op over `xs`."""
    compute, _ = elementwise_dtypes(*[_meta(x) for x in xs],
                                    type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    return from_torch_dtype(compute)


def coerce(em: Emit, x: Any, dtype: str, shape: Sequence[int]) -> ir.Value:
    """`x` (a value or a Python scalar) converted to `dtype` and broadcast to `shape`."""
    if not isinstance(x, ir.Value):
        if isinstance(x, complex):
            raise Unsupported("complex scalars are not supported")
        return em.b.full(shape=tuple(shape), dtype=dtype, value=float(x))
    if spec(x).dtype != dtype:
        x = em.b.convert(x, dtype=dtype)
    return em.b.broadcast_to(x, tuple(shape))


def cast(em: Emit, x: ir.Value, dtype: str) -> ir.Value:
    return x if spec(x).dtype == dtype else em.b.convert(x, dtype=dtype)


def full_as(em: Emit, x: ir.Value, value: float) -> ir.Value:
    return em.b.full_like(x, value)


def norm_dim(d: int, rank: int) -> int:
    r = max(rank, 1)
    if not -r <= d < r:
        raise Unsupported(f"dim {d} out of range for rank {rank}")
    return d % r


def norm_dims(dims: Any, rank: int) -> list[int]:
    """Sorted non-negative reduction dims; None or [] mean all dims (none for a 0-d tensor)."""
    if rank == 0:
        return []
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({norm_dim(d, rank) for d in dims})


def reshape(em: Emit, x: ir.Value, shape: Sequence[int]) -> ir.Value:
    return x if spec(x).shape == tuple(shape) else em.b.reshape(x, shape=tuple(shape))


def to_bool(em: Emit, x: Any, shape: Sequence[int]) -> ir.Value:
    """Truthiness of `x` as i1 (x != 0)."""
    if isinstance(x, ir.Value) and spec(x).dtype == "i1":
        return em.b.broadcast_to(x, tuple(shape))
    if not isinstance(x, ir.Value):
        return em.b.full(shape=tuple(shape), dtype="i1", value=float(bool(x)))
    x = em.b.broadcast_to(x, tuple(shape))
    return em.b.compare(x, full_as(em, x, 0.0), direction="ne")


# ------------------------------------------------------------------ pointwise: unary
_UNARY = {
    aten.neg.default: "neg", aten.abs.default: "abs", aten.exp.default: "exp",
    aten.log.default: "log", aten.log1p.default: "log1p", aten.expm1.default: "expm1",
    aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt", aten.tanh.default: "tanh",
    aten.sigmoid.default: "sigmoid", aten.erf.default: "erf", aten.sin.default: "sin",
    aten.cos.default: "cos", aten.reciprocal.default: "reciprocal", aten.sign.default: "sign",
    aten.floor.default: "floor", aten.ceil.default: "ceil", aten.round.default: "round",
    aten.atan.default: "atan", aten.asin.default: "asin", aten.acos.default: "acos",
    aten.sinh.default: "sinh", aten.cosh.default: "cosh", aten.asinh.default: "asinh",
    aten.acosh.default: "acosh", aten.atanh.default: "atanh", aten.erfc.default: "erfc",
    aten.exp2.default: "exp2",
}
_INTEGER_IDENTITY = {"floor", "ceil", "round"}


def _unary(dg_op: str) -> Callable:
    def handler(em: Emit, x: ir.Value) -> ir.Value:
        out = em.out0
        if dg_op in _INTEGER_IDENTITY and not is_float(out.dtype):
            return x
        if out.dtype == "i1":
            raise Unsupported(f"{dg_op} of a bool tensor")
        y = cast(em, x, _opmath(out.dtype))
        return cast(em, em.b.create(dg_op, [y]), out.dtype)
    return handler


for _op, _name in _UNARY.items():
    handles(_op)(_unary(_name))


def _float_unary(fn: Callable[[Emit, ir.Value], ir.Value]) -> Callable:
    """A unary op built from several dg ops, computed in the result's opmath dtype."""
    def handler(em: Emit, x: ir.Value) -> ir.Value:
        out = em.out0
        if not is_float(out.dtype):
            raise Unsupported(f"integer result {out.dtype}")
        return cast(em, fn(em, cast(em, x, _opmath(out.dtype))), out.dtype)
    return handler


@handles(aten.trunc.default)
def _trunc(em: Emit, x: ir.Value) -> ir.Value:
    if not is_float(spec(x).dtype):
        return x
    neg = em.b.compare(x, full_as(em, x, 0.0), direction="lt")
    return em.b.select(neg, em.b.ceil(x), em.b.floor(x))


@handles(aten.round.decimals)
def _round_decimals(em: Emit, x: ir.Value, *, decimals: int = 0) -> ir.Value:
    if decimals == 0:
        return _unary("round")(em, x)
    if not is_float(spec(x).dtype):
        raise Unsupported("round with decimals of an integer tensor")
    scale = full_as(em, x, 10.0 ** abs(decimals))
    if decimals > 0:
        return em.b.div(em.b.round(em.b.mul(x, scale)), scale)
    return em.b.mul(em.b.round(em.b.div(x, scale)), scale)


_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
handles(aten.log2.default)(_float_unary(lambda em, x: em.b.div(em.b.log(x), full_as(em, x, _LN2))))
handles(aten.log10.default)(_float_unary(
    lambda em, x: em.b.div(em.b.log(x), full_as(em, x, _LN10))))
handles(aten.tan.default)(_float_unary(lambda em, x: em.b.div(em.b.sin(x), em.b.cos(x))))


def _sinc(em: Emit, x: ir.Value) -> ir.Value:
    """sin(pi x) / (pi x), 1 at 0, where the gradient is 0 as in eager: the quotient reads
    x = 1 there (torch's decomposition selects after dividing 0 by 0: a NaN gradient)."""
    b = em.b
    zero = b.compare(x, full_as(em, x, 0.0), direction="eq")
    px = b.mul(b.select(zero, full_as(em, x, 1.0), x), full_as(em, x, math.pi))
    return b.select(zero, full_as(em, x, 1.0), b.div(b.sin(px), px))


handles(aten.sinc.default)(_float_unary(_sinc))


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


def _clip(em: Emit, x: ir.Value, lo: ir.Value | None, hi: ir.Value | None,
          at_bounds: bool) -> ir.Value:
    """`x` limited to [lo, hi] by selects, which pass the gradient where `x` is kept:
    at the bounds too if `at_bounds` (clamp), else not (relu, hardtanh). dg.max/min
    would split it at a tie, as torch.maximum does: relu's gradient at 0 was 0.5.
    A NaN `x` is kept (its comparisons are false)."""
    below, above = ("lt", "gt") if at_bounds else ("le", "ge")
    y = x
    if lo is not None:
        y = em.b.select(em.b.compare(y, lo, direction=below), lo, y)
    if hi is not None:  # compares y: with lo > hi, hi wins (min(max(x, lo), hi))
        y = em.b.select(em.b.compare(y, hi, direction=above), hi, y)
    return y


def _nan_without_gradient(em: Emit, x: ir.Value, y: ir.Value) -> ir.Value:
    """`y`, but NaN with no gradient where `x` is NaN: eager's clamp and hardsigmoid pass
    a NaN input no gradient (their range tests are false), where the selects of `_clip`
    keep a NaN and pass it all (as relu's and hardswish's do; hardtanh's scalar loop does
    and its vector loop does not, so eager's depends on the element's position)."""
    if not is_float(spec(x).dtype):
        return y
    return em.b.select(em.b.compare(x, x, direction="ne"), full_as(em, y, math.nan), y)


@handles(aten.relu.default)
def _relu(em: Emit, x: ir.Value) -> ir.Value:
    if spec(x).dtype == "i1":
        raise Unsupported("relu of a bool tensor")
    return _clip(em, x, full_as(em, x, 0.0), None, at_bounds=False)


@handles(aten.hardtanh.default)
def _hardtanh(em: Emit, x: ir.Value, min_val: float = -1.0, max_val: float = 1.0) -> ir.Value:
    return _clip(em, x, full_as(em, x, min_val), full_as(em, x, max_val), at_bounds=False)


def _hard_sigmoid(em: Emit, x: ir.Value) -> ir.Value:
    """relu6(x + 3) / 6, with hardsigmoid's gradient: 0 at x = -3 and 3."""
    y = _clip(em, em.b.add(x, full_as(em, x, 3.0)), full_as(em, x, 0.0), full_as(em, x, 6.0),
              at_bounds=False)
    return em.b.div(y, full_as(em, y, 6.0))


@handles(aten.hardsigmoid.default)
def _hardsigmoid(em: Emit, x: ir.Value) -> ir.Value:
    out = em.out0
    y = coerce(em, x, _opmath(out.dtype), out.shape)
    return cast(em, _nan_without_gradient(em, y, _hard_sigmoid(em, y)), out.dtype)


@handles(aten.hardswish.default)
def _hardswish(em: Emit, x: ir.Value) -> ir.Value:
    """x * hardsigmoid(x): its gradient is 0 at x = -3 and 1 at x = 3, as eager's."""
    out = em.out0
    y = coerce(em, x, _opmath(out.dtype), out.shape)
    return cast(em, em.b.mul(y, _hard_sigmoid(em, y)), out.dtype)


@handles(aten.isnan.default)
def _isnan(em: Emit, x: ir.Value) -> ir.Value:
    if not is_float(spec(x).dtype):
        return em.b.full(shape=spec(x).shape, dtype="i1", value=0.0)
    return em.b.compare(x, x, direction="ne")


@handles(aten.isinf.default)
def _isinf(em: Emit, x: ir.Value) -> ir.Value:
    if not is_float(spec(x).dtype):
        return em.b.full(shape=spec(x).shape, dtype="i1", value=0.0)
    return em.b.compare(em.b.abs(x), full_as(em, x, math.inf), direction="eq")


@handles(aten._to_copy.default, aten.clone.default, aten.alias.default,
         aten.lift_fresh_copy.default, aten.detach.default, aten.alias_copy.default)
def _copy_like(em: Emit, x: ir.Value, **kwargs: Any) -> ir.Value:
    return cast(em, x, em.out0.dtype)


@handles(aten.copy.default)
def _copy(em: Emit, dst: ir.Value, src: ir.Value, non_blocking: bool = False) -> ir.Value:
    return coerce(em, src, em.out0.dtype, em.out0.shape)


# ------------------------------------------------------------------ pointwise: binary
_ARITH = {
    aten.add.Tensor: "add", aten.add.Scalar: "add", aten.sub.Tensor: "sub",
    aten.sub.Scalar: "sub", aten.mul.Tensor: "mul", aten.mul.Scalar: "mul",
    aten.div.Tensor: "div", aten.div.Scalar: "div", aten.pow.Tensor_Tensor: "pow",
    aten.pow.Tensor_Scalar: "pow", aten.pow.Scalar: "pow", aten.maximum.default: "max",
    aten.minimum.default: "min", aten.atan2.default: "atan2",
}
_BOOL_ARITH = {"add": "or", "mul": "and", "max": "or", "min": "and"}


def _is_one(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == 1


def _arith(dg_op: str) -> Callable:
    def handler(em: Emit, a: Any, b: Any, *, alpha: Any = 1) -> ir.Value:
        out = em.out0
        ct = _opmath(out.dtype)
        op = dg_op
        if ct == "i1":
            if op not in _BOOL_ARITH or alpha != 1:
                raise Unsupported(f"{dg_op} on bool tensors")
            op = _BOOL_ARITH[op]
        if op == "div" and not is_float(ct):
            raise Unsupported("integer true division with an integer result")
        if alpha == 1 and op in ("mul", "div") and _is_one(b):
            # x * 1 and x / 1 are x exactly (a decomposed addmm scales by alpha = beta = 1:
            # left in, the multiplication hides the matmul result from BLAS's flags)
            return cast(em, coerce(em, a, ct, out.shape), out.dtype)
        if alpha == 1 and op == "mul" and _is_one(a):
            return cast(em, coerce(em, b, ct, out.shape), out.dtype)
        x, y = coerce(em, a, ct, out.shape), coerce(em, b, ct, out.shape)
        if alpha != 1:
            y = em.b.mul(y, em.b.full(shape=out.shape, dtype=ct, value=float(alpha)))
        return cast(em, em.b.create(op, [x, y]), out.dtype)
    return handler


for _op, _name in _ARITH.items():
    handles(_op)(_arith(_name))


def _floor_div(em: Emit, x: ir.Value, y: ir.Value) -> ir.Value:
    """Python-style floor division of same-typed values."""
    b = em.b
    if is_float(spec(x).dtype):
        return b.floor(b.div(x, y))
    q = b.div(x, y)  # truncating
    r = b.sub(x, b.mul(q, y))
    zero = full_as(em, x, 0.0)
    inexact = b.compare(r, zero, direction="ne")
    signs_differ = b.compare(b.compare(r, zero, direction="lt"),
                             b.compare(y, zero, direction="lt"), direction="ne")
    return b.select(b.create("and", [inexact, signs_differ]), b.sub(q, full_as(em, q, 1.0)), q)


def _trunc_div(em: Emit, x: ir.Value, y: ir.Value) -> ir.Value:
    q = em.b.div(x, y)
    if is_float(spec(x).dtype):
        return _trunc(em, q)
    return q


def _pair(em: Emit, a: Any, b: Any) -> tuple[ir.Value, ir.Value]:
    """Both operands in the result's computation dtype and shape."""
    out = em.out0
    ct = _opmath(out.dtype)
    return coerce(em, a, ct, out.shape), coerce(em, b, ct, out.shape)


@handles(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(em: Emit, a: Any, b: Any, *, rounding_mode: str | None = None) -> ir.Value:
    if rounding_mode is None:
        return _arith("div")(em, a, b)
    x, y = _pair(em, a, b)
    fn = _floor_div if rounding_mode == "floor" else _trunc_div
    return cast(em, fn(em, x, y), em.out0.dtype)


def _mod(rounded_div: Callable) -> Callable:
    def handler(em: Emit, a: Any, b: Any) -> ir.Value:
        x, y = _pair(em, a, b)
        r = em.b.sub(x, em.b.mul(rounded_div(em, x, y), y))
        return cast(em, r, em.out0.dtype)
    return handler


handles(aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor)(
    _mod(_floor_div))
handles(aten.fmod.Tensor, aten.fmod.Scalar)(_mod(_trunc_div))


@handles(aten.hypot.default)
def _hypot(em: Emit, a: Any, b: Any) -> ir.Value:
    """sqrt(x^2 + y^2) without overflow: m sqrt(1 + (n/m)^2), m = max(|x|, |y|), n the
    other; 0 where both are 0, +inf where either is infinite (NaN or not, as C's hypot)."""
    x, y = _pair(em, a, b)
    bb = em.b
    ax, ay = bb.abs(x), bb.abs(y)
    big, small = bb.max(ax, ay), bb.min(ax, ay)
    zero, one = full_as(em, x, 0.0), full_as(em, x, 1.0)
    is_zero = bb.compare(big, zero, direction="eq")
    q = bb.div(small, bb.select(is_zero, one, big))
    r = bb.select(is_zero, zero, bb.mul(big, bb.sqrt(bb.add(one, bb.mul(q, q)))))
    inf = full_as(em, x, math.inf)
    infinite = bb.create("or", (bb.compare(ax, inf, direction="eq"),
                                bb.compare(ay, inf, direction="eq")))
    return cast(em, bb.select(infinite, inf, r), em.out0.dtype)


def _sign_bit(em: Emit, x: ir.Value) -> ir.Value:
    """x < 0, -0.0 included (1 / -0 is -inf); NaN counts as positive."""
    b = em.b
    zero = full_as(em, x, 0.0)
    if not is_float(spec(x).dtype):
        return b.compare(x, zero, direction="lt")
    negative_zero = b.create("and", (b.compare(x, zero, direction="eq"),
                                     b.compare(b.reciprocal(x), zero, direction="lt")))
    return b.create("or", (b.compare(x, zero, direction="lt"), negative_zero))


@handles(aten.signbit.default)
def _signbit(em: Emit, x: ir.Value) -> ir.Value:
    if spec(x).dtype == "i1":
        return em.b.full(shape=em.out0.shape, dtype="i1", value=0.0)
    return _sign_bit(em, x)


@handles(aten.copysign.Tensor, aten.copysign.Scalar)
def _copysign(em: Emit, a: Any, b: Any) -> ir.Value:
    x, y = _pair(em, a, b)
    magnitude = em.b.abs(x)
    return cast(em, em.b.select(_sign_bit(em, y), em.b.neg(magnitude), magnitude),
                em.out0.dtype)


def _nan_ignoring(direction: str) -> Callable:
    """fmax/fmin: the larger (smaller) operand, the number where one is NaN. Ties and
    NaN-NaN go to x, so x takes the whole gradient there, as in eager."""
    def handler(em: Emit, a: Any, b: Any) -> ir.Value:
        x, y = _pair(em, a, b)
        bb = em.b
        keep_x = bb.compare(x, y, direction=direction)
        if is_float(spec(x).dtype):
            keep_x = bb.create("or", (keep_x, bb.compare(y, y, direction="ne")))
        return cast(em, bb.select(keep_x, x, y), em.out0.dtype)
    return handler


handles(aten.fmax.default)(_nan_ignoring("ge"))
handles(aten.fmin.default)(_nan_ignoring("le"))

_COMPARE = {}
for _dir in ("eq", "ne", "lt", "le", "gt", "ge"):
    _COMPARE[getattr(aten, _dir).Tensor] = _dir
    _COMPARE[getattr(aten, _dir).Scalar] = _dir


def _compare(direction: str) -> Callable:
    def handler(em: Emit, a: Any, b: Any) -> ir.Value:
        ct = promoted(a, b)
        shape = em.out0.shape
        return em.b.compare(coerce(em, a, ct, shape), coerce(em, b, ct, shape),
                            direction=direction)
    return handler


for _op, _name in _COMPARE.items():
    handles(_op)(_compare(_name))


def _xor(em: Emit, x: ir.Value, y: ir.Value) -> ir.Value:
    b = em.b
    return b.create("or", [b.create("and", [x, b.create("not", [y])]),
                           b.create("and", [b.create("not", [x]), y])])


_BITWISE = {"and": lambda em, x, y: em.b.create("and", [x, y]),
            "or": lambda em, x, y: em.b.create("or", [x, y]), "xor": _xor}


def _bitwise(kind: str) -> Callable:
    def handler(em: Emit, a: Any, b: Any) -> ir.Value:
        out = em.out0
        if is_float(out.dtype):
            raise Unsupported("bitwise ops on floating-point tensors")
        x, y = coerce(em, a, out.dtype, out.shape), coerce(em, b, out.dtype, out.shape)
        return _BITWISE[kind](em, x, y)
    return handler


def _logical(kind: str) -> Callable:
    def handler(em: Emit, a: Any, b: Any) -> ir.Value:
        out = em.out0
        r = _BITWISE[kind](em, to_bool(em, a, out.shape), to_bool(em, b, out.shape))
        return cast(em, r, out.dtype)
    return handler


for _kind in ("and", "or", "xor"):
    _bw = getattr(aten, f"bitwise_{_kind}")
    handles(_bw.Tensor, _bw.Scalar)(_bitwise(_kind))
    handles(getattr(aten, f"logical_{_kind}").default)(_logical(_kind))


@handles(aten.bitwise_not.default)
def _bitwise_not(em: Emit, x: ir.Value) -> ir.Value:
    if is_float(spec(x).dtype):
        raise Unsupported("bitwise_not of a floating-point tensor")
    return em.b.create("not", [x])


@handles(aten.logical_not.default)
def _logical_not(em: Emit, x: ir.Value) -> ir.Value:
    r = em.b.create("not", [to_bool(em, x, spec(x).shape)])
    return cast(em, r, em.out0.dtype)


@handles(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def _where(em: Emit, cond: ir.Value, a: Any, b: Any) -> ir.Value:
    out = em.out0
    pred = to_bool(em, cond, out.shape)
    return em.b.select(pred, coerce(em, a, out.dtype, out.shape), coerce(em, b, out.dtype, out.shape))


@handles(aten.masked_scatter.default)
def _masked_scatter(em: Emit, x: ir.Value, mask: ir.Value, source: ir.Value) -> ir.Value:
    """Where the mask is set, the source's next element in order (a vision-language
    model's image features into its token embeddings): element i reads the source at the
    count of set elements before it (an integer scan), a gather whose gradient is the
    source's. More set elements than the source holds fail the gather's index check."""
    out = em.out0
    b = em.b
    n = out.numel
    flags = reshape(em, to_bool(em, mask, out.shape), (n,))
    count = _running_sum(em, cast(em, flags, "i64"), 0)
    position = b.max(b.sub(count, full_as(em, count, 1.0)), full_as(em, count, 0.0))
    # unset elements read position 0 (or the last one before them), which always exists
    # when the source is not empty: their value is not taken
    position = b.select(flags, position, b.full(shape=(n,), dtype="i64", value=0.0))
    src = reshape(em, cast(em, source, out.dtype), (spec(source).numel,))
    if spec(src).shape[0] == 0:
        src = b.full(shape=(1,), dtype=out.dtype, value=0.0)
    taken = b.index_select(src, position, dim=0)
    base = reshape(em, coerce(em, x, out.dtype, out.shape), (n,))
    return reshape(em, b.select(flags, taken, base), out.shape)


@handles(aten.clamp.default, aten.clamp.Tensor)
def _clamp(em: Emit, x: ir.Value, min: Any = None, max: Any = None) -> ir.Value:
    out = em.out0
    ct = _opmath(out.dtype)
    y = coerce(em, x, ct, out.shape)
    bounds = [None if b is None else coerce(em, b, ct, out.shape) for b in (min, max)]
    y = _nan_without_gradient(em, y, _clip(em, y, *bounds, at_bounds=True))
    for given, b in zip((min, max), bounds):
        if isinstance(given, ir.Value) or (given is not None and math.isnan(given)):
            # a NaN bound gives NaN, as torch.clamp's max/min do
            y = em.b.select(em.b.compare(b, b, direction="ne"), b, y)
    return cast(em, y, out.dtype)


@handles(aten.clamp_min.default, aten.clamp_min.Tensor)
def _clamp_min(em: Emit, x: ir.Value, min: Any) -> ir.Value:
    return _clamp(em, x, min, None)


@handles(aten.clamp_max.default, aten.clamp_max.Tensor)
def _clamp_max(em: Emit, x: ir.Value, max: Any) -> ir.Value:
    return _clamp(em, x, None, max)


# ------------------------------------------------------------------ reductions
def _keep(em: Emit, r: ir.Value) -> ir.Value:
    return reshape(em, r, em.out0.shape)


@handles(aten.sum.dim_IntList, aten.sum.default)
def _sum(em: Emit, x: ir.Value, dim: Any = None, keepdim: bool = False, *,
         dtype: Any = None) -> ir.Value:
    out = em.out0
    ct = _opmath(out.dtype)
    y = cast(em, x, ct)
    r = em.b.reduce_sum(y, dims=norm_dims(dim, spec(x).rank))
    return cast(em, _keep(em, r), out.dtype)


@handles(aten.mean.dim, aten.mean.default)
def _mean(em: Emit, x: ir.Value, dim: Any = None, keepdim: bool = False, *,
          dtype: Any = None) -> ir.Value:
    out = em.out0
    ct = _opmath(out.dtype)
    dims = norm_dims(dim, spec(x).rank)
    count = math.prod(spec(x).shape[d] for d in dims)
    r = em.b.reduce_sum(cast(em, x, ct), dims=dims)
    r = em.b.div(r, full_as(em, r, float(count)))
    return cast(em, _keep(em, r), out.dtype)


def _variance(em: Emit, x: ir.Value, dims: list[int], correction: float) -> tuple[ir.Value, ir.Value]:
    """(var, mean) over dims, both without the reduced dims, in x's dtype (computed in
    f32 for 16-bit floats, as eager's: rounding the mean and each square was 10x further
    from the exact f16 variance)."""
    dtype = spec(x).dtype
    if _opmath(dtype) != dtype:
        var, mean = _variance(em, cast(em, x, _opmath(dtype)), dims, correction)
        return cast(em, var, dtype), cast(em, mean, dtype)
    b = em.b
    s = spec(x)
    count = math.prod(s.shape[d] for d in dims)
    mean = b.div(b.reduce_sum(x, dims=dims), b.full(shape=tuple(
        n for i, n in enumerate(s.shape) if i not in dims), dtype=s.dtype, value=float(count)))
    kept = [1 if i in dims else n for i, n in enumerate(s.shape)]
    centered = b.sub(x, b.broadcast_to(reshape(em, mean, kept), s.shape))
    ss = b.reduce_sum(b.mul(centered, centered), dims=dims)
    var = b.div(ss, full_as(em, ss, float(max(count - correction, 0))))
    return var, mean


def _var_args(x: ir.Value, dim: Any, correction: Any, unbiased: Any = None) -> tuple[list[int], float]:
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    return norm_dims(dim, spec(x).rank), float(correction)


@handles(aten.var.correction)
def _var(em: Emit, x: ir.Value, dim: Any = None, *, correction: Any = None,
         keepdim: bool = False) -> ir.Value:
    if not is_float(spec(x).dtype):
        raise Unsupported("var of an integer tensor")
    var, _ = _variance(em, x, *_var_args(x, dim, correction))
    return _keep(em, var)


def _norm_root(em: Emit, s: ir.Value, p: float) -> ir.Value:
    """s ** (1/p) for s >= 0, whose gradient is 0 where s is 0 (eager's rule for a norm or
    std of zeros), not 0/0: the root reads 1 there, and a select returns 0."""
    b = em.b
    zero = b.compare(s, full_as(em, s, 0.0), direction="eq")
    safe = b.select(zero, full_as(em, s, 1.0), s)
    root = b.sqrt(safe) if p == 2.0 else b.pow(safe, full_as(em, safe, 1.0 / p))
    return b.select(zero, full_as(em, s, 0.0), root)


@handles(aten.std.correction)
def _std(em: Emit, x: ir.Value, dim: Any = None, *, correction: Any = None,
         keepdim: bool = False) -> ir.Value:
    return _norm_root(em, _var(em, x, dim, correction=correction, keepdim=keepdim), 2.0)


@handles(aten.linalg_vector_norm.default)
def _vector_norm(em: Emit, x: ir.Value, ord: float = 2.0, dim: Any = None,
                 keepdim: bool = False, *, dtype: Any = None) -> ir.Value:
    """torch's decomposition, sum(|x|**p) ** (1/p), with eager's gradient at a zero norm."""
    out = em.out0
    ct = _opmath(out.dtype)
    x = coerce(em, x, ct, spec(x).shape)
    dims = norm_dims(dim, spec(x).rank)
    if spec(x).rank == 0:
        x, dims = reshape(em, x, (1,)), [0]
    return cast(em, reshape(em, _p_norm(em, x, float(ord), dims), out.shape), out.dtype)


def _p_norm(em: Emit, x: ir.Value, p: float, dims: Sequence[int]) -> ir.Value:
    """The p-norm of float `x` over `dims` (dropped), with eager's gradient at 0."""
    b = em.b
    if p == 2.0:  # the common case: x * x, no abs
        return _norm_root(em, b.reduce_sum(b.mul(x, x), dims=dims), p)
    if p == 0.0:
        return b.reduce_sum(b.convert(b.compare(x, full_as(em, x, 0.0), direction="ne"),
                                      dtype=spec(x).dtype), dims=dims)
    a = b.abs(x)
    if math.isinf(p):
        return b.reduce_max(a, dims=dims) if p > 0 else b.reduce_min(a, dims=dims)
    if p == 1.0:
        return b.reduce_sum(a, dims=dims)
    return _norm_root(em, b.reduce_sum(b.pow(a, full_as(em, a, p)), dims=dims), p)


@handles(aten._cdist_forward.default)
def _cdist(em: Emit, x1: ir.Value, x2: ir.Value, p: float,
           compute_mode: int | None = None) -> ir.Value:
    """p-norms of the row differences [.., P, R, M] over M (what eager's kernel does below
    25 rows; cdist itself takes the matmul form for p = 2 beyond that)."""
    out = em.out0
    ct = _opmath(out.dtype)
    *batch, rows1, rows2 = out.shape
    m = spec(x1).shape[-1]

    def spread(x: ir.Value, at: int) -> ir.Value:
        s = spec(x).shape
        kept = [1] * (len(batch) - (len(s) - 2)) + list(s[:-1])
        kept.insert(len(batch) + at, 1)
        return em.b.broadcast_to(reshape(em, cast(em, x, ct), (*kept, m)),
                                 (*batch, rows1, rows2, m))
    diff = em.b.sub(spread(x1, 1), spread(x2, 0))
    return cast(em, _p_norm(em, diff, float(p), [len(batch) + 2]), out.dtype)


@handles(aten._pdist_forward.default)
def _pdist(em: Emit, x: ir.Value, p: float = 2.0) -> ir.Value:
    """p-norms of the differences of rows i < j (eager's order), the pairs gathered by
    constant row tables."""
    out = em.out0
    n, m = spec(x).shape
    if out.numel == 0:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=0.0)
    first, second = torch.triu_indices(n, n, offset=1)
    rows = [em.b.index_select(x, em.b.constant(t.to(torch.int64)), dim=0) for t in (first, second)]
    diff = em.b.sub(*(cast(em, r, _opmath(out.dtype)) for r in rows))
    return cast(em, _p_norm(em, diff, float(p), [1]), out.dtype)


@handles(aten.var_mean.correction)
def _var_mean(em: Emit, x: ir.Value, dim: Any = None, *, correction: Any = None,
              keepdim: bool = False) -> list[ir.Value]:
    if not is_float(spec(x).dtype):
        raise Unsupported("var_mean of an integer tensor")
    var, mean = _variance(em, x, *_var_args(x, dim, correction))
    return [reshape(em, var, em.out[0].shape), reshape(em, mean, em.out[1].shape)]


@handles(aten.std_mean.correction)
def _std_mean(em: Emit, x: ir.Value, dim: Any = None, *, correction: Any = None,
              keepdim: bool = False) -> list[ir.Value]:
    var, mean = _var_mean(em, x, dim, correction=correction, keepdim=keepdim)
    return [_norm_root(em, var, 2.0), mean]


def _minmax(dg_op: str) -> Callable:
    def handler(em: Emit, x: ir.Value, dim: Any = None, keepdim: bool = False) -> ir.Value:
        r = em.b.create(dg_op, [x], dims=norm_dims(dim, spec(x).rank))
        return _keep(em, r)
    return handler


handles(aten.amax.default, aten.max.default)(_minmax("reduce_max"))
handles(aten.amin.default, aten.min.default)(_minmax("reduce_min"))


def _any_all(dg_op: str) -> Callable:
    def handler(em: Emit, x: ir.Value, dim: Any = None, keepdim: bool = False) -> ir.Value:
        s = spec(x)
        if s.numel == 0:
            raise Unsupported("any/all of an empty tensor")
        r = em.b.create(dg_op, [to_bool(em, x, s.shape)], dims=norm_dims(dim, s.rank))
        return cast(em, _keep(em, r), em.out0.dtype)
    return handler


handles(aten.any.default, aten.any.dim, aten.any.dims)(_any_all("reduce_max"))
handles(aten.all.default, aten.all.dim, aten.all.dims)(_any_all("reduce_min"))


def _arg_reduce(dg_op: str) -> Callable:
    def handler(em: Emit, x: ir.Value, dim: int | None = None, keepdim: bool = False) -> ir.Value:
        s = spec(x)
        if dim is None or s.rank == 0:
            x, dim = reshape(em, x, (s.numel,)), 0
        r = em.b.create(dg_op, [x], dim=norm_dim(dim, spec(x).rank))
        return _keep(em, r)
    return handler


handles(aten.argmax.default)(_arg_reduce("argmax"))
handles(aten.argmin.default)(_arg_reduce("argmin"))


def _value_and_index(arg_op: str) -> Callable:
    def handler(em: Emit, x: ir.Value, dim: int, keepdim: bool = False) -> list[ir.Value]:
        s = spec(x)
        if s.rank == 0:
            return [x, em.b.full(shape=(), dtype="i64", value=0.0)]
        d = norm_dim(dim, s.rank)
        index = em.b.create(arg_op, [x], dim=d)
        # the value at the index, not the reduction: eager's gradient goes to that one
        # element, where a reduction's would be shared by tied maxima
        kept = tuple(1 if i == d else n for i, n in enumerate(s.shape))
        values = em.b.gather(x, reshape(em, index, kept), dim=d)
        return [reshape(em, values, em.out[0].shape), reshape(em, index, em.out[1].shape)]
    return handler


handles(aten.max.dim)(_value_and_index("argmax"))
handles(aten.min.dim)(_value_and_index("argmin"))

# topk unrolls one selection round per k: a mixture-of-experts router (k of 2-8 over
# 8-256 experts) is a few reductions; a large k is a sort, which runs eagerly
TOPK_MAX_K = 16


@handles(aten.topk.default)
def _topk(em: Emit, x: ir.Value, k: int, dim: int = -1, largest: bool = True,
          sorted: bool = True) -> list[ir.Value]:
    """k rounds of arg-max (arg-min) over the elements not taken yet (beyond TOPK_MAX_K
    rounds, a sort), in torch's order:
    NaN is the largest value, ties go to the lower index. A round whose best is the
    masking value itself (every remaining element is -inf, or +inf / NaN for the
    smallest; for integers the row's extreme) takes the first remaining element
    instead, non-NaN before NaN. The values
    are a gather of the chosen indices, so their gradient is the gather's."""
    s = spec(x)
    if s.rank == 0:
        if k != 1:
            raise Unsupported(f"topk of k={k} from a 0-d tensor")
        return [x, em.b.full(shape=(), dtype="i64", value=0.0)]
    d = norm_dim(dim, s.rank)
    if k > TOPK_MAX_K and k <= s.shape[d] <= SORT_MAX_N:
        values, indices = _sort(em, x, d, descending=largest)
        return [slice_dim(em, v, d, 0, k) for v in (values, indices)]
    if not 1 <= k <= min(s.shape[d], TOPK_MAX_K):
        raise Unsupported(f"topk with k={k} of {s.shape[d]} (compiled for 1 <= k <= "
                          f"{TOPK_MAX_K}, or a sort of up to {SORT_MAX_N})")
    if s.dtype == "i1":
        raise Unsupported("topk of a bool tensor")
    kept = tuple(1 if i == d else n for i, n in enumerate(s.shape))
    where = em.b.iota(shape=s.shape, dtype="i64", dim=d)
    taken_none = em.b.full(shape=s.shape, dtype="i1", value=1.0)
    if is_float(s.dtype):
        masking = full_as(em, x, float("-inf") if largest else float("inf"))
        # NaN is the largest: the smallest rounds leave it out of the arg-min
        number = em.b.compare(x, x, direction="eq")
    else:  # the row's own extreme (an i64 bound has no exact float attribute)
        extreme = em.b.create("reduce_min" if largest else "reduce_max", [x], dims=[d])
        masking = em.b.broadcast_in_dim(extreme, shape=s.shape,
                                        dims=[i for i in range(s.rank) if i != d])
        number = taken_none
    remaining, chosen = taken_none, []
    for _ in range(k):
        numbers_left = em.b.create("and", [remaining, number])
        candidate = remaining if largest else numbers_left
        masked = em.b.select(candidate, x, masking)
        best = reshape(em, em.b.create("argmax" if largest else "argmin", [masked], dim=d),
                       kept)
        # the first remaining element, a number if one is left
        score = em.b.add(cast(em, remaining, "f32"), cast(em, numbers_left, "f32"))
        first = reshape(em, em.b.argmax(score, dim=d), kept)
        valid = em.b.compare(em.b.gather(cast(em, candidate, "f32"), best, dim=d),
                             em.b.full(shape=kept, dtype="f32", value=0.5), direction="gt")
        index = em.b.select(valid, best, first)
        chosen.append(index)
        spread = em.b.broadcast_in_dim(reshape(em, index, [n for i, n in enumerate(kept)
                                                           if i != d]),
                                       shape=s.shape, dims=[i for i in range(s.rank) if i != d])
        remaining = em.b.create("and", [remaining, em.b.compare(where, spread, direction="ne")])
    indices = chosen[0] if k == 1 else em.b.concat(chosen, dim=d)
    return [em.b.gather(x, indices, dim=d), indices]


# sorts along dims up to this long are compiled (a bitonic network of
# log2(n) (log2(n) + 1) / 2 compare-exchange stages: 91 for 8192)
SORT_MAX_N = 8192


@handles(aten.sort.default, aten.sort.stable)
def _sort(em: Emit, x: ir.Value, dim: int = -1, descending: bool = False, *,
          stable: bool | None = None) -> list[ir.Value]:
    """A bitonic sorting network over (key, index) pairs, in the order of a stable sort
    (eager's on the CPU): ties keep their index order and NaN is the largest value. The
    dim goes last, padded to a power of two with elements that sort after everything.
    Each stage compares every element with its partner j places away (the two halves
    of [.., groups, 2, j]) and keeps or swaps the pair by its group's direction. The
    values are a gather of the sorted indices, so their gradient is the gather's."""
    s = spec(x)
    if s.rank == 0:
        return [x, em.b.full(shape=(), dtype="i64", value=0.0)]
    d = norm_dim(dim, s.rank)
    n = s.shape[d]
    if n > SORT_MAX_N:
        raise Unsupported(f"sort along a dim of {n} elements (compiled up to {SORT_MAX_N})")
    if n <= 1 or s.numel == 0:
        return [x, em.b.full(shape=s.shape, dtype="i64", value=0.0)]
    perm = [k for k in range(s.rank) if k != d] + [d]
    rows = s.numel // n
    keys = reshape(em, _permute(em, x, perm), (rows, n))
    if s.dtype == "i1":
        keys = cast(em, keys, "i32")
    size = 1 << (n - 1).bit_length()
    if size != n:
        keys = em.b.pad(keys, low=[0, 0], high=[0, size - n], interior=[0, 0], value=0.0)
    index = em.b.iota(shape=(rows, size), dtype="i64", dim=1)
    k = 2
    while k <= size:
        j = k // 2
        while j:
            keys, index = _compare_exchange(em, keys, index, n, k, j, descending)
            j //= 2
        k *= 2
    if size != n:
        index = em.b.slice(index, start=[0, 0], limit=[rows, n], stride=[1, 1])
    moved = [s.shape[k] for k in perm]
    index = _unpermute(em, reshape(em, index, moved), perm)
    return [em.b.gather(x, index, dim=d), index]


@handles(aten.median.default, aten.median.dim, aten.nanmedian.default, aten.nanmedian.dim,
         aten.kthvalue.default)
def _order_statistic(em: Emit, x: ir.Value, *args: Any) -> list[ir.Value] | ir.Value:
    """An element at a position of the stably sorted dim (a gather, so the gradient goes
    to it, as eager's): median the lower middle one, or the first NaN where there is one
    (NaN sorts last, so that is the position after the numbers); nanmedian the lower
    middle of the numbers; kthvalue the k-th (NaN the largest)."""
    b = em.b
    target = em.node.target
    name = target._overloadpacket.__name__
    if target is aten.kthvalue.default:
        k, dim = args[0], args[1] if len(args) > 1 else -1
    else:
        k, dim = None, args[0] if args else None
    s = spec(x)
    if dim is None:
        x, d = reshape(em, x, (s.numel,)), 0
    else:
        d = norm_dim(dim, s.rank) if s.rank else 0
    if spec(x).rank == 0:
        x = reshape(em, x, (1,))
    values, index = _sort(em, x, d)
    shape = list(spec(x).shape)
    n = shape[d]
    if n == 0:
        raise Unsupported(f"{name} of an empty dim")
    at = [*shape[:d], 1, *shape[d + 1:]]
    if k is not None:
        position = b.full(shape=at, dtype="i64", value=float(k - 1))
    else:
        numbers = cast(em, b.create("not", [b.compare(x, x, direction="ne")]), "i64")
        count = reshape(em, b.reduce_sum(numbers, dims=[d]), at)
        if name == "median":
            middle = b.full(shape=at, dtype="i64", value=float((n - 1) // 2))
            position = b.select(b.compare(count, full_as(em, count, float(n)), direction="lt"),
                                count, middle)
        else:  # the lower middle of the numbers: (count - 1) // 2, 0 when all are NaN
            position = b.div(b.max(b.sub(count, full_as(em, count, 1.0)),
                                   full_as(em, count, 0.0)), full_as(em, count, 2.0))
    value = b.gather(values, position, dim=d)
    where = b.gather(index, position, dim=d)
    results = [reshape(em, value, em.out[0].shape)]
    if len(em.out) > 1:
        results.append(reshape(em, where, em.out[1].shape))
    return results if len(results) > 1 else results[0]


def _compare_exchange(em: Emit, keys: ir.Value, index: ir.Value, n: int, k: int, j: int,
                      descending: bool) -> tuple[ir.Value, ir.Value]:
    """One bitonic stage: elements i and i + j of each group of 2j, in increasing order
    where bit k of i is clear (decreasing where set)."""
    b = em.b
    rows, size = spec(keys).shape
    groups = size // (2 * j)
    split = (rows, groups, 2, j)

    def halves(v: ir.Value) -> tuple[ir.Value, ir.Value]:
        v = reshape(em, v, split)
        first = b.slice(v, start=[0, 0, 0, 0], limit=[rows, groups, 1, j], stride=[1] * 4)
        second = b.slice(v, start=[0, 0, 1, 0], limit=[rows, groups, 2, j], stride=[1] * 4)
        return first, second
    ka, kb = halves(keys)
    ia, ib = halves(index)
    increasing = [((g * 2 * j) & k) == 0 for g in range(groups)]
    direction = b.broadcast_in_dim(b.constant(torch.tensor(increasing)),
                                   shape=spec(ka).shape, dims=[1])
    swap = b.select(direction, _sorts_before(em, kb, ib, ka, ia, n, descending),
                    _sorts_before(em, ka, ia, kb, ib, n, descending))
    joined = [reshape(em, b.concat([b.select(swap, hi, lo), b.select(swap, lo, hi)], dim=2),
                      (rows, size)) for lo, hi in ((ka, kb), (ia, ib))]
    return joined[0], joined[1]


def _sorts_before(em: Emit, ka: ir.Value, ia: ir.Value, kb: ir.Value, ib: ir.Value, n: int,
                  descending: bool) -> ir.Value:
    """Whether element (ka, ia) comes before (kb, ib): padding (index >= n) last, then by
    key (NaN the largest), then by index."""
    b = em.b

    def both(x, y):
        return b.create("and", (x, y))

    def either(x, y):
        return b.create("or", (x, y))
    limit = full_as(em, ia, float(n))
    pad_a, pad_b = (b.compare(i, limit, direction="ge") for i in (ia, ib))
    if is_float(spec(ka).dtype):
        nan_a, nan_b = (b.compare(v, v, direction="ne") for v in (ka, kb))
        if descending:
            ahead = either(b.compare(ka, kb, direction="gt"),
                           both(nan_a, b.create("not", (nan_b,))))
        else:
            ahead = either(b.compare(ka, kb, direction="lt"),
                           both(nan_b, b.create("not", (nan_a,))))
        tie = either(b.compare(ka, kb, direction="eq"), both(nan_a, nan_b))
    else:
        ahead = b.compare(ka, kb, direction="gt" if descending else "lt")
        tie = b.compare(ka, kb, direction="eq")
    by_key = either(ahead, both(tie, b.compare(ia, ib, direction="lt")))
    same_kind = b.compare(pad_a, pad_b, direction="eq")
    return b.select(same_kind, by_key, pad_b)


# ------------------------------------------------------------------ shapes and views
@handles(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
         aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
         aten.flatten.using_ints, aten.unflatten.int, aten.view_copy.default,
         aten.squeeze_copy.default, aten.squeeze_copy.dim, aten.squeeze_copy.dims,
         aten.unsqueeze_copy.default)
def _reshape(em: Emit, x: ir.Value, *args: Any) -> ir.Value:
    return reshape(em, x, em.out0.shape)


# an as_strided of a non-contiguous view gathers at a constant index table of this many
# elements at most
AS_STRIDED_TABLE_MAX = 1 << 20


def _storage_positions(em: Emit, x: ir.Value, size: Sequence[int], stride: Sequence[int],
                       storage_offset: int | None) -> ir.Value | None:
    """The row-major index in `x` of each element of `as_strided(x, size, stride,
    storage_offset)` (shape `size`), or None where the view is all of `x` in order. For a
    contiguous `x` the indices are `offset + sum_i index_i * stride_i` computed from
    iotas; for a strided view (x.t(), x[1:]) a constant table maps them back to `x`'s
    elements."""
    val = em.node.args[0].meta.get("val")
    base = val.storage_offset() if isinstance(val, torch.Tensor) else 0
    offset = (base if storage_offset is None else storage_offset) - base
    numel = spec(x).numel
    contiguous = [math.prod(size[i + 1:]) for i in range(len(size))]
    dense = not isinstance(val, torch.Tensor) or val.is_contiguous()
    if dense and offset == 0 and math.prod(size) == numel and all(
            st == c for n, st, c in zip(size, stride, contiguous) if n != 1):
        return None
    count = math.prod(size)
    if not dense:
        return em.b.constant(_view_positions(val, size, stride, base + offset))
    last = offset + sum((n - 1) * st for n, st in zip(size, stride)) if count else offset
    if offset < 0 or any(st < 0 for st in stride) or (count and last >= numel):
        raise Unsupported(f"as_strided view outside its operand (offset {offset}, "
                          f"strides {list(stride)}, {numel} elements)")
    shape = tuple(size)
    index = em.b.full(shape=shape, dtype="i64", value=float(offset))
    for d, st in enumerate(stride):
        if size[d] != 1 and st != 0:
            step = em.b.full(shape=shape, dtype="i64", value=float(st))
            index = em.b.add(index, em.b.mul(em.b.iota(shape=shape, dtype="i64", dim=d), step))
    return index


@handles(aten.as_strided.default, aten.as_strided_copy.default)
def _as_strided(em: Emit, x: ir.Value, size: Sequence[int], stride: Sequence[int],
                storage_offset: int | None = None) -> ir.Value:
    """A view of `x`'s storage (diagonal, trace and einsum's repeated indices decompose
    to this): a reshape where it is the whole operand in order; else a gather of `x`'s
    elements at the view's storage positions."""
    index = _storage_positions(em, x, size, stride, storage_offset)
    if index is None:
        return reshape(em, x, em.out0.shape)
    flat = em.b.index_select(reshape(em, x, (spec(x).numel,)),
                             reshape(em, index, (math.prod(size),)), dim=0)
    return reshape(em, flat, em.out0.shape)


@handles(aten.as_strided_scatter.default)
def _as_strided_scatter(em: Emit, x: ir.Value, src: ir.Value, size: Sequence[int],
                        stride: Sequence[int], storage_offset: int | None = None) -> ir.Value:
    """`x` with `src` written into its view `as_strided(size, stride, storage_offset)`
    (functionalization's form of an in-place op on such a view: torch.func's jacrev of a
    linear layer on a 1-D input): a scatter of `src` at the view's positions."""
    out = em.out0
    index = _storage_positions(em, x, size, stride, storage_offset)
    src = coerce(em, src, out.dtype, tuple(size))
    if index is None:
        return reshape(em, src, out.shape)
    count = math.prod(size)
    flat = em.b.scatter(reshape(em, x, (spec(x).numel,)), reshape(em, index, (count,)),
                        reshape(em, src, (count,)), dim=0)
    return reshape(em, flat, out.shape)


def _view_positions(val: torch.Tensor, size: Sequence[int], stride: Sequence[int],
                    offset: int) -> torch.Tensor:
    """For each element of `as_strided(val, size, stride, offset)`, the row-major index
    of the element of `val` at the same storage position."""
    count = math.prod(size)
    if count > AS_STRIDED_TABLE_MAX:
        raise Unsupported(f"as_strided of a non-contiguous tensor into {count} elements "
                          f"(a gather table of {AS_STRIDED_TABLE_MAX} at most)")
    ends = [val.storage_offset() + sum((n - 1) * st for n, st in zip(val.shape, val.stride())),
            offset + sum((n - 1) * st for n, st in zip(size, stride))]
    storage = torch.arange(max(ends) + 1)
    table = torch.full_like(storage, -1)
    table[torch.as_strided(storage, val.shape, val.stride(), val.storage_offset()).flatten()] = \
        torch.arange(val.numel())
    index = torch.as_strided(table, size, stride, offset)
    if (index < 0).any():
        raise Unsupported("as_strided reading storage outside its operand's view")
    return index.contiguous()


@handles(aten.permute.default, aten.permute_copy.default)
def _permute(em: Emit, x: ir.Value, dims: Sequence[int]) -> ir.Value:
    rank = spec(x).rank
    perm = [norm_dim(d, rank) for d in dims]
    if perm == list(range(rank)):
        return x
    return em.b.transpose(x, perm=perm)


def _unpermute(em: Emit, x: ir.Value, dims: Sequence[int]) -> ir.Value:
    """Undo `_permute(em, ., dims)`: `x`'s dims back in their order before it."""
    return _permute(em, x, [list(dims).index(k) for k in range(len(dims))])


@handles(aten.transpose.int, aten.transpose_copy.int)
def _transpose(em: Emit, x: ir.Value, dim0: int, dim1: int) -> ir.Value:
    rank = spec(x).rank
    perm = list(range(rank))
    if rank:
        a, c = norm_dim(dim0, rank), norm_dim(dim1, rank)
        perm[a], perm[c] = perm[c], perm[a]
    return _permute(em, x, perm)


@handles(aten.expand.default, aten.expand_copy.default)
def _expand(em: Emit, x: ir.Value, size: Sequence[int], *, implicit: bool = False) -> ir.Value:
    return em.b.broadcast_to(x, em.out0.shape)


def _clamp_bounds(start: int | None, end: int | None, size: int) -> tuple[int, int]:
    start = 0 if start is None else start
    end = size if end is None else end
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = min(max(start, 0), size)
    end = min(max(end, start), size)
    return start, end


def slice_dim(em: Emit, x: ir.Value, dim: int, start: int, end: int, step: int = 1) -> ir.Value:
    s = spec(x)
    starts = [0] * s.rank
    limits = list(s.shape)
    strides = [1] * s.rank
    starts[dim], limits[dim], strides[dim] = start, end, step
    if end <= start:  # an empty slice: nothing to read
        shape = list(s.shape)
        shape[dim] = 0
        return em.b.full(shape=shape, dtype=s.dtype, value=0.0)
    if starts == [0] * s.rank and limits == list(s.shape) and step == 1:
        return x
    return em.b.slice(x, start=starts, limit=limits, stride=strides)


@handles(aten.slice.Tensor, aten.slice_copy.Tensor)
def _slice(em: Emit, x: ir.Value, dim: int = 0, start: int | None = None, end: int | None = None,
           step: int = 1) -> ir.Value:
    s = spec(x)
    d = norm_dim(dim, s.rank)
    lo, hi = _clamp_bounds(start, end, s.shape[d])
    return slice_dim(em, x, d, lo, hi, step)


@handles(aten.select.int, aten.select_copy.int)
def _select(em: Emit, x: ir.Value, dim: int, index: int) -> ir.Value:
    s = spec(x)
    d = norm_dim(dim, s.rank)
    i = index + s.shape[d] if index < 0 else index
    return reshape(em, slice_dim(em, x, d, i, i + 1), em.out0.shape)


@handles(aten.slice_scatter.default)
def _slice_scatter(em: Emit, x: ir.Value, src: ir.Value, dim: int = 0, start: int | None = None,
                   end: int | None = None, step: int = 1) -> ir.Value:
    """x with `src` in its strided slice along dim: src padded into place (zeros between
    and around, interior for the step), then selected where a constant mask of the
    slice's positions is set; the gradient of each side is its select's."""
    out = em.out0
    d = norm_dim(dim, out.rank)
    size = out.shape[d]
    lo, hi = _clamp_bounds(start, end, size)
    count = len(range(lo, hi, step))
    shape = list(out.shape)
    shape[d] = count
    src = coerce(em, src, out.dtype, shape)
    if count == 0:
        return cast(em, x, out.dtype)
    if count == size:
        return src
    low, high, interior = [0] * out.rank, [0] * out.rank, [0] * out.rank
    low[d], interior[d] = lo, step - 1
    high[d] = size - (lo + (count - 1) * step + 1)
    placed = em.b.pad(src, low=low, high=high, interior=interior, value=0.0)
    taken = torch.zeros(size, dtype=torch.bool)
    taken[lo:hi:step] = True
    mask = em.b.broadcast_in_dim(em.b.constant(taken), shape=out.shape, dims=[d])
    return em.b.select(mask, placed, cast(em, x, out.dtype))


@handles(aten.select_scatter.default)
def _select_scatter(em: Emit, x: ir.Value, src: ir.Value, dim: int, index: int) -> ir.Value:
    out = em.out0
    d = norm_dim(dim, out.rank)
    i = index + out.shape[d] if index < 0 else index
    shape = list(out.shape)
    shape[d] = 1
    return _slice_scatter(em, x, reshape(em, src, shape), d, i, i + 1)


@handles(aten.unfold.default, aten.unfold_copy.default)
def _unfold(em: Emit, x: ir.Value, dim: int, size: int, step: int) -> ir.Value:
    """Tensor.unfold (sliding windows along dim, as a new last dim): one strided slice per
    offset into the window, side by side; overlapping windows' gradients merge where the
    slices' pads overlap."""
    out = em.out0
    s = spec(x)
    if s.rank == 0:
        return reshape(em, x, out.shape)
    d = norm_dim(dim, s.rank)
    n = out.shape[d]
    if out.numel == 0:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=0.0)
    column = [*out.shape[:-1], 1]
    taps = [reshape(em, slice_dim(em, x, d, k, k + (n - 1) * step + 1, step), column)
            for k in range(size)]
    return em.b.concat(taps, dim=out.rank - 1)


@handles(aten.cat.default)
def _cat(em: Emit, tensors: Sequence[ir.Value], dim: int = 0) -> ir.Value:
    out = em.out0
    parts = [cast(em, t, out.dtype) for t in tensors
             if spec(t).numel > 0 and spec(t).rank == out.rank]
    if not parts:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=0.0)
    if len(parts) == 1:
        return parts[0]
    return em.b.concat(parts, dim=norm_dim(dim, out.rank))


@handles(aten.split_with_sizes.default, aten.split.Tensor,
         aten.split_with_sizes_copy.default, aten.split_copy.Tensor)
def _split(em: Emit, x: ir.Value, sizes: Any, dim: int = 0) -> list[ir.Value]:
    s = spec(x)
    d = norm_dim(dim, s.rank)
    if isinstance(sizes, int):
        n = s.shape[d]
        sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if sizes else [n]
    out, start = [], 0
    for size in sizes:
        out.append(slice_dim(em, x, d, start, start + size))
        start += size
    return out


@handles(aten.flip.default)
def _flip(em: Emit, x: ir.Value, dims: Sequence[int]) -> ir.Value:
    dims = sorted({norm_dim(d, spec(x).rank) for d in dims})
    return em.b.reverse(x, dims=dims) if dims else x


@handles(aten.constant_pad_nd.default)
def _pad(em: Emit, x: ir.Value, pad: Sequence[int], value: float = 0) -> ir.Value:
    s = spec(x)
    low, high = [0] * s.rank, [0] * s.rank
    for i in range(len(pad) // 2):
        d = s.rank - 1 - i
        low[d], high[d] = pad[2 * i], pad[2 * i + 1]
    if min(low + high) < 0:  # negative padding crops
        x = em.b.slice(x, start=[max(-lo, 0) for lo in low],
                       limit=[n - max(-hi, 0) for n, hi in zip(s.shape, high)],
                       stride=[1] * s.rank)
    if max(low + high, default=0) > 0:
        x = em.b.pad(x, low=[max(v, 0) for v in low], high=[max(v, 0) for v in high],
                     interior=[0] * s.rank, value=float(value))
    return x


@handles(aten.repeat.default)
def _repeat(em: Emit, x: ir.Value, repeats: Sequence[int]) -> ir.Value:
    s = spec(x)
    lead = len(repeats) - s.rank
    shape = [1] * lead + list(s.shape)
    x = reshape(em, x, shape)
    # broadcast [s0, s1, ...] to [r0, s0, r1, s1, ...] then merge each pair
    big = [v for r, n in zip(repeats, shape) for v in (r, n)]
    x = em.b.broadcast_in_dim(x, shape=big, dims=list(range(1, 2 * len(shape), 2)))
    return reshape(em, x, em.out0.shape)


# ------------------------------------------------------------------ indexing
def _wrap_negative(em: Emit, idx: ir.Value, size: int) -> ir.Value:
    b = em.b
    neg = b.compare(idx, full_as(em, idx, 0.0), direction="lt")
    return b.select(neg, b.add(idx, full_as(em, idx, float(size))), idx)


@handles(aten.gather.default)
def _gather(em: Emit, x: ir.Value, dim: int, index: ir.Value, *, sparse_grad: bool = False) -> ir.Value:
    s = spec(x)
    if s.rank == 0:
        return reshape(em, em.b.gather(reshape(em, x, (1,)), reshape(em, index, (1,)), dim=0),
                       em.out0.shape)
    return em.b.gather(x, index, dim=norm_dim(dim, s.rank))


@handles(aten.index_select.default)
def _index_select(em: Emit, x: ir.Value, dim: int, index: ir.Value) -> ir.Value:
    s = spec(x)
    if s.rank == 0:
        return reshape(em, x, em.out0.shape)
    idx = reshape(em, index, (spec(index).numel,))
    return reshape(em, em.b.index_select(x, idx, dim=norm_dim(dim, s.rank)), em.out0.shape)


@handles(aten.scatter_add.default, aten.scatter.src, aten.scatter.value)
def _scatter(em: Emit, x: ir.Value, dim: int, index: ir.Value, src: Any) -> ir.Value:
    """scatter_add, or scatter (of a tensor or a scalar): in order, so of repeated
    indices the last one stays, as eager's CPU kernel does."""
    op = "scatter_add" if em.node.target is aten.scatter_add.default else "scatter"
    s = spec(x)
    if spec(index).numel == 0:
        return x
    ishape = spec(index).shape
    if not isinstance(src, ir.Value):
        src = em.b.full(shape=ishape, dtype=s.dtype, value=float(src))
    if s.rank == 0:
        r = em.b.create(op, [reshape(em, x, (1,)), reshape(em, index, (1,)),
                             reshape(em, src, (1,))], dim=0)
        return reshape(em, r, s.shape)
    src = cast(em, src, s.dtype)
    if spec(src).shape != ishape:
        src = em.b.slice(src, start=[0] * s.rank, limit=list(ishape), stride=[1] * s.rank)
    return em.b.create(op, [x, index, src], dim=norm_dim(dim, s.rank))


# scatter_reduce's combining reductions: the dg op and its identity
_SCATTER_COMBINE = {"amax": ("scatter_max", float("-inf")), "amin": ("scatter_min", float("inf")),
                    "prod": ("scatter_mul", 1.0)}


@handles(aten.scatter_reduce.two)
def _scatter_reduce(em: Emit, x: ir.Value, dim: int, index: ir.Value, src: ir.Value,
                    reduce: str, *, include_self: bool = True) -> ir.Value:
    """sum and mean (a graph network's aggregations) by scatter_adds of the values and of
    their counts; amax/amin/prod by dg.scatter_max/min/mul, from the reduction's identity
    where x is left out. Positions no index reaches keep x."""
    s = spec(x)
    b = em.b
    if spec(index).numel == 0:
        return x
    if s.rank == 0:
        one = [reshape(em, v, (1,)) for v in (x, index, src)]
        return reshape(em, _scatter_reduce(em, *one[:1], 0, *one[1:], reduce,
                                           include_self=include_self), ())
    if reduce == "mean" and not is_float(s.dtype):
        raise Unsupported("scatter_reduce mean of an integer tensor (eager floors it)")
    if s.dtype == "i1":  # a sum of booleans is their or, a product their and
        reduce = {"sum": "amax", "prod": "amin"}.get(reduce, reduce)
    d = norm_dim(dim, s.rank)
    ishape = spec(index).shape
    src = cast(em, src, s.dtype)
    if spec(src).shape != ishape:
        src = b.slice(src, start=[0] * s.rank, limit=list(ishape), stride=[1] * s.rank)
    count_dtype = s.dtype if is_float(s.dtype) else "i64"
    counts = b.create("scatter_add", [b.full(shape=s.shape, dtype=count_dtype, value=0.0), index,
                                      b.full(shape=ishape, dtype=count_dtype, value=1.0)], dim=d)
    reached = b.compare(counts, full_as(em, counts, 0.0), direction="gt")
    if reduce in _SCATTER_COMBINE:
        op, identity = _SCATTER_COMBINE[reduce]
        if s.dtype == "i1":
            identity = 0.0 if reduce == "amax" else 1.0
        base = x if include_self else b.select(reached, full_as(em, x, identity), x)
        return b.create(op, [base, index, src], dim=d)
    total = b.create("scatter_add", [b.full(shape=s.shape, dtype=s.dtype, value=0.0), index, src],
                     dim=d)
    if include_self:
        total = b.add(total, x)
        counts = b.add(counts, full_as(em, counts, 1.0))
    if reduce == "mean":
        total = b.div(total, b.max(counts, full_as(em, counts, 1.0)))
    return b.select(reached, total, x)


@handles(aten.index_reduce.default)
def _index_reduce(em: Emit, x: ir.Value, dim: int, index: ir.Value, source: ir.Value,
                  reduce: str, *, include_self: bool = True) -> ir.Value:
    """scatter_reduce with the 1-D index broadcast along `dim` over the source."""
    s, src = spec(x), spec(source)
    if s.rank == 0:
        return reshape(em, _index_reduce(em, reshape(em, x, (1,)), 0, index,
                                         reshape(em, source, (1,)), reduce,
                                         include_self=include_self), ())
    d = norm_dim(dim, s.rank)
    wide = em.b.broadcast_in_dim(reshape(em, index, (spec(index).numel,)), shape=src.shape,
                                 dims=[d])
    return _scatter_reduce(em, x, d, wide, source, reduce, include_self=include_self)


@handles(aten.histc.default)
def _histc(em: Emit, x: ir.Value, bins: int = 100, min: float = 0, max: float = 0) -> ir.Value:
    """Counts per bin as a comparison of every element's bin with every bin, summed:
    O(elements x bins), fine for the router statistics it serves (a mixture of experts'
    tokens per expert). Bins as eager's: (x - lo) / (hi - lo) * bins truncated, x == hi
    in the last bin, out-of-range values and NaN in none; min == max takes the data's
    range (widened by 1 each way if that is a single value)."""
    b = em.b
    s = spec(x)
    if not is_float(s.dtype):
        raise Unsupported(f"histc of {s.dtype}")
    ct = _opmath(s.dtype)
    flat = reshape(em, cast(em, x, ct), (s.numel,))
    if min == max:
        lo, hi = (reshape(em, b.create(op, [flat], dims=[0]), (1,))
                  for op in ("reduce_min", "reduce_max"))
        if min != 0 or max != 0:  # eager: equal bounds other than 0, 0 widen them
            lo = b.full(shape=(1,), dtype=ct, value=float(min) - 1)
            hi = b.full(shape=(1,), dtype=ct, value=float(max) + 1)
        else:
            same = b.compare(lo, hi, direction="eq")
            one = b.full(shape=(1,), dtype=ct, value=1.0)
            lo, hi = b.select(same, b.sub(lo, one), lo), b.select(same, b.add(hi, one), hi)
        lo, hi = (b.broadcast_to(v, (s.numel,)) for v in (lo, hi))
    else:
        lo = b.full(shape=(s.numel,), dtype=ct, value=float(min))
        hi = b.full(shape=(s.numel,), dtype=ct, value=float(max))
    scaled = b.mul(b.div(b.sub(flat, lo), b.sub(hi, lo)), full_as(em, flat, float(bins)))
    index = b.convert(b.floor(scaled), dtype="i64")
    last = b.full(shape=(s.numel,), dtype="i64", value=float(bins - 1))
    index = b.select(b.compare(flat, hi, direction="eq"), last, index)
    inside = b.create("and", (b.compare(flat, lo, direction="ge"),
                               b.compare(flat, hi, direction="le")))
    index = b.select(inside, index, b.full(shape=(s.numel,), dtype="i64", value=-1.0))
    grid = (s.numel, bins)
    hits = b.compare(b.broadcast_in_dim(index, shape=grid, dims=[0]),
                     b.iota(shape=grid, dtype="i64", dim=1), direction="eq")
    return cast(em, b.reduce_sum(cast(em, hits, ct), dims=[0]), em.out0.dtype)


@handles(aten.bucketize.Tensor, aten.bucketize.Scalar)
def _bucketize(em: Emit, x: Any, boundaries: ir.Value, *, out_int32: bool = False,
               right: bool = False) -> ir.Value:
    return _search_sorted(em, boundaries, x, right)


@handles(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def _searchsorted(em: Emit, sorted_sequence: ir.Value, x: Any, *, out_int32: bool = False,
                  right: bool = False, side: str | None = None,
                  sorter: ir.Value | None = None) -> ir.Value:
    if sorter is not None:
        sorted_sequence = em.b.gather(sorted_sequence, sorter, dim=spec(sorted_sequence).rank - 1)
    return _search_sorted(em, sorted_sequence, x, right if side is None else side == "right")


def _search_sorted(em: Emit, seq: ir.Value, x: Any, right: bool) -> ir.Value:
    """Where each value would go in the sorted last dim of `seq`: the count of the
    elements it comes after, compared as eager's binary search compares (not b >= x, or
    not b > x for `right`, so NaN values go last), every value with every element
    (values x elements work, fused into the count). Same as eager's search for any
    sequence without NaN (eager's result with NaN in the sequence depends on where its
    search looks)."""
    b = em.b
    out = em.out0
    ss = spec(seq)
    ct = ss.dtype if not isinstance(x, ir.Value) else \
        from_torch_dtype(torch.promote_types(torch_dtype(ss.dtype), torch_dtype(spec(x).dtype)))
    shape = (*out.shape, ss.shape[-1])
    r = len(out.shape)
    values = b.broadcast_in_dim(coerce(em, x, ct, out.shape), shape=shape, dims=list(range(r)))
    lead = list(range(r - 1)) if ss.rank > 1 else []
    elements = b.broadcast_in_dim(cast(em, seq, ct), shape=shape, dims=[*lead, r])
    before = b.create("not", [b.compare(elements, values, direction="gt" if right else "ge")])
    return cast(em, b.reduce_sum(cast(em, before, "i64"), dims=[r]), out.dtype)


@handles(aten.cumsum.default)
def _cumsum(em: Emit, x: ir.Value, dim: int, dtype: Any = None) -> ir.Value:
    out = em.out0
    s = spec(x)
    x = cast(em, x, out.dtype)
    if s.rank == 0:
        return x
    d = norm_dim(dim, s.rank)
    n = s.shape[d]
    if not is_float(out.dtype):  # no BLAS for integer matmuls: log2(n) rounds of adds
        return _running_sum(em, x, d)
    # 16-bit floats sum in f32, as eager's (block partials rounded to bf16 were 3x
    # further from the exact sums)
    acc = _opmath(out.dtype)
    x = cast(em, x, acc)
    finite = _finite(em, x)
    z = em.b.select(finite, x, full_as(em, x, 0.0))
    if d == s.rank - 1:  # rows: no data moves
        rows = reshape(em, z, (s.numel // max(n, 1), n))
        sums = reshape(em, _prefix_sums(em, rows, acc, axis=1), s.shape)
    else:  # the scanned dim first: the permute moves whole runs of the dims after it
        perm = [d] + [k for k in range(s.rank) if k != d]
        cols = reshape(em, _permute(em, z, perm), (n, s.numel // max(n, 1)))
        sums = _prefix_sums(em, cols, acc, axis=0)
        sums = _unpermute(em, reshape(em, sums, [s.shape[k] for k in perm]), perm)
    return cast(em, _with_nonfinite_prefixes(em, x, sums, d), out.dtype)


def _finite(em: Emit, x: ir.Value) -> ir.Value:
    b = em.b
    return b.compare(b.abs(x), full_as(em, x, math.inf), direction="lt")  # NaN: false


def _with_nonfinite_prefixes(em: Emit, x: ir.Value, sums: ir.Value, d: int) -> ir.Value:
    """`sums`, the prefix sums along d of x's finite elements, made what eager's running
    sums are from the first NaN or infinity on: NaN after a NaN or after infinities of
    both signs, else that infinity. Taken from the first positions of each kind (row
    reductions), not from the matmul, which multiplies every element by the triangle's
    zeros too (0 * inf is NaN: every earlier sum of the row came out NaN). The fix-up is
    a constant to autodiff: gradients flow as through the finite sums (an infinite
    element's own gradient is 0; eager's, the sum of the later cotangents)."""
    b = em.b
    s = spec(x)
    n = s.shape[d]
    position = b.iota(shape=s.shape, dtype="i32", dim=d)  # AVX2 has no vector i64 min
    kept = [k for k in range(s.rank) if k != d]

    def reached(found: ir.Value) -> ir.Value:
        """Whether the row has had a `found` element up to each position."""
        first = b.reduce_min(b.select(found, position, full_as(em, position, float(n))), dims=[d])
        return b.compare(position, b.broadcast_in_dim(first, shape=s.shape, dims=kept),
                         direction="ge")
    nan = reached(b.compare(x, x, direction="ne"))
    plus = reached(b.compare(x, full_as(em, x, math.inf), direction="eq"))
    minus = reached(b.compare(x, full_as(em, x, -math.inf), direction="eq"))
    nan = b.create("or", [nan, b.create("and", [plus, minus])])
    special = b.select(nan, full_as(em, x, math.nan),
                       b.select(plus, full_as(em, x, math.inf), full_as(em, x, -math.inf)))
    fix = b.select(b.create("or", [nan, b.create("or", [plus, minus])]), b.sub(special, sums),
                   full_as(em, x, 0.0))
    return b.add(sums, b.stop_gradient(fix))


# prefix sums up to this long are one matmul with an n x n triangular matrix
CUMSUM_DIRECT_MAX = 128


def _prefix_sums(em: Emit, x: ir.Value, dtype: str, axis: int) -> ir.Value:
    """Inclusive prefix sums along `axis` of the 2-D `x`, as matmuls with triangular
    matrices of ones (no scan op: the matmul's derivative and kernels serve): x @ U for
    rows (axis 1), L @ x for columns (axis 0). Up to CUMSUM_DIRECT_MAX long, one [n, n]
    matrix: O(n^2) work per row, fine for what models use it on (position ids and masks
    along a sequence). Longer, in blocks of b ~ 2 sqrt(n): the sums within each block
    ([b, b]) plus its carry, the exclusive prefix sum of the block totals ([n/b, n/b]),
    O(n^1.5) work. A 1024 x 1024 cumsum took 22 ms as one matmul, 21x eager's; in
    blocks of 64, 1.8 ms along rows and 2.7 ms along columns (eager: 1.0 and 6.1 ms);
    blocks of 32 or 16 were slower (smaller matmuls)."""
    shape = spec(x).shape
    n, m = shape[axis], shape[1 - axis]
    if n <= CUMSUM_DIRECT_MAX:
        return _triangle_matmul(em, x, n, dtype, axis, strict=False)
    b = 2 << math.ceil(math.log2(math.isqrt(n)))
    nb = -(-n // b)
    if nb * b != n:
        high = [0, nb * b - n] if axis else [nb * b - n, 0]
        x = em.b.pad(x, low=[0, 0], high=high, interior=[0, 0], value=0.0)
    if axis:  # [m, nb, b]: blocks are rows of b
        within = reshape(em, _triangle_matmul(em, reshape(em, x, (m * nb, b)), b, dtype, 1,
                                              strict=False), (m, nb, b))
        carry_dims = [0, 1]
    else:  # [nb, b, m]: blocks of b rows side by side as [b, nb * m] for one matmul
        side = reshape(em, _permute(em, reshape(em, x, (nb, b, m)), [1, 0, 2]), (b, nb * m))
        within = _triangle_matmul(em, side, b, dtype, 0, strict=False)
        within = _permute(em, reshape(em, within, (b, nb, m)), [1, 0, 2])
        carry_dims = [0, 2]
    full = spec(within).shape
    start = [0, 0, b - 1] if axis else [0, b - 1, 0]
    totals = reshape(em, em.b.slice(within, start=start, limit=full, stride=[1, 1, 1]),
                     (m, nb) if axis else (nb, m))
    carries = _triangle_matmul(em, totals, nb, dtype, axis, strict=True)
    sums = em.b.add(within, em.b.broadcast_in_dim(carries, shape=full, dims=carry_dims))
    sums = reshape(em, sums, (m, nb * b) if axis else (nb * b, m))
    if nb * b != n:
        sums = em.b.slice(sums, start=[0, 0], limit=list(shape), stride=[1, 1])
    return sums


def _triangle_matmul(em: Emit, x: ir.Value, n: int, dtype: str, axis: int,
                     strict: bool) -> ir.Value:
    """(Exclusive when `strict`) prefix sums of length-n `axis` of 2-D `x` as one matmul."""
    i = em.b.iota(shape=(n, n), dtype="i64", dim=0)
    j = em.b.iota(shape=(n, n), dtype="i64", dim=1)
    # rows: x @ U, U[i, j] = i <= j; columns: L @ x, L[i, j] = j <= i
    direction = ("lt" if strict else "le") if axis else ("gt" if strict else "ge")
    ones = cast(em, em.b.compare(i, j, direction=direction), dtype)
    return em.b.matmul(x, ones) if axis else em.b.matmul(ones, x)


@handles(aten.cumprod.default)
def _cumprod(em: Emit, x: ir.Value, dim: int, dtype: Any = None) -> ir.Value:
    """Plain multiplications, so the gradient needs no division (zeros included)."""
    out = em.out0
    s = spec(x)
    y = cast(em, x, _opmath(out.dtype))
    if s.rank == 0 or s.numel == 0:
        return cast(em, y, out.dtype)
    (y,) = _scan(em, [y], norm_dim(dim, s.rank), [1.0], lambda e, l: [em.b.mul(e[0], l[0])])
    return cast(em, y, out.dtype)


def _scan(em: Emit, values: list[ir.Value], d: int, identities: list[float],
          combine: Callable[[list, list], list]) -> list[ir.Value]:
    """Inclusive scan along dim d of tuples of same-shaped `values` (Hillis-Steele): log2(n)
    rounds, each combining every element with the running result k places back (k = 1,
    2, 4, ...; `identities` fill in before the start). `combine(earlier, later)` takes
    and returns tuples; it must be associative. No scan op: plain dg ops, differentiable."""
    s = spec(values[0])
    n = s.shape[d]
    k = 1
    while k < n:
        limit = list(s.shape)
        limit[d] = n - k
        low = [0] * s.rank
        low[d] = k
        earlier = [em.b.pad(em.b.slice(v, start=[0] * s.rank, limit=limit, stride=[1] * s.rank),
                            low=low, high=[0] * s.rank, interior=[0] * s.rank, value=identity)
                   for v, identity in zip(values, identities)]
        values = combine(earlier, values)
        k *= 2
    return values


def _running_sum(em: Emit, x: ir.Value, d: int) -> ir.Value:
    """Inclusive prefix sums along dim d as a scan of adds (exact for integers, which no
    BLAS matmul serves)."""
    return _scan(em, [x], d, [0.0], lambda e, l: [em.b.add(e[0], l[0])])[0]


@handles(aten.cummax.default, aten.cummin.default)
def _cummax(em: Emit, x: ir.Value, dim: int) -> list[ir.Value]:
    """A scan of (value, index) pairs in eager's order: an element replaces the running
    extreme when it is at least as large (small), or NaN, unless the running one is NaN:
    the last of equal extremes wins, and the first NaN stays until the next."""
    s = spec(x)
    b = em.b
    if s.dtype == "i1":
        raise Unsupported(f"{em.node.target._overloadpacket.__name__} of a bool tensor")
    index = b.full(shape=s.shape, dtype="i64", value=0.0)
    if s.rank == 0 or s.numel == 0:
        return [x, index]
    d = norm_dim(dim, s.rank)
    index = b.iota(shape=s.shape, dtype="i64", dim=d)
    largest = em.node.target is aten.cummax.default

    def combine(earlier: list, later: list) -> list:
        (ev, ei), (lv, li) = earlier, later
        beats = b.compare(lv, ev, direction="ge" if largest else "le")
        if is_float(s.dtype):
            nan_e, nan_l = b.compare(ev, ev, direction="ne"), b.compare(lv, lv, direction="ne")
            beats = b.create("or", [nan_l, b.create("and", [b.create("not", [nan_e]), beats])])
        # before the start (index -1) nothing: no value of the dtype is an identity for
        # both rules (int64's extremes are not even f64 pad values)
        start = b.compare(ei, full_as(em, ei, 0.0), direction="lt")
        beats = b.create("or", [start, beats])
        return [b.select(beats, lv, ev), b.select(beats, li, ei)]
    return _scan(em, [x, index], d, [0.0, -1.0], combine)


@handles(aten.logcumsumexp.default)
def _logcumsumexp(em: Emit, x: ir.Value, dim: int) -> ir.Value:
    """A scan of log(exp(a) + exp(b)) = hi + log1p(exp(lo - hi)), hi the larger: exact for
    any range of values (a running-max shift would underflow the early terms), and its
    gradient splits a tie in half, as the softmax weights do."""
    b = em.b
    s = spec(x)
    if not is_float(s.dtype):
        raise Unsupported("logcumsumexp of an integer tensor")
    y = cast(em, x, _opmath(s.dtype))
    if s.rank == 0 or s.numel == 0:
        return cast(em, y, em.out0.dtype)

    def combine(earlier: list, later: list) -> list:
        (e,), (l,) = earlier, later
        first = b.compare(e, l, direction="ge")
        hi, lo = b.select(first, e, l), b.select(first, l, e)
        # infinite hi: inf - inf would be NaN; the result is hi itself
        infinite = b.compare(b.abs(hi), full_as(em, hi, math.inf), direction="eq")
        gap = b.select(infinite, full_as(em, hi, 0.0), b.sub(lo, hi))
        return [b.add(hi, b.log1p(b.exp(gap)))]
    (y,) = _scan(em, [y], norm_dim(dim, s.rank), [-math.inf], combine)
    return cast(em, y, em.out0.dtype)


@handles(aten.prod.default, aten.prod.dim_int)
def _prod(em: Emit, x: ir.Value, dim: int | None = None, keepdim: bool = False, *,
          dtype: Any = None) -> ir.Value:
    """The reduced elements as the last dim of a 2-D [kept, reduced] array, halved by
    multiplying its two halves until one column is left: plain multiplications, so the
    gradient needs no division (zeros included) and no product reduction op."""
    out = em.out0
    s = spec(x)
    y = cast(em, x, _opmath(out.dtype))
    dims = norm_dims(dim, s.rank)
    kept = [k for k in range(s.rank) if k not in dims]
    rows = math.prod(s.shape[k] for k in kept)
    n = math.prod(s.shape[k] for k in dims)
    if n == 0:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=1.0)
    y = reshape(em, _permute(em, y, kept + dims), (rows, n))
    while n > 1:
        if n % 2:
            y = em.b.pad(y, low=[0, 0], high=[0, 1], interior=[0, 0], value=1.0)
            n += 1
        half = n // 2
        y = em.b.mul(em.b.slice(y, start=[0, 0], limit=[rows, half], stride=[1, 1]),
                     em.b.slice(y, start=[0, half], limit=[rows, n], stride=[1, 1]))
        n = half
    return cast(em, reshape(em, y, out.shape), out.dtype)


@handles(aten.eye.default, aten.eye.m)
def _eye(em: Emit, n: int, m: int | None = None, **kwargs: Any) -> ir.Value:
    out = em.out0
    i = em.b.iota(shape=out.shape, dtype="i64", dim=0)
    j = em.b.iota(shape=out.shape, dtype="i64", dim=1)
    return cast(em, em.b.compare(i, j, direction="eq"), out.dtype)


@handles(torch.ops.fusegrad.stop_gradient.default)
def _stop_gradient(em: Emit, x: ir.Value) -> ir.Value:
    return em.b.stop_gradient(x) if is_float(spec(x).dtype) else x


def _plain_weight_gradient(scale_grad_by_freq: bool, sparse: bool) -> None:
    """An embedding's options that change only its weight's gradient, which dg derives
    from the forward: scaled by frequency, or a sparse COO tensor (which SparseAdam
    requires; dg's gradients are dense). Such a lookup runs eagerly (it is one gather)."""
    if scale_grad_by_freq:
        raise Unsupported("scale_grad_by_freq=True")
    if sparse:
        raise Unsupported("sparse=True (its weight's gradient is a sparse tensor; fusegrad "
                          "computes dense ones)")


@handles(aten.embedding.default)
def _embedding(em: Emit, weight: ir.Value, indices: ir.Value, padding_idx: int = -1,
               scale_grad_by_freq: bool = False, sparse: bool = False) -> ir.Value:
    _plain_weight_gradient(scale_grad_by_freq, sparse)
    rows = em.b.index_select(weight, indices, dim=0)
    if padding_idx is None or padding_idx < 0:
        return rows
    # the padding row gets no gradient from the lookup (as eager's embedding_backward):
    # padding tokens read it through stop_gradient
    shape = spec(rows).shape
    is_pad = em.b.compare(indices, full_as(em, indices, float(padding_idx)), direction="eq")
    is_pad = em.b.broadcast_in_dim(is_pad, shape=shape, dims=list(range(len(shape) - 1)))
    return em.b.select(is_pad, em.b.stop_gradient(rows), rows)


# embedding_bag in max mode compares every bag with every index: at most this many
# bag x index x feature elements
EMBEDDING_BAG_MAX_GRID = 1 << 24


@handles(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)
def _embedding_bag(em: Emit, weight: ir.Value, indices: ir.Value, offsets: ir.Value,
                   scale_grad_by_freq: bool = False, mode: int = 0, sparse: bool = False,
                   per_sample_weights: ir.Value | None = None,
                   include_last_offset: bool = False, padding_idx: int = -1) -> list[Any]:
    """The looked-up rows summed into their bags by one scatter_add (sum, and mean divided
    by each bag's count), or, for max, each bag's rows selected from all rows (bags x
    indices x features work). A row's bag is the number of offsets at or before it,
    less one; padding_idx rows count in no bag; empty bags are 0, as eager's."""
    _plain_weight_gradient(scale_grad_by_freq, sparse)
    b = em.b
    out = em.out0
    acc = _opmath(out.dtype)  # 16-bit floats sum in f32, as eager's
    bags, dim = out.shape
    n = spec(indices).shape[0]
    rows = cast(em, b.index_select(weight, indices, dim=0), acc)
    counted = b.full(shape=(n,), dtype="i1", value=1.0) if padding_idx is None or \
        padding_idx < 0 else b.compare(indices, full_as(em, indices, float(padding_idx)),
                                       direction="ne")
    length = _equal_bags(em.node.args[2], n, bags, include_last_offset)
    if length:
        return [cast(em, _equal_bag_reduce(em, rows, counted, per_sample_weights, mode,
                                           length), out.dtype), *_embedding_bag_aux()]
    starts = offsets
    if include_last_offset:
        starts = b.slice(offsets, start=[0], limit=[bags], stride=[1])
    # a row's bag: the bag starts at or before it, less one (a scan of start marks)
    marks = b.create("scatter_add", [b.full(shape=(n + 1,), dtype="i64", value=0.0),
                                     cast(em, starts, "i64"),
                                     b.full(shape=(bags,), dtype="i64", value=1.0)], dim=0)
    marks = b.slice(marks, start=[0], limit=[n], stride=[1])
    bag = _running_sum(em, marks, 0)
    bag = b.sub(bag, full_as(em, bag, 1.0))
    if mode == 2:
        if n * bags * dim > EMBEDDING_BAG_MAX_GRID:
            raise Unsupported(f"embedding_bag max mode over {bags} bags x {n} indices x "
                              f"{dim} features (compiled up to {EMBEDDING_BAG_MAX_GRID})")
        cube, grid = (bags, n, dim), (bags, n)
        member = b.create("and", [b.compare(b.broadcast_in_dim(bag, shape=grid, dims=[1]),
                                            b.iota(shape=grid, dtype="i64", dim=0),
                                            direction="eq"),
                                  b.broadcast_in_dim(counted, shape=grid, dims=[1])])
        member = b.broadcast_in_dim(member, shape=cube, dims=[0, 1])
        candidates = b.select(member, b.broadcast_in_dim(rows, shape=cube, dims=[1, 2]),
                              b.full(shape=cube, dtype=acc, value=-math.inf))
        result = b.reduce_max(candidates, dims=[1])
        empty = b.compare(result, full_as(em, result, -math.inf), direction="eq")
        result = b.select(empty, full_as(em, result, 0.0), result)
    else:
        if per_sample_weights is not None:
            rows = b.mul(rows, b.broadcast_in_dim(cast(em, per_sample_weights, acc),
                                                  shape=(n, dim), dims=[0]))
        rows = b.select(b.broadcast_in_dim(counted, shape=(n, dim), dims=[0]), rows,
                        b.full(shape=(n, dim), dtype=acc, value=0.0))
        target = b.broadcast_in_dim(bag, shape=(n, dim), dims=[0])
        result = b.create("scatter_add", [b.full(shape=(bags, dim), dtype=acc, value=0.0),
                                          target, rows], dim=0)
        if mode == 1:
            ones = cast(em, counted, "i64")
            count = b.create("scatter_add", [b.full(shape=(bags,), dtype="i64", value=0.0), bag,
                                             ones], dim=0)
            count = b.max(count, full_as(em, count, 1.0))
            result = b.div(result, b.broadcast_in_dim(cast(em, count, acc),
                                                      shape=(bags, dim), dims=[0]))
    return [cast(em, result, out.dtype), *_embedding_bag_aux()]


def _embedding_bag_aux() -> list[Unavailable]:
    """embedding_bag's other results, for eager's backward only."""
    return [Unavailable(f"embedding_bag's {what}")
            for what in ("offset2bag", "bag_size", "max_indices")]


def _equal_bags(offsets: Any, n: int, bags: int, include_last_offset: bool) -> int | None:
    """The common bag length when the offsets are `arange(0, n, length)` in the graph
    (EmbeddingBag's 2-d input), else None."""
    if not isinstance(offsets, torch.fx.Node) or offsets.target is not aten.arange.start_step:
        return None
    start, end, step = (list(offsets.args) + [1])[:3]
    if not all(isinstance(v, int) for v in (start, end, step)) or start != 0 or step <= 0:
        return None
    count = bags + 1 if include_last_offset else bags
    if len(range(start, end, step)) != count or bags * step != n:
        return None
    return step


def _equal_bag_reduce(em: Emit, rows: ir.Value, counted: ir.Value,
                      per_sample_weights: ir.Value | None, mode: int, length: int) -> ir.Value:
    """Bags of `length` consecutive rows: a reduction over [bags, length, dim], fused and
    threaded like any other, instead of a scatter."""
    b = em.b
    bags, dim = em.out0.shape
    dtype = spec(rows).dtype
    cube = (bags, length, dim)
    keep = b.broadcast_in_dim(reshape(em, counted, (bags, length)), shape=cube, dims=[0, 1])
    rows = reshape(em, rows, cube)
    if mode == 2:
        best = b.reduce_max(b.select(keep, rows, b.full(shape=cube, dtype=dtype,
                                                          value=-math.inf)), dims=[1])
        return b.select(b.compare(best, full_as(em, best, -math.inf), direction="eq"),
                        full_as(em, best, 0.0), best)
    if per_sample_weights is not None:
        rows = b.mul(rows, b.broadcast_in_dim(
            reshape(em, cast(em, per_sample_weights, dtype), (bags, length)),
            shape=cube, dims=[0, 1]))
    total = b.reduce_sum(b.select(keep, rows, b.full(shape=cube, dtype=dtype, value=0.0)),
                         dims=[1])
    if mode != 1:
        return total
    count = b.reduce_sum(cast(em, reshape(em, counted, (bags, length)), dtype), dims=[1])
    count = b.max(count, full_as(em, count, 1.0))
    return b.div(total, b.broadcast_in_dim(count, shape=(bags, dim), dims=[0]))


@dataclass(frozen=True)
class _Linearised:
    """x[indices] as one index_select: the indexed dims moved to the front and merged
    (`flat`), one i64 index per picked element (`linear`, `idx_shape` flattened), and
    where PyTorch puts the picked dims in the result."""

    flat: ir.Value  # [prod(indexed dims)] + rest dims
    linear: ir.Value  # [n]
    idx_shape: list[int]
    picked: list[int]
    rest: list[int]

    def result_perm(self) -> list[int] | None:
        """PyTorch keeps adjacent indexed dims in place: from [idx..., rest...] to the
        result's order, or None when that is already it."""
        adjacent = self.picked == list(range(self.picked[0], self.picked[-1] + 1))
        if not adjacent or self.picked[0] == 0:
            return None
        k, p = len(self.idx_shape), self.picked[0]
        return list(range(k, k + p)) + list(range(k)) + list(range(k + p, k + len(self.rest)))


def _linearise(em: Emit, x: ir.Value, indices: Sequence[ir.Value | None]) -> _Linearised:
    b = em.b
    s = spec(x)
    picked = [d for d, i in enumerate(indices) if i is not None]
    if any(spec(indices[d]).dtype in ("i1", "i8") for d in picked):
        raise Unsupported("boolean-mask indexing has a data-dependent shape")
    idx_shape = list(torch.broadcast_shapes(*[spec(indices[d]).shape for d in picked]))
    rest = [d for d in range(s.rank) if d not in picked]
    x = _permute(em, x, picked + rest)
    flat = reshape(em, x, [math.prod(s.shape[d] for d in picked)] + [s.shape[d] for d in rest])
    linear = None
    for d in picked:
        i = coerce(em, indices[d], "i64", idx_shape)
        i = _wrap_negative(em, i, s.shape[d])
        stride = math.prod(s.shape[e] for e in picked if e > d)
        if stride != 1:
            i = b.mul(i, full_as(em, i, float(stride)))
        linear = i if linear is None else b.add(linear, i)
    linear = reshape(em, linear, (math.prod(idx_shape),))
    return _Linearised(flat, linear, idx_shape, picked, rest)


@handles(aten.index.Tensor)
def _index(em: Emit, x: ir.Value, indices: Sequence[ir.Value | None]) -> ir.Value:
    """Advanced indexing by integer tensors: linearise the indexed dims, index_select once."""
    s = spec(x)
    lin = _linearise(em, x, indices)
    r = em.b.index_select(lin.flat, lin.linear, dim=0)
    r = reshape(em, r, lin.idx_shape + [s.shape[d] for d in lin.rest])
    perm = lin.result_perm()
    return r if perm is None else _permute(em, r, perm)


@handles(aten.index_put.default)
def _index_put(em: Emit, x: ir.Value, indices: Sequence[ir.Value | None], values: ir.Value,
               accumulate: bool = False) -> ir.Value:
    """x with `values` added at x[indices] (index_add and `index_put_(..., accumulate=True)`)
    as one scatter_add over the linearised indexed dims, or stored there (`x[i] = v`) as
    one scatter: of repeated indices the last one stays, as eager's CPU kernel does."""
    b = em.b
    s = spec(x)
    masked = _broadcast_mask_put(em, x, indices, values, accumulate)
    if masked is not None:
        return masked
    lin = _linearise(em, x, indices)
    n, rest_shape = spec(lin.linear).shape[0], [s.shape[d] for d in lin.rest]
    perm = lin.result_perm()
    got = lin.idx_shape + rest_shape  # x[indices]'s shape, before PyTorch's permutation
    shown = got if perm is None else [got[p] for p in perm]
    v = coerce(em, values, s.dtype, shown)
    if perm is not None:
        v = _unpermute(em, v, perm)
    v = reshape(em, v, [n] + rest_shape)
    where = b.broadcast_in_dim(lin.linear, shape=[n] + rest_shape, dims=[0])
    out = b.create("scatter_add" if accumulate else "scatter", [lin.flat, where, v], dim=0)
    out = reshape(em, out, [s.shape[d] for d in lin.picked] + rest_shape)
    return _unpermute(em, out, lin.picked + lin.rest)


def _broadcast_mask_put(em: Emit, x: ir.Value, indices: Sequence[ir.Value | None],
                        values: ir.Value, accumulate: bool) -> ir.Value | None:
    """`x[mask] = v` (or `+=`) with a boolean mask over x's leading dims and a value that
    is the same for every selected element (no per-element leading dim): a select, with
    nothing data-dependent (Longformer marks its global tokens so). None otherwise."""
    s = spec(x)
    if len(indices) != 1 or indices[0] is None or spec(indices[0]).dtype not in ("i1", "i8"):
        return None
    mask = indices[0]
    k = spec(mask).rank
    if spec(mask).shape != s.shape[:k]:
        return None
    vs = spec(values)
    trailing = list(s.shape[k:])
    if vs.rank > len(trailing) + 1 or (vs.rank == len(trailing) + 1 and vs.shape[0] != 1):
        return None
    v = coerce(em, reshape(em, values, vs.shape[1:]) if vs.rank > len(trailing) else values,
               s.dtype, s.shape)
    where = em.b.broadcast_in_dim(to_bool(em, mask, spec(mask).shape), shape=s.shape,
                                  dims=list(range(k)))
    add = _BOOL_ARITH["add"] if s.dtype == "i1" else "add"
    return em.b.select(where, em.b.create(add, [x, v]) if accumulate else v, x)


# ------------------------------------------------------------------ sources
@handles(aten.full.default, aten.full_like.default, aten.zeros_like.default,
         aten.ones_like.default, aten.empty_like.default, aten.empty.memory_format,
         aten.empty_permuted.default, aten.empty_strided.default, aten.scalar_tensor.default,
         aten.zeros.default, aten.ones.default, aten.new_full.default, aten.new_zeros.default,
         aten.new_ones.default, aten.new_empty.default, aten.new_empty_strided.default,
         aten._efficientzerotensor.default)
def _full(em: Emit, *args: Any, **kwargs: Any) -> ir.Value:
    target = em.node.target
    value = 0.0
    if target in (aten.full.default, aten.full_like.default):
        value = args[1]
    elif target is aten.new_full.default:
        value = args[2]
    elif target is aten.scalar_tensor.default:
        value = args[0]
    elif target in (aten.ones_like.default, aten.ones.default, aten.new_ones.default):
        value = 1.0
    if isinstance(value, ir.Value):
        raise Unsupported("a tensor fill value")
    out = em.out0
    return em.b.full(shape=out.shape, dtype=out.dtype, value=float(value))


@handles(aten.arange.start_step, aten.arange.start, aten.arange.default)
def _arange(em: Emit, *args: Any, **kwargs: Any) -> ir.Value:
    nums = [a for a in args if isinstance(a, (int, float))]
    start, step = 0, 1
    if em.node.target is aten.arange.start_step:
        start, _, step = (nums + [1])[:3]
    elif em.node.target is aten.arange.start:
        start = nums[0]
    out = em.out0
    if out.numel == 0:
        return em.b.full(shape=out.shape, dtype=out.dtype, value=0.0)
    ct = "f64" if is_float(out.dtype) else "i64"
    i = em.b.iota(shape=out.shape, dtype=ct, dim=0)
    r = em.b.add(em.b.mul(i, full_as(em, i, float(step))), full_as(em, i, float(start)))
    return cast(em, r, out.dtype)


# ------------------------------------------------------------------ random (seeded by an input)
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
    numbers = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
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


# ------------------------------------------------------------------ contractions
@handles(aten.mm.default, aten.bmm.default)
def _matmul(em: Emit, a: ir.Value, b: ir.Value) -> ir.Value:
    """A batch of products with one matrix broadcast over the batch (PyTorch's matmul of
    a non-contiguous 3-d input by a weight expands the weight) is one product of the
    stacked rows: the broadcast was materialized, [128, 256, 768] copies of an
    attention's in-projection under autocast, and its gradient a batch of products
    summed."""
    shared = _shared_matrix(b)
    if shared is not None:
        rows = reshape(em, a, (spec(a).numel // spec(a).shape[-1], spec(a).shape[-1]))
        return reshape(em, em.b.matmul(rows, shared), em.out0.shape)
    return em.b.matmul(a, b)


def _shared_matrix(b: ir.Value) -> ir.Value | None:
    """The 2-d matrix `b` broadcasts over its leading (batch) dims, else None."""
    op = None if isinstance(b.owner, ir.Block) else b.owner.operation
    if op is None or op.name != "dg.broadcast_in_dim" or spec(b).rank != 3:
        return None
    x = op.operands[0]
    return x if spec(x).rank == 2 and list(attrs_of(op)["dims"]) == [1, 2] else None


@handles(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _flash_attention(em: Emit, q: ir.Value, k: ir.Value, v: ir.Value, dropout_p: float = 0.0,
                     is_causal: bool = False, *, attn_mask: ir.Value | None = None,
                     scale: float | None = None) -> tuple[ir.Value, ir.Value]:
    """dg.attention (PyTorch's flash kernel on the CPU); the capture keeps this op only
    where that is exact and pays (decompositions.py)."""
    if dropout_p:
        raise Unsupported("attention with dropout (the capture decomposes it)")
    qs = spec(q)
    if attn_mask is None:
        mask = em.b.full(shape=(1, 1, 1, 1), dtype=qs.dtype, value=0.0)
    else:
        mask = attn_mask
        if spec(mask).dtype == "i1":  # True: attend
            shape = spec(mask).shape
            mask = em.b.select(mask, em.b.full(shape=shape, dtype=qs.dtype, value=0.0),
                               em.b.full(shape=shape, dtype=qs.dtype, value=float("-inf")))
        mask = reshape(em, mask, (1,) * (4 - spec(mask).rank) + spec(mask).shape)
    scale = 1.0 / math.sqrt(qs.shape[-1]) if scale is None else float(scale)
    k, v = (_repeat_heads(em, x, qs.shape[1]) for x in (k, v))
    return tuple(em.b.attention(q, k, v, mask, scale=scale, causal=int(bool(is_causal))))


def _repeat_heads(em: Emit, x: ir.Value, heads: int) -> ir.Value:
    """Grouped-query attention's keys or values [B, Hk, S, E], each head repeated for the
    heads / Hk query heads that share it."""
    b, hk, s, e = spec(x).shape
    if hk == heads:
        return x
    group = em.b.broadcast_in_dim(x, shape=(b, hk, heads // hk, s, e), dims=[0, 1, 3, 4])
    return reshape(em, group, (b, heads, s, e))


@handles(aten.convolution.default)
def _convolution(em: Emit, x: ir.Value, w: ir.Value, bias: ir.Value | None, stride: Sequence[int],
                 padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                 output_padding: Sequence[int], groups: int) -> ir.Value:
    """A transposed convolution is the input gradient of the forward convolution with the
    same weight whose input has the transposed one's output shape (output_padding only
    sets that shape): dg.conv2d_input_grad, with its rules and library call."""
    xs = spec(x)
    if xs.rank == 5:
        stride, padding, dilation = ([*v] * 3 if len(v) == 1 else list(v)
                                     for v in (stride, padding, dilation))
        conv3d = _transposed_conv3d if transposed else _conv3d
        y = conv3d(em, x, w, stride, padding, dilation, groups)
    elif xs.rank in (3, 4):
        out_shape = em.out0.shape
        if xs.rank == 3:
            out_shape = (out_shape[0], out_shape[1], 1, out_shape[2])
        (x, w), attrs = _as_conv2d(em, (x, w), stride, padding, dilation, groups)
        if transposed:
            y = _transposed_conv(em, x, w, out_shape, attrs)
        else:
            y = em.b.conv2d(x, w, **attrs)
    else:
        raise Unsupported(f"{xs.rank - 2}-d convolution (fusegrad supports 1-d, 2-d and 3-d)")
    y = reshape(em, y, em.out0.shape)
    if bias is not None:
        y = em.b.add(y, em.b.broadcast_in_dim(bias, shape=em.out0.shape, dims=[1]))
    return y


@handles(aten.convolution_backward.default)
def _convolution_backward(em: Emit, g: ir.Value, x: ir.Value, w: ir.Value, bias_sizes: Any,
                          stride: Sequence[int], padding: Sequence[int],
                          dilation: Sequence[int], transposed: bool,
                          output_padding: Sequence[int], groups: int,
                          output_mask: Sequence[bool]) -> list[ir.Value | None]:
    """What torch.func transforms trace for a convolution's derivative (per-sample
    gradients: vmap of grad): the input and weight gradients of a 1-d or 2-d convolution
    as dg's ops for them, the bias gradient as a sum."""
    rank = spec(x).rank
    if transposed or rank not in (3, 4):
        raise Unsupported(f"the derivative of a {'transposed ' if transposed else ''}"
                          f"{rank - 2}-d convolution (fusegrad maps those of 1-d and 2-d ones)")
    shapes = [spec(v).shape for v in (g, x, w)]
    (g, x, w), attrs = _as_conv2d(em, (g, x, w), stride, padding, dilation, groups)
    results: list[ir.Value | None] = [None, None, None]
    if output_mask[0]:
        dx = em.b.conv2d_input_grad(g, w, input_shape=list(spec(x).shape), **attrs)
        results[0] = reshape(em, dx, shapes[1])
    if output_mask[1]:
        dw = em.b.conv2d_weight_grad(x, g, weight_shape=list(spec(w).shape), **attrs)
        results[1] = reshape(em, dw, shapes[2])
    if output_mask[2]:
        results[2] = em.b.reduce_sum(g, dims=[0, 2, 3])
    return results


def _as_conv2d(em: Emit, values: Sequence[ir.Value], stride: Sequence[int],
               padding: Sequence[int], dilation: Sequence[int],
               groups: int) -> tuple[list[ir.Value], dict[str, Any]]:
    """A 1-d or 2-d convolution's tensors (input, weight, output gradient: all NC...) and
    dg.conv2d's attributes for it: a 1-d convolution is a 2-d one over height-1 images."""
    if spec(values[0]).rank == 3:
        values = [reshape(em, v, (*spec(v).shape[:2], 1, spec(v).shape[2])) for v in values]
        stride, padding, dilation = [1, *stride], [0, *padding], [1, *dilation]
    pairs = [list(v) * 2 if len(v) == 1 else list(v) for v in (stride, padding, dilation)]
    return list(values), dict(stride=pairs[0], padding=pairs[1], dilation=pairs[2],
                              groups=groups)


def _conv3d(em: Emit, x: ir.Value, w: ir.Value, stride: Sequence[int], padding: Sequence[int],
            dilation: Sequence[int], groups: int) -> ir.Value:
    """A 3-d convolution as one 2-d convolution over N*Do images of KD*C channels: each
    output depth's KD input depth slices side by side as channels (an im2col along depth
    only), so the weight is a transpose and a reshape, and dg.conv2d's rules and library
    call serve. Ungrouped, the taps are concatenated along the channel dim (tap-major),
    which dg-channels-last keeps channels-last from one convolution to the next; grouped,
    each channel's taps are adjacent so a group's channels stay together. Costs KD
    copies of the input (none beyond a transpose when KD = 1)."""
    n, c = spec(x).shape[:2]
    o, cg, kd, kh, kw = spec(w).shape
    do, ho, wo = em.out0.shape[2:]
    (sd, *st), (pd, *pad), (dd, *dil) = stride, padding, dilation
    if pd:
        x = em.b.pad(x, low=[0, 0, pd, 0, 0], high=[0, 0, pd, 0, 0], interior=[0] * 5, value=0.0)
    x = _permute(em, x, [0, 2, 1, 3, 4])  # [n, d, c, h, w]
    h, wd = spec(x).shape[3:]
    taps = [slice_dim(em, x, 1, t * dd, t * dd + (do - 1) * sd + 1, sd) for t in range(kd)]
    if groups == 1:
        cols = em.b.concat(taps, dim=2)
        w = _permute(em, w, [0, 2, 1, 3, 4])
    else:
        cols = em.b.concat([reshape(em, t, (n, do, c, 1, h, wd)) for t in taps], dim=3)
    cols = reshape(em, cols, (n * do, c * kd, h, wd))
    y = em.b.conv2d(cols, reshape(em, w, (o, cg * kd, kh, kw)), stride=st, padding=pad,
                    dilation=dil, groups=groups)
    return _permute(em, reshape(em, y, (n, do, o, ho, wo)), [0, 2, 1, 3, 4])


def _transposed_conv3d(em: Emit, x: ir.Value, w: ir.Value, stride: Sequence[int],
                       padding: Sequence[int], dilation: Sequence[int], groups: int) -> ir.Value:
    """The transpose of _conv3d's scheme: one 2-d transposed convolution of the N*D input
    depth slices into KD*C_out channels (each depth tap's contribution side by side), then
    each tap's slices placed at their output depths (zero pads strided by the stride,
    merged where they overlap as cotangent sums are) and summed, and the padding cropped
    (output_padding beyond the last tap adds zeros)."""
    b = em.b
    n, cin, d, h, wd = spec(x).shape
    _, cg, kd, kh, kw = spec(w).shape
    cout, do, ho, wo = em.out0.shape[1:]
    (sd, *st), (pd, *pad), (dd, *dil) = stride, padding, dilation
    slices = reshape(em, _permute(em, x, [0, 2, 1, 3, 4]), (n * d, cin, h, wd))
    w2 = reshape(em, _permute(em, w, [0, 2, 1, 3, 4]), (cin, kd * cg, kh, kw))  # tap-major
    z = _transposed_conv(em, slices, w2, (n * d, groups * kd * cg, ho, wo),
                         dict(stride=st, padding=pad, dilation=dil, groups=groups))
    z = _permute(em, reshape(em, z, (n, d, groups, kd, cg, ho, wo)), [0, 1, 3, 2, 4, 5, 6])
    z = reshape(em, z, (n, d, kd, cout, ho, wo))
    full = (d - 1) * sd + dd * (kd - 1) + 1
    placed = []
    for t in range(kd):
        tap = reshape(em, b.slice(z, start=[0, 0, t, 0, 0, 0], limit=[n, d, t + 1, cout, ho, wo],
                                  stride=[1] * 6), (n, d, cout, ho, wo))
        high = full - (t * dd + (d - 1) * sd + 1)
        placed.append((b.pad(tap, low=[0, t * dd, 0, 0, 0], high=[0, high, 0, 0, 0],
                             interior=[0, sd - 1, 0, 0, 0], value=0.0), b.loc))
    y = sum_cotangents(placed)
    end = min(pd + do, full)
    y = slice_dim(em, y, 1, pd, end)
    if pd + do > end:
        y = b.pad(y, low=[0] * 5, high=[0, pd + do - end, 0, 0, 0], interior=[0] * 5, value=0.0)
    return _permute(em, y, [0, 2, 1, 3, 4])


def _transposed_conv(em: Emit, x: ir.Value, w: ir.Value, out_shape: Sequence[int],
                     attrs: dict[str, Any]) -> ir.Value:
    """The input gradient of the forward convolution whose input has `out_shape`. Where
    output_padding reaches past the stride (it may when dilated), no forward convolution
    of that input has `x`'s shape: then the unpadded transposed convolution, cropped by
    the padding and extended with zeros."""
    h, wd = spec(x).shape[2:]
    kh, kw = spec(w).shape[2:]
    st, pad, dil = attrs["stride"], attrs["padding"], attrs["dilation"]
    fits = all((o + 2 * p - d * (k - 1) - 1) // s + 1 == i for o, p, d, k, s, i in zip(
        out_shape[2:], pad, dil, (kh, kw), st, (h, wd)))
    if fits:
        return em.b.conv2d_input_grad(x, w, input_shape=list(out_shape), **attrs)
    full = [(i - 1) * s + d * (k - 1) + 1 for i, s, d, k in zip((h, wd), st, dil, (kh, kw))]
    y = em.b.conv2d_input_grad(x, w, input_shape=[*out_shape[:2], *full],
                               **{**attrs, "padding": [0, 0]})
    ends = [min(p + o, f) for p, o, f in zip(pad, out_shape[2:], full)]
    y = em.b.slice(y, start=[0, 0, *pad], limit=[*out_shape[:2], *ends], stride=[1] * 4)
    short = [p + o - e for p, o, e in zip(pad, out_shape[2:], ends)]
    if any(short):
        y = em.b.pad(y, low=[0] * 4, high=[0, 0, *short], interior=[0] * 4, value=0.0)
    return y


# ops without a mapping by design, and why (the importer's message)
KEPT_EAGER: dict[Any, str] = {
    # an nn.LSTM layer traces to it; it runs inside the compiled graph, its backward too
    # (torch_compile.trace_or_warn_rnns)
    aten.mkldnn_rnn_layer.default: "PyTorch's LSTM kernel (oneDNN), kept as it is by "
                                   "design; the ops around it compile",
}


# ------------------------------------------------------------------ sampling
@handles(aten.grid_sampler_2d.default)
def _grid_sampler_2d(em: Emit, x: ir.Value, grid: ir.Value, interpolation_mode: int,
                     padding_mode: int, align_corners: bool) -> ir.Value:
    """Bilinear (0) or nearest (1) sampling of `x` [N, C, H, W] at `grid` [N, Ho, Wo, 2]
    as eager computes it: coordinates unnormalized, then clipped (border, 1) or reflected
    (reflection, 2); each of the (up to four) neighbours a gather over the flattened
    image, weighted, and zero where it falls outside (zeros, 0). The gradient of the
    image flows through the gathers, that of the grid through the weights."""
    if interpolation_mode not in (0, 1):
        raise Unsupported("bicubic grid_sample")
    b = em.b
    n, c, h, w = spec(x).shape
    _, ho, wo, _ = spec(grid).shape
    ct = _opmath(spec(x).dtype)
    grid = cast(em, grid, ct)
    points = (n, ho * wo)

    def coordinate(axis: int, size: int) -> ir.Value:
        g = reshape(em, slice_dim(em, grid, 3, axis, axis + 1), points)
        one = full_as(em, g, 1.0)
        if align_corners:
            v = b.mul(b.div(b.add(g, one), full_as(em, g, 2.0)), full_as(em, g, size - 1.0))
        else:
            v = b.div(b.sub(b.mul(b.add(g, one), full_as(em, g, float(size))), one),
                      full_as(em, g, 2.0))
        if padding_mode == 2:
            v = _reflect(em, v, *((0.0, 2.0 * (size - 1)) if align_corners
                                  else (-1.0, 2.0 * size - 1)))
        if padding_mode:  # eager clips after reflecting too; no gradient at the bounds
            v = _clip(em, v, full_as(em, v, 0.0), full_as(em, v, size - 1.0), at_bounds=False)
        return v
    ix, iy = coordinate(0, w), coordinate(1, h)
    flat = reshape(em, cast(em, x, ct), (n, c, h * w))

    def tap(cx: ir.Value, cy: ir.Value, weight: ir.Value | None) -> ir.Value:
        """x at integer-valued coordinates (cx, cy), times weight, 0 outside the image."""
        inside = b.create("and", (
            b.create("and", (b.compare(cx, full_as(em, cx, 0.0), direction="ge"),
                             b.compare(cx, full_as(em, cx, w - 1.0), direction="le"))),
            b.create("and", (b.compare(cy, full_as(em, cy, 0.0), direction="ge"),
                             b.compare(cy, full_as(em, cy, h - 1.0), direction="le")))))
        where = b.add(b.mul(cy, full_as(em, cy, float(w))), cx)
        where = b.select(inside, where, full_as(em, where, 0.0))
        index = b.broadcast_in_dim(b.convert(where, dtype="i64"), shape=(n, c, ho * wo),
                                   dims=[0, 2])
        mask = cast(em, inside, ct)
        weight = mask if weight is None else b.mul(weight, mask)
        return b.mul(b.gather(flat, index, dim=2),
                     b.broadcast_in_dim(weight, shape=(n, c, ho * wo), dims=[0, 2]))
    if interpolation_mode == 1:  # nearest: round half to even, as nearbyint
        out = tap(b.round(ix), b.round(iy), None)
    else:
        x0, y0 = b.floor(ix), b.floor(iy)
        one = full_as(em, ix, 1.0)
        x1, y1 = b.add(x0, one), b.add(y0, one)
        east, south = b.sub(ix, x0), b.sub(iy, y0)  # weights of x1 and y1
        west, north = b.sub(x1, ix), b.sub(y1, iy)
        out = None
        for cx, wx in ((x0, west), (x1, east)):
            for cy, wy in ((y0, north), (y1, south)):
                term = tap(cx, cy, b.mul(wx, wy))
                out = term if out is None else b.add(out, term)
    return cast(em, reshape(em, out, (n, c, ho, wo)), em.out0.dtype)


def _reflect(em: Emit, v: ir.Value, twice_low: float, twice_high: float) -> ir.Value:
    """Eager's reflect_coordinates: v folded into [low, high] by reflections."""
    b = em.b
    if twice_low == twice_high:
        return full_as(em, v, 0.0)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    d = b.abs(b.sub(v, full_as(em, v, low)))
    flips = b.floor(b.div(d, full_as(em, v, span)))
    extra = b.sub(d, b.mul(flips, full_as(em, v, span)))
    even = b.compare(b.sub(flips, b.mul(b.floor(b.div(flips, full_as(em, v, 2.0))),
                                        full_as(em, v, 2.0))),
                     full_as(em, v, 0.0), direction="eq")
    return b.select(even, b.add(extra, full_as(em, v, low)),
                    b.add(b.sub(full_as(em, v, span), extra), full_as(em, v, low)))


# ------------------------------------------------------------------ pooling
def _batched(em: Emit, x: ir.Value, spatial: int) -> ir.Value:
    """`x` with its batch dim (unbatched inputs have none)."""
    s = spec(x)
    if s.rank == spatial + 1:
        return reshape(em, x, (1, *s.shape))
    if s.rank != spatial + 2:
        raise Unsupported(f"{spatial}-d pooling over a rank-{s.rank} input")
    return x


def _pool_geometry(kernel, stride, padding, dilation,
                   spatial: int) -> list[tuple[int, int, int, int]]:
    """(kernel, stride, padding, dilation) per spatial dim."""
    def per_dim(v, default):
        v = list(v) if v else list(default)
        return v * spatial if len(v) == 1 else v
    k = per_dim(kernel, None)
    return list(zip(k, per_dim(stride, k), per_dim(padding, [0]), per_dim(dilation, [1])))


def _windows(em: Emit, x: ir.Value, geo, out_sizes: Sequence[int], pad_value: float):
    """Per kernel offset (one per spatial dim), the strided slice of the padded input it
    contributes to every window."""
    s = spec(x)
    lows = [p for _, _, p, _ in geo]
    highs = [max((o - 1) * st + (k - 1) * d + 1 - size - p, 0)
             for (k, st, p, d), o, size in zip(geo, out_sizes, s.shape[2:])]
    if any(lows) or any(highs):
        x = em.b.pad(x, low=[0, 0, *lows], high=[0, 0, *highs], interior=[0] * s.rank,
                     value=pad_value)
    strides = [st for _, st, _, _ in geo]
    for offset in itertools.product(*(range(k) for k, _, _, _ in geo)):
        start = [t * d for t, (_, _, _, d) in zip(offset, geo)]
        limit = [a + (o - 1) * st + 1 for a, o, st in zip(start, out_sizes, strides)]
        yield offset, em.b.slice(x, start=[0, 0, *start], limit=[*s.shape[:2], *limit],
                                 stride=[1, 1, *strides])


def _outer(vectors: Sequence[torch.Tensor], combine: Callable) -> torch.Tensor:
    """`combine` of 1-D tensors, each along a dim of its own (an outer sum or product)."""
    out = None
    for k, v in enumerate(vectors):
        v = v.reshape([-1 if j == k else 1 for j in range(len(vectors))])
        out = v if out is None else combine(out, v)
    return out


def _flat_strides(sizes: Sequence[int]) -> list[int]:
    return [math.prod(sizes[k + 1:]) for k in range(len(sizes))]


@handles(aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default)
def _max_pool(em: Emit, x: ir.Value, kernel_size: Sequence[int], stride: Sequence[int] = (),
              padding: Sequence[int] = (0,), dilation: Sequence[int] = (1,),
              ceil_mode: bool = False) -> list[Any]:
    spatial = 3 if em.node.target is aten.max_pool3d_with_indices.default else 2
    xb = _batched(em, x, spatial)
    dtype = spec(x).dtype
    if not is_float(dtype):
        raise Unsupported(f"max_pool{spatial}d of an integer tensor")
    geo = _pool_geometry(kernel_size, stride, padding, dilation, spatial)
    sizes = spec(xb).shape[2:]
    outs = em.out[0].shape[-spatial:]
    out_b = (*spec(xb).shape[:2], *outs)
    flat = _flat_strides(sizes)
    b = em.b
    want_index = em.result_used(1)
    best, index = None, None
    if want_index:
        origin = _outer([(torch.arange(o) * st - p) * f
                         for o, (_, st, p, _), f in zip(outs, geo, flat)], torch.add)
        best = b.full(shape=out_b, dtype=dtype, value=-math.inf)
        index = b.broadcast_to(b.constant(_first_valid(geo, sizes, outs)), out_b)
        origin_v = b.broadcast_to(b.constant(origin.to(torch.int64)), out_b)
    # eager's rule, also when the indices are not wanted: a window's value and gradient
    # come from its first maximum (or its last NaN), so ties never share the gradient
    for offset, v in _windows(em, xb, geo, outs, -math.inf):
        if best is None:
            best = v
            continue
        take = b.create("or", [b.compare(v, best, direction="gt"), b.compare(v, v, direction="ne")])
        best = b.select(take, v, best)
        if want_index:
            step = sum(t * d * f for t, (_, _, _, d), f in zip(offset, geo, flat))
            index = b.select(take, b.add(origin_v, full_as(em, origin_v, float(step))), index)
    results = [reshape(em, best, em.out[0].shape)]
    results.append(reshape(em, index, em.out[1].shape) if want_index
                   else Unavailable(f"max_pool{spatial}d indices"))
    return results


def _first_valid(geo, sizes: Sequence[int], outs: Sequence[int]) -> torch.Tensor:
    """Per output position, the flat input index of the first in-bounds window element."""
    def first(o, k, s, p, d, size):
        for t in range(k):
            pos = o * s - p + t * d
            if 0 <= pos < size:
                return pos
        return 0
    firsts = [torch.tensor([first(a, k, st, p, d, size) for a in range(o)]) * f
              for (k, st, p, d), size, o, f in zip(geo, sizes, outs, _flat_strides(sizes))]
    return _outer(firsts, torch.add).to(torch.int64)


@handles(aten.adaptive_max_pool2d.default)
def _adaptive_max_pool2d(em: Emit, x: ir.Value, output_size: Sequence[int]) -> list[Any]:
    """Eager's windows [floor(i n / o), ceil((i + 1) n / o)) along H and W, of unequal
    lengths: per offset into the longest window, the rows and columns each output reads
    (a window shorter than that repeats its last element, which never beats itself),
    gathered by constant tables; then max_pool's rule over the offsets (the first maximum,
    or the last NaN)."""
    xb = _batched(em, x, 2)
    s = spec(xb)
    if not is_float(s.dtype):
        raise Unsupported("adaptive_max_pool2d of an integer tensor")
    n, c, h, w = s.shape
    outs = em.out[0].shape[-2:]
    if 0 in outs or 0 in (h, w):
        raise Unsupported("adaptive_max_pool2d of or to an empty size")
    b = em.b

    def positions(size: int, out: int) -> torch.Tensor:  # [out, longest window]
        starts = [(i * size) // out for i in range(out)]
        ends = [-(-((i + 1) * size) // out) for i in range(out)]
        longest = max(e - a for a, e in zip(starts, ends))
        return torch.tensor([[min(a + t, e - 1) for t in range(longest)]
                             for a, e in zip(starts, ends)], dtype=torch.int64)
    rows, cols = positions(h, outs[0]), positions(w, outs[1])
    kh, kw = rows.shape[1], cols.shape[1]
    picked = b.index_select(xb, b.constant(rows.t().reshape(-1)), dim=2)  # [n, c, kh*oh, w]
    picked = b.index_select(picked, b.constant(cols.t().reshape(-1)), dim=3)
    picked = reshape(em, picked, (n, c, kh, outs[0], kw, outs[1]))
    out_b = (n, c, *outs)
    want_index = em.result_used(1)
    best, index = None, None
    for t in range(kh):
        for u in range(kw):
            v = reshape(em, b.slice(picked, start=[0, 0, t, 0, u, 0],
                                    limit=[n, c, t + 1, outs[0], u + 1, outs[1]],
                                    stride=[1] * 6), out_b)
            here = None
            if want_index:
                flat = rows[:, t][:, None] * w + cols[:, u][None, :]
                here = b.broadcast_to(b.constant(flat), out_b)
            if best is None:
                best, index = v, here
                continue
            take = b.create("or", [b.compare(v, best, direction="gt"),
                                   b.compare(v, v, direction="ne")])  # the last NaN wins
            best = b.select(take, v, best)
            if want_index:
                index = b.select(take, here, index)
    results = [reshape(em, best, em.out[0].shape)]
    results.append(reshape(em, index, em.out[1].shape) if want_index
                   else Unavailable("adaptive_max_pool2d indices"))
    return results


@handles(aten.avg_pool2d.default, aten.avg_pool3d.default)
def _avg_pool(em: Emit, x: ir.Value, kernel_size: Sequence[int], stride: Sequence[int] = (),
              padding: Sequence[int] = (0,), ceil_mode: bool = False,
              count_include_pad: bool = True, divisor_override: int | None = None) -> ir.Value:
    spatial = 3 if em.node.target is aten.avg_pool3d.default else 2
    if not is_float(spec(x).dtype):
        raise Unsupported(f"avg_pool{spatial}d of an integer tensor")
    dtype = _opmath(spec(x).dtype)  # 16-bit floats sum in f32, as eager's
    xb = _batched(em, cast(em, x, dtype), spatial)
    geo = _pool_geometry(kernel_size, stride, padding, [1], spatial)
    outs = em.out0.shape[-spatial:]
    total = None
    for _, v in _windows(em, xb, geo, outs, 0.0):
        total = v if total is None else em.b.add(total, v)
    if divisor_override:
        divisor = full_as(em, total, float(divisor_override))
    else:
        counts = _avg_divisor(geo, spec(xb).shape[2:], outs, count_include_pad)
        divisor = em.b.broadcast_to(em.b.constant(counts.to(torch_dtype(dtype))),
                                    spec(total).shape)
    return cast(em, reshape(em, em.b.div(total, divisor), em.out0.shape), em.out0.dtype)


def _avg_divisor(geo, sizes: Sequence[int], outs: Sequence[int],
                 include_pad: bool) -> torch.Tensor:
    """PyTorch's avg_pool divisor per output position (window clipped to input or padding)."""
    def lengths(o_n, k, s, p, size):
        out = []
        for o in range(o_n):
            start = o * s - p
            end = min(start + k, size + p)
            out.append(end - start if include_pad else min(end, size) - max(start, 0))
        return torch.tensor(out, dtype=torch.float64)
    return _outer([lengths(o, k, st, p, size) for o, (k, st, p, _), size
                   in zip(outs, geo, sizes)], torch.mul)


@handles(aten._adaptive_avg_pool2d.default, aten._adaptive_avg_pool3d.default)
def _adaptive_avg_pool(em: Emit, x: ir.Value, output_size: Sequence[int]) -> ir.Value:
    """Windows that divide the input: a reshape and one sum. Otherwise eager's windows
    [floor(i n / o), ceil((i + 1) n / o)) along each dim, overlapping and of unequal
    lengths: a matmul with the constant averaging matrix of that dim."""
    spatial = len(output_size)
    name = f"adaptive_avg_pool{spatial}d"
    if not is_float(spec(x).dtype):
        raise Unsupported(f"{name} of an integer tensor")
    if _opmath(spec(x).dtype) != spec(x).dtype:  # 16-bit floats in f32, as eager's
        return cast(em, _adaptive_avg_pool(em, cast(em, x, "f32"), output_size),
                    em.out0.dtype)
    s = spec(x)
    sizes = s.shape[-spatial:]
    outs = em.out0.shape[-spatial:]
    if 0 in outs:
        raise Unsupported(f"{name} to an empty {'x'.join(map(str, outs))} output")
    lead = list(s.shape[:-spatial])
    if any(n % o for n, o in zip(sizes, outs)):
        for k, o in enumerate(outs):
            x = _window_means(em, x, len(lead) + k, o)
        return x
    windows = [n // o for n, o in zip(sizes, outs)]
    y = reshape(em, x, lead + [d for o, k in zip(outs, windows) for d in (o, k)])
    y = em.b.reduce_sum(y, dims=[len(lead) + 2 * k + 1 for k in range(spatial)])
    return em.b.div(y, full_as(em, y, float(math.prod(windows))))


def _window_means(em: Emit, x: ir.Value, axis: int, out: int) -> ir.Value:
    """Means of adaptive pooling's `out` windows along `axis`, as x @ A with A[j, i] =
    1 / len(window i) for j in window i."""
    s = spec(x)
    n = s.shape[axis]
    weights = torch.zeros(n, out, dtype=torch_dtype(s.dtype))
    for i in range(out):
        lo, hi = (i * n) // out, -(-((i + 1) * n) // out)
        weights[lo:hi, i] = 1.0 / (hi - lo)
    perm = [k for k in range(s.rank) if k != axis] + [axis]
    rows = _permute(em, x, perm)
    moved = spec(rows).shape
    y = em.b.matmul(reshape(em, rows, (s.numel // n, n)), em.b.constant(weights))
    y = reshape(em, y, (*moved[:-1], out))
    return _unpermute(em, y, perm)

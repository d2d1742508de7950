"""Pointwise ops: unary and binary arithmetic, comparisons, logical and bitwise ops,
where and clamp, activations built from selects, casts and copies."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from mlir import ir

from ...dialects.builder import spec
from ...dialects.types import is_float, torch_dtype
from .emit import (
    _BOOL_ARITH, Emit, Unsupported, _clip, _opmath, aten, cast, coerce, full_as, handles,
    promoted, to_bool,
)


# ------------------------------------------------------------------ unary
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


@handles(torch.ops.fusegrad.stop_gradient.default)
def _stop_gradient(em: Emit, x: ir.Value) -> ir.Value:
    return em.b.stop_gradient(x) if is_float(spec(x).dtype) else x


# ------------------------------------------------------------------ binary
_ARITH = {
    aten.add.Tensor: "add", aten.add.Scalar: "add", aten.sub.Tensor: "sub",
    aten.sub.Scalar: "sub", aten.mul.Tensor: "mul", aten.mul.Scalar: "mul",
    aten.div.Tensor: "div", aten.div.Scalar: "div", aten.pow.Tensor_Tensor: "pow",
    aten.pow.Scalar: "pow", aten.maximum.default: "max",
    aten.minimum.default: "min", aten.atan2.default: "atan2",
}


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


def _on_cpu(em: Emit) -> bool:
    val = em.node.meta.get("val")
    return getattr(getattr(val, "device", None), "type", "cpu") == "cpu"


@handles(aten.pow.Tensor_Scalar)
def _pow_tensor_scalar(em: Emit, x: Any, exponent: Any) -> ir.Value:
    """x ** c as eager's kernel computes it (`_pow_scalar`); integer results, and bool or
    complex exponents, as dg.pow (std::pow's, like tensor ** tensor)."""
    out = em.out0
    ct = _opmath(out.dtype)
    if not is_float(ct) or isinstance(exponent, (bool, complex)):
        return _arith("pow")(em, x, exponent)
    x = coerce(em, x, ct, out.shape)
    return cast(em, _pow_scalar(em, x, float(exponent), out.dtype, _on_cpu(em)), out.dtype)


def _pow_scalar(em: Emit, x: ir.Value, c: float, dtype: str, cpu: bool) -> ir.Value:
    """Eager's pow(Tensor, Scalar) on float `x` (the result's opmath), with its gradient
    c * x ** (c - 1) (pow_backward, where that power takes these special cases too).

    The kernel (PowKernel.cpp, PowKernel.cu) special-cases the exponent: 0.5 is sqrt, -0.5
    rsqrt and -1 reciprocal, and, the exponent cast to the dtype, 2 is x*x, 3 x*x*x and -2
    1/(x*x), in the dtype (a 16-bit product is rounded before the next); any other is
    std::pow with the exponent in the dtype. sqrt and rsqrt differ from pow at -0 (-0 and
    -inf, not +0 and +inf) and -inf (NaN, not +inf and +0). The CPU's f16 kernel takes no
    special case. Where the form's own derivative is not eager's, a select takes another
    form there (`_at_edges`)."""
    b = em.b
    ct = spec(x).dtype
    if c == 0.0 or c == 1.0:  # a fill and a copy in eager, as dg.pow's rules fold them
        return b.pow(x, full_as(em, x, c))
    special = not (cpu and dtype == "f16")
    if special and c == 0.5:  # d/dx = 0.5 / sqrt(x), which is 0.5 * rsqrt(x) exactly
        return b.sqrt(x)
    if special and c == -0.5:
        # at -0 and -inf rsqrt's derivative -0.5 y^3 (+inf, NaN) is not eager's
        # -0.5 pow(x, -1.5) (-inf, -0); -rsqrt(-x) has it, and rsqrt's value at -0 (NaN
        # is added at -inf)
        def mirrored(v: ir.Value) -> ir.Value:
            nan_at_inf = b.select(b.compare(v, full_as(em, v, -math.inf), direction="eq"),
                                  full_as(em, v, math.nan), full_as(em, v, -0.0))
            return b.add(b.neg(b.rsqrt(b.neg(v))), nan_at_inf)
        edge = b.create("or", (_negative_zero(em, x),
                               b.compare(x, full_as(em, x, -math.inf), direction="eq")))
        return _at_edges(em, x, edge, mirrored, b.rsqrt)
    if special and c == -1.0:
        return b.reciprocal(x)
    exponent = c  # what pow_backward's power checks (c - 1 == 0.5)
    if dtype in ("f16", "bf16") or (not cpu and dtype == "f32"):
        c = float(torch.tensor(c, dtype=torch_dtype(dtype)))  # exp_scalar.to<scalar_t>()

    def in_dtype(v: ir.Value) -> ir.Value:
        return cast(em, cast(em, v, dtype), ct) if dtype != ct else v

    def square(v: ir.Value) -> ir.Value:
        return in_dtype(b.mul(v, v))
    if special and c == 2.0:
        return square(x)
    if special and c == 3.0:
        return b.mul(square(x), x)
    if special and c == -2.0:
        # 1/(x*x)'s derivative at 0 and inf is 0 * inf (NaN); (1/x)^2 has eager's
        # -2 pow(x, -3) there, and the same value
        infinite = b.compare(b.abs(x), full_as(em, x, math.inf), direction="eq")
        edge = b.create("or", (b.compare(x, full_as(em, x, 0.0), direction="eq"), infinite))
        return _at_edges(em, x, edge, lambda v: square(b.reciprocal(v)),
                         lambda v: b.reciprocal(square(v)))
    if special and exponent == 1.5:
        # at -0 pow's derivative 1.5 pow(x, 0.5) is +0, eager's 1.5 sqrt(x) -0: there
        # pow(-x, 1.5) has it, and the same value. (At -inf eager's is NaN where the
        # value is +inf: no form of dg ops has both, so that one stays pow's, +inf.)
        return _at_edges(em, x, _negative_zero(em, x),
                         lambda v: b.pow(b.neg(v), full_as(em, v, c)),
                         lambda v: b.pow(v, full_as(em, v, c)))
    return b.pow(x, full_as(em, x, c))


def _negative_zero(em: Emit, x: ir.Value) -> ir.Value:
    """x is -0 (1 / x is -inf: not a tiny negative x, which is not 0)."""
    b = em.b
    zero = full_as(em, x, 0.0)
    return b.create("and", (b.compare(x, zero, direction="eq"),
                            b.compare(b.reciprocal(x), zero, direction="lt")))


def _at_edges(em: Emit, x: ir.Value, edge: ir.Value, at_edge: Callable, elsewhere: Callable,
              ) -> ir.Value:
    """at_edge(x) where `edge`, elsewhere(x) elsewhere. Each form reads a stand-in, 1,
    where the other is taken, so neither computes an infinity that the select's zero
    cotangent would turn into NaN; and the stand-in passes x a zero gradient of -0 there
    (the identity of a float sum: x's gradient is the sum of both), so a gradient of -0
    from the taken form keeps its sign."""
    b = em.b

    def stand_in(taken: ir.Value) -> ir.Value:  # -select(taken, -x, -1)
        return b.neg(b.select(taken, b.neg(x), full_as(em, x, -1.0)))
    return b.select(edge, at_edge(stand_in(edge)),
                    elsewhere(stand_in(b.create("not", (edge,)))))


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

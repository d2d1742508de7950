"""Pointwise dg ops: unary, binary, compare, select, convert.

Operands of a pointwise op have identical shapes (broadcasting is explicit in
dg) and, except for `select`'s predicate, identical dtypes.
"""
from __future__ import annotations


from mlir import ir

from .core import (Attr, Kind, ShapeError, define, lookup, lowering, reference_rule, scalar_rule,
                   shape_rule)
from .types import dtype_of, is_float, torch_dtype
from .lazy_torch import torch

# name -> (summary, float only?)
UNARY = {
    "neg": ("negation", False),
    "abs": ("absolute value", False),
    "exp": ("e^x", True),
    "log": ("natural logarithm", True),
    "log1p": ("log(1 + x)", True),
    "expm1": ("e^x - 1", True),
    "sqrt": ("square root", True),
    "rsqrt": ("1 / sqrt(x)", True),
    "tanh": ("hyperbolic tangent", True),
    "sigmoid": ("1 / (1 + e^-x)", True),
    "erf": ("error function", True),
    "sin": ("sine", True),
    "cos": ("cosine", True),
    "atan": ("arc tangent", True),
    "asin": ("arc sine", True),
    "acos": ("arc cosine", True),
    "sinh": ("hyperbolic sine", True),
    "cosh": ("hyperbolic cosine", True),
    "asinh": ("inverse hyperbolic sine", True),
    "acosh": ("inverse hyperbolic cosine", True),
    "atanh": ("inverse hyperbolic tangent", True),
    "erfc": ("1 - erf(x), accurate where erf(x) is near 1", True),
    "exp2": ("2^x", True),
    "reciprocal": ("1 / x", True),
    "sign": ("-1, 0 or 1 (0 for NaN-free zero)", False),
    "floor": ("round toward -inf", True),
    "ceil": ("round toward +inf", True),
    "round": ("round half to even", True),
    "not": ("logical/bitwise not (integers and i1)", False),
    "stop_gradient": ("x, with a zero derivative (gradients do not flow through it)", True),
}

# name -> summary
BINARY = {
    "add": "x + y",
    "sub": "x - y",
    "mul": "x * y",
    "div": "x / y (integers: truncating)",
    "pow": "x ** y",
    "atan2": "the angle of the point (rhs, lhs): atan(lhs / rhs) in the right quadrant",
    "max": "maximum, NaN-propagating",
    "min": "minimum, NaN-propagating",
    "and": "bitwise/logical and (integers and i1)",
    "or": "bitwise/logical or (integers and i1)",
}

COMPARE_DIRECTIONS = ("eq", "ne", "lt", "le", "gt", "ge")

for _name, (_summary, _) in UNARY.items():
    define(_name, ("x",), kind=Kind.ELEMENTWISE, summary=_summary)
for _name, _summary in BINARY.items():
    define(_name, ("lhs", "rhs"), kind=Kind.ELEMENTWISE, summary=_summary)
define("compare", ("lhs", "rhs"), attrs={"direction": Attr.STR}, kind=Kind.ELEMENTWISE,
       summary="elementwise comparison " + "/".join(COMPARE_DIRECTIONS) + " -> i1")
define("select", ("pred", "on_true", "on_false"), kind=Kind.ELEMENTWISE,
       summary="pred ? on_true : on_false")
define("convert", ("x",), kind=Kind.ELEMENTWISE,
       summary="dtype conversion to the result's element type (float->int truncates)")

_INT_OK = {"neg", "abs", "sign", "not"}


@shape_rule(*UNARY)
def _unary_shape(ins, attrs, hint, *, op):
    (x,) = ins
    if op == "not" and is_float(x.dtype):
        raise ShapeError(f"dg.not takes integer or i1 operands, got {x.dtype}")
    if op not in _INT_OK and not is_float(x.dtype):
        raise ShapeError(f"dg.{op} takes floating-point operands, got {x.dtype}")
    if x.dtype == "i1" and op in ("neg", "abs", "sign"):
        raise ShapeError(f"dg.{op} does not take i1 operands")
    return [x]


def _same(ins, what):
    first = ins[0]
    for i, t in enumerate(ins[1:], 1):
        if t.shape != first.shape:
            raise ShapeError(f"{what}: operand #{i} has shape {list(t.shape)} but operand #0 has "
                             f"{list(first.shape)}; broadcast explicitly with dg.broadcast_in_dim")
        if t.dtype != first.dtype:
            raise ShapeError(f"{what}: operand #{i} has dtype {t.dtype} but operand #0 has "
                             f"{first.dtype}; insert dg.convert")


@shape_rule(*BINARY)
def _binary_shape(ins, attrs, hint, *, op):
    _same(ins, f"dg.{op}")
    if op in ("and", "or") and is_float(ins[0].dtype):
        raise ShapeError(f"dg.{op} takes integer or i1 operands, got {ins[0].dtype}")
    if op == "atan2" and not is_float(ins[0].dtype):
        raise ShapeError(f"dg.atan2 takes floating-point operands, got {ins[0].dtype}")
    if op not in ("and", "or", "max", "min") and ins[0].dtype == "i1":
        raise ShapeError(f"dg.{op} does not take i1 operands; convert first")
    return [ins[0]]


@shape_rule("compare")
def _compare_shape(ins, attrs, hint, *, op):
    _same(ins, "dg.compare")
    if attrs.get("direction") not in COMPARE_DIRECTIONS:
        raise ShapeError(f"dg.compare direction must be one of {COMPARE_DIRECTIONS}, "
                         f"got {attrs.get('direction')!r}")
    return [ins[0].with_dtype("i1")]


@shape_rule("select")
def _select_shape(ins, attrs, hint, *, op):
    pred, a, b = ins
    if pred.dtype != "i1":
        raise ShapeError(f"dg.select predicate must be i1, got {pred.dtype}")
    if pred.shape != a.shape:
        raise ShapeError(f"dg.select predicate shape {list(pred.shape)} differs from value shape "
                         f"{list(a.shape)}")
    _same([a, b], "dg.select")
    return [a]


@shape_rule("convert")
def _convert_shape(ins, attrs, hint, *, op):
    if hint is None:
        raise ShapeError("dg.convert needs the result dtype")
    return [ins[0].with_dtype(hint[0].dtype)]


# ---------------------------------------------------------------- reference
def _not(x):
    return torch.logical_not(x) if x.dtype == torch.bool else torch.bitwise_not(x)


def _div(a, b):
    if a.is_floating_point():
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="trunc")


# dg op -> torch function (a name in the torch namespace, resolved when called)
_TORCH_FN = {"not": _not, "div": _div, "max": "maximum", "min": "minimum",
             "and": "bitwise_and", "or": "bitwise_or",
             "stop_gradient": lambda x: x.detach().clone()}


def _torch_fn(op: str):
    fn = _TORCH_FN.get(op, op)
    return getattr(torch, fn) if isinstance(fn, str) else fn


@reference_rule(*UNARY)
def _unary_ref(x, *, op, attrs, out):
    return [_torch_fn(op)(x)]


@reference_rule(*BINARY)
def _binary_ref(a, b, *, op, attrs, out):
    return [_torch_fn(op)(a, b).to(a.dtype)]


@reference_rule("compare")
def _compare_ref(a, b, *, op, attrs, out):
    return [getattr(torch, attrs["direction"])(a, b)]  # eq, ne, lt, le, gt, ge


@reference_rule("select")
def _select_ref(pred, a, b, *, op, attrs, out):
    return [torch.where(pred, a, b)]


@reference_rule("convert")
def _convert_ref(x, *, op, attrs, out):
    return [x.to(torch_dtype(out[0].dtype))]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
# Scalar rules emit arith/math on one element; the single-op lowering and the
# fusion lowering both wrap them in a linalg.generic (conversion/linalg_builders.py).
# Integers are signed; i1 is unsigned (False < True) like torch.bool.
_FLOAT_UNARY = {
    "exp": "ExpOp", "log": "LogOp", "log1p": "Log1pOp", "expm1": "ExpM1Op", "sqrt": "SqrtOp",
    "rsqrt": "RsqrtOp", "tanh": "TanhOp", "erf": "ErfOp", "sin": "SinOp", "cos": "CosOp",
    "floor": "FloorOp", "ceil": "CeilOp", "round": "RoundEvenOp",
    "atan": "AtanOp", "asin": "AsinOp", "acos": "AcosOp", "sinh": "SinhOp", "cosh": "CoshOp",
    "asinh": "AsinhOp", "acosh": "AcoshOp", "atanh": "AtanhOp", "erfc": "ErfcOp",
    "exp2": "Exp2Op",
}


@scalar_rule(*UNARY)
def _unary_scalar(args, *, op, attrs, in_dtypes, out_dtype):
    from mlir.dialects import arith, math
    from ..conversion import linalg_builders as lb
    (x,) = args
    dt = in_dtypes[0]
    if op in _FLOAT_UNARY:
        return getattr(math, _FLOAT_UNARY[op])(x).result
    if op == "stop_gradient":
        return x
    if op == "neg":
        return arith.negf(x) if is_float(dt) else arith.subi(lb.const(dt, 0), x)
    if op == "abs":
        return math.absf(x) if is_float(dt) else math.absi(x)
    if op == "not":
        return arith.xori(x, lb.const(dt, -1))
    if op == "reciprocal":
        return arith.divf(lb.const(dt, 1.0), x)
    if op == "sigmoid":
        one = lb.const(dt, 1.0)
        return arith.divf(one, arith.addf(one, math.exp(arith.negf(x))))
    if op == "sign":  # like torch (2.13): sign(+-0) = 0 and sign(NaN) = 0
        zero, one, minus = lb.const(dt, 0), lb.const(dt, 1), lb.const(dt, -1)
        if is_float(dt):
            gt = arith.cmpf(arith.CmpFPredicate.OGT, x, zero)
            lt = arith.cmpf(arith.CmpFPredicate.OLT, x, zero)
            return arith.select(gt, one, arith.select(lt, minus, zero))
        gt = arith.cmpi(arith.CmpIPredicate.sgt, x, zero)
        lt = arith.cmpi(arith.CmpIPredicate.slt, x, zero)
        return arith.select(gt, one, arith.select(lt, minus, zero))
    raise NotImplementedError(f"dg.{op}: no scalar rule for dtype {dt}")


# op -> (float, signed int, i1) arith/math op names
_BINARY_OPS = {
    "add": ("addf", "addi", None), "sub": ("subf", "subi", None), "mul": ("mulf", "muli", None),
    "div": ("divf", "divsi", None), "pow": ("math.powf", "math.ipowi", None),
    "atan2": ("math.atan2", None, None),
    "max": ("maximumf", "maxsi", "maxui"), "min": ("minimumf", "minsi", "minui"),
    "and": (None, "andi", "andi"), "or": (None, "ori", "ori"),
}


@scalar_rule(*BINARY)
def _binary_scalar(args, *, op, attrs, in_dtypes, out_dtype):
    from mlir.dialects import arith, math
    dt = in_dtypes[0]
    f, i, b = _BINARY_OPS[op]
    name = f if is_float(dt) else (b if dt == "i1" else i)
    if name is None:
        raise NotImplementedError(f"dg.{op}: no scalar rule for dtype {dt}")
    if name.startswith("math."):
        return getattr(math, name[5:])(*args)
    return getattr(arith, name)(*args)


_CMPF = {"eq": "OEQ", "ne": "UNE", "lt": "OLT", "le": "OLE", "gt": "OGT", "ge": "OGE"}
_CMPI = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_CMPU = {"eq": "eq", "ne": "ne", "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}


@scalar_rule("compare")
def _compare_scalar(args, *, op, attrs, in_dtypes, out_dtype):
    from mlir.dialects import arith
    d, dt = attrs["direction"], in_dtypes[0]
    if is_float(dt):  # ordered, except `ne` (true on NaN, like torch)
        return arith.cmpf(getattr(arith.CmpFPredicate, _CMPF[d]), *args)
    table = _CMPU if dt == "i1" else _CMPI
    return arith.cmpi(getattr(arith.CmpIPredicate, table[d]), *args)


@scalar_rule("select")
def _select_scalar(args, *, op, attrs, in_dtypes, out_dtype):
    from mlir.dialects import arith
    return arith.select(*args)


def _bits(dtype):
    return int(dtype[1:]) if dtype != "bf16" else 16


@scalar_rule("convert")
def _convert_scalar(args, *, op, attrs, in_dtypes, out_dtype):
    from mlir.dialects import arith
    from ..conversion import linalg_builders as lb
    (x,) = args
    src, dst = in_dtypes[0], out_dtype
    if src == dst:
        return x
    t = lb.element_type(dst)
    if dst in ("f16", "bf16") and src not in ("f32", "f16", "bf16"):
        # through f32, as c10's 16-bit floats convert (from f64 LLVM calls __truncdfbf2,
        # which the JIT could not find)
        x, src = _convert_scalar(args, op=op, attrs=attrs, in_dtypes=in_dtypes,
                                 out_dtype="f32"), "f32"
    if is_float(src) and is_float(dst):
        if {src, dst} == {"f16", "bf16"}:  # same width, different formats: go through f32
            x = arith.extf(lb.element_type("f32"), x)
            src = "f32"
        return arith.extf(t, x) if _bits(dst) > _bits(src) else arith.truncf(t, x)
    if dst == "i1":  # bool(x) is x != 0 (NaN is true)
        if is_float(src):
            return arith.cmpf(arith.CmpFPredicate.UNE, x, lb.const(src, 0.0))
        return arith.cmpi(arith.CmpIPredicate.ne, x, lb.const(src, 0))
    if is_float(dst):
        return arith.uitofp(t, x) if src == "i1" else arith.sitofp(t, x)
    if is_float(src):
        return arith.fptosi(t, x)
    if src == "i1":
        return arith.extui(t, x)
    return arith.extsi(t, x) if _bits(dst) > _bits(src) else arith.trunci(t, x)


@lowering(*UNARY, *BINARY, "compare", "select", "convert")
def _lower_elementwise(op, operands, *, op_name, attrs, out):
    """One all-parallel linalg.generic whose body is the op's scalar rule."""
    from ..conversion import linalg_builders as lb
    d = lookup(op_name)
    in_dtypes = [dtype_of(ir.RankedTensorType(v.type).element_type) for v in operands]
    return lb.elementwise(operands, out[0].shape, [out[0].dtype], lambda xs: [d.scalar(
        xs, op=op_name, attrs=attrs, in_dtypes=in_dtypes, out_dtype=out[0].dtype)])


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .builder import spec  # noqa: E402
from .core import jvp_rule, vjp_rule  # noqa: E402

# Unary and binary rules are written once as local derivatives ("multipliers"):
# the VJP multiplies the cotangent by them and the JVP the tangent, so the two
# modes cannot disagree. Gradients follow PyTorch's conventions (derivatives.yaml).
_NO_GRAD_UNARY = ("sign", "floor", "ceil", "round", "not", "stop_gradient")


def _unary_derivative(b, x, y, op):
    """d op(x) / dx at x (y = op(x)), as dg IR; built from y where cheaper."""
    def c(v):
        return b.full_like(x, v)
    if op == "neg":
        return c(-1.0)
    if op == "abs":
        return b.sign(x)  # abs'(0) = 0, as in PyTorch
    if op == "exp":
        return y
    if op == "log":
        return b.reciprocal(x)
    if op == "log1p":
        return b.reciprocal(b.add(x, c(1.0)))
    if op == "expm1":
        return b.add(y, c(1.0))
    if op == "sqrt":
        return b.div(c(0.5), y)
    if op == "rsqrt":
        return b.mul(c(-0.5), b.mul(y, b.mul(y, y)))
    if op == "tanh":
        return b.sub(c(1.0), b.mul(y, y))
    if op == "sigmoid":
        return b.mul(y, b.sub(c(1.0), y))
    if op == "erf":
        return b.mul(c(1.1283791670955126), b.exp(b.neg(b.mul(x, x))))  # 2/sqrt(pi)
    if op == "sin":
        return b.cos(x)
    if op == "cos":
        return b.neg(b.sin(x))
    if op in ("atan", "atanh"):  # 1 / (1 +- x^2)
        return b.reciprocal(b.create("add" if op == "atan" else "sub", (c(1.0), b.mul(x, x))))
    if op in ("asin", "acos"):  # +-1 / sqrt(1 - x^2)
        d = b.rsqrt(b.sub(c(1.0), b.mul(x, x)))
        return d if op == "asin" else b.neg(d)
    if op in ("asinh", "acosh"):  # 1 / sqrt(x^2 +- 1)
        return b.rsqrt(b.create("add" if op == "asinh" else "sub", (b.mul(x, x), c(1.0))))
    if op == "sinh":
        return b.cosh(x)
    if op == "cosh":
        return b.sinh(x)
    if op == "erfc":
        return b.mul(c(-1.1283791670955126), b.exp(b.neg(b.mul(x, x))))  # -2/sqrt(pi)
    if op == "exp2":
        return b.mul(y, c(0.6931471805599453))  # ln 2
    if op == "reciprocal":
        return b.neg(b.mul(y, y))
    raise AssertionError(op)


def _binary_derivatives(b, x, y, out, op):
    """(d out/d x, d out/d y) for the multiplicative binary ops."""
    def c(v):
        return b.full_like(x, v)
    if op == "mul":
        return y, x
    if op == "div":
        return b.reciprocal(y), b.neg(b.div(out, y))
    if op == "pow":
        exponent = _splat_value(y)
        if exponent is not None:  # x ** c (RMSNorm's square): c * x ** (c - 1), folded
            if exponent == 0.0:  # PyTorch masks exponent == 0
                return c(0.0), None
            if exponent == 1.0:
                return c(1.0), None
            power = x if exponent == 2.0 else b.pow(x, c(exponent - 1.0))
            return b.mul(c(exponent), power), None
        # PyTorch masks exponent == 0 (d/dx) and x == 0 with exponent >= 0 (d/dy)
        zero = c(0.0)
        dx = b.select(b.compare(y, zero, direction="eq"), zero,
                      b.mul(y, b.pow(x, b.sub(y, c(1.0)))))
        x_zero = b.create("and", (b.compare(x, zero, direction="eq"),
                                  b.compare(y, zero, direction="ge")))
        dy = b.select(x_zero, zero, b.mul(out, b.log(x)))
        return dx, dy
    if op == "atan2":  # atan2(x, y): (y, -x) / (x^2 + y^2)
        r = b.add(b.mul(x, x), b.mul(y, y))
        return b.div(y, r), b.neg(b.div(x, r))
    if op in ("max", "min"):
        # torch.maximum/minimum: the winner takes the gradient, ties split it equally
        x_loses = b.compare(x, y, direction="lt" if op == "max" else "gt")
        y_loses = b.compare(x, y, direction="gt" if op == "max" else "lt")
        tie = b.compare(x, y, direction="eq")
        share = b.select(tie, c(0.5), c(1.0))
        return b.select(x_loses, c(0.0), share), b.select(y_loses, c(0.0), share)
    raise AssertionError(op)


def _scale(b, v, m):
    return None if v is None or m is None else b.mul(v, m)


def _splat_value(v) -> float | None:
    """The value of every element of `v` if a dg.full made it, else None."""
    from .core import attrs_of
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "dg.full":
        return None
    return float(attrs_of(owner.operation)["value"])


def _add_opt(b, u, v):
    """u + v where None means zero."""
    if u is None:
        return v
    return u if v is None else b.add(u, v)


def _sub_opt(b, u, v):
    if v is None:
        return u
    return b.neg(v) if u is None else b.sub(u, v)


_LINEAR_UNARY = set(UNARY) - set(_NO_GRAD_UNARY)


@vjp_rule(*_LINEAR_UNARY)
def _unary_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None]
    if op == "neg":
        return [b.neg(g)]
    return [b.mul(g, _unary_derivative(b, ins[0], outs[0], op))]


@jvp_rule(*_LINEAR_UNARY)
def _unary_jvp(b, ins, outs, tangents, *, op, attrs):
    (t,) = tangents
    if t is None:
        return [None]
    if op == "neg":
        return [b.neg(t)]
    return [b.mul(t, _unary_derivative(b, ins[0], outs[0], op))]


@vjp_rule(*_NO_GRAD_UNARY, "and", "or", "compare")
def _no_grad_vjp(b, ins, outs, cts, *, op, attrs):
    return [None] * len(ins)


@jvp_rule(*_NO_GRAD_UNARY, "and", "or", "compare")
def _no_grad_jvp(b, ins, outs, tangents, *, op, attrs):
    return [None] * len(outs)


@vjp_rule("add", "sub")
def _additive_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None, None]
    return [g, g if op == "add" else b.neg(g)]


@jvp_rule("add", "sub")
def _additive_jvp(b, ins, outs, tangents, *, op, attrs):
    tx, ty = tangents
    return [_add_opt(b, tx, ty) if op == "add" else _sub_opt(b, tx, ty)]


@vjp_rule("mul", "div", "pow", "atan2", "max", "min")
def _binary_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None, None]
    dx, dy = _binary_derivatives(b, ins[0], ins[1], outs[0], op)
    return [b.mul(g, dx), _scale(b, g, dy)]


@jvp_rule("mul", "div", "pow", "atan2", "max", "min")
def _binary_jvp(b, ins, outs, tangents, *, op, attrs):
    tx, ty = tangents
    if tx is None and ty is None:
        return [None]
    dx, dy = _binary_derivatives(b, ins[0], ins[1], outs[0], op)
    return [_add_opt(b, _scale(b, tx, dx), _scale(b, ty, dy))]


@vjp_rule("select")
def _select_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None:
        return [None, None, None]
    zero = b.full_like(g, 0.0)
    return [None, b.select(ins[0], g, zero), b.select(ins[0], zero, g)]


@jvp_rule("select")
def _select_jvp(b, ins, outs, tangents, *, op, attrs):
    _, tt, tf = tangents
    if tt is None and tf is None:
        return [None]
    zero = b.full_like(outs[0], 0.0)
    return [b.select(ins[0], zero if tt is None else tt, zero if tf is None else tf)]


def _float_pair(ins, outs):
    return is_float(spec(ins[0]).dtype) and is_float(spec(outs[0]).dtype)


@vjp_rule("convert")
def _convert_vjp(b, ins, outs, cts, *, op, attrs):
    (g,) = cts
    if g is None or not _float_pair(ins, outs):
        return [None]
    return [b.convert(g, dtype=spec(ins[0]).dtype)]


@jvp_rule("convert")
def _convert_jvp(b, ins, outs, tangents, *, op, attrs):
    (t,) = tangents
    if t is None or not _float_pair(ins, outs):
        return [None]
    return [b.convert(t, dtype=spec(outs[0]).dtype)]

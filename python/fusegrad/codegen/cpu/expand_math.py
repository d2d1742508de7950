"""dg-expand-math: f32 transcendental functions as inline polynomials.

LLVM turns `math.exp`/`tanh`/`erf`/... into libm calls, one element at a
time: a loop holding one cannot be vectorized (64% of a GPT-2 forward was in
`tanhf`/`expm1f`/`powf`). Here each becomes arith on the same (scalar or
vector) type: range reduction, a minimax polynomial and exponent bit tricks,
after Cephes (exp, log, sin, cos) and Eigen (erf). Special values (NaN, +-inf,
+-0, denormals, overflow) are selected explicitly, and accuracy is within a
few ulp of PyTorch's (test_math_approx.py sweeps wide ranges against it).
`powf` with a constant exponent becomes multiplications, `sqrt` or a
reciprocal. f64 and general `powf` stay libm calls, except f64 log1p, which becomes
Goldberg's formula around libm's log (`_libm_log1p`).

With `ldexp=1` (what `compile_cpu` asks for on hosts with AVX-512F), exp and the
large-argument path of expm1 scale by 2**n with `llvm.intr.ldexp`, one `vscalefps`
per vector there (it rounds denormal results once and overflows to inf by itself),
instead of two multiplications by exponents built with integer shifts (scalar
code, which LLVM vectorizes; the dialect's op takes no vector exponent): the
multiply/FMA pipes bound these polynomial loops (llvm-mca on the gelu benchmark's
kernel, Zen 4), and this takes 3 of their ops per element off an exp. Elsewhere
LLVM would lower ldexp to a libm call per element, so it stays off by default.
"""
from __future__ import annotations

import math as pymath
from typing import Callable

from mlir import ir
from mlir.dialects import arith, math


LOG2E = 1.44269504088896341
# ln 2 = LN2_HI + LN2_LO, LN2_HI exact in a few bits (Cephes)
LN2_HI, LN2_LO = 0.693359375, -2.12194440e-4
EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
         1.6666665459e-1, 5.0000001201e-1)
LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
         1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
         3.3333331174e-1)
SIN_P = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
COS_P = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)
# Eigen's generic_fast_erf_float: erf(x) = x * P(x^2) / Q(x^2) on [-4, 4]
ERF_ALPHA = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
             -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
             -1.60960333262415e-02)
ERF_BETA = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
            -7.37332916720468e-03, -1.42647390514189e-02)
PIO2_HI, PIO2_LO = 1.57079632673412561417e+00, 6.07710050650619224932e-11


class _F:
    """Emits f32 arith on `t` (f32 or a vector of f32), with i32 for bit tricks; on f64
    for `_libm_log1p`."""

    def __init__(self, t: ir.Type, ldexp: bool = False) -> None:
        self.t = t
        self.ldexp = ldexp
        self.vec = isinstance(t, ir.VectorType)
        self.i32 = self._like(ir.IntegerType.get_signless(32))
        self.f64 = self._like(ir.F64Type.get())
        self.i64 = self._like(ir.IntegerType.get_signless(64))

    def _like(self, elt: ir.Type) -> ir.Type:
        return ir.VectorType.get(ir.VectorType(self.t).shape, elt) if self.vec else elt

    def const(self, value: float, t: ir.Type | None = None) -> ir.Value:
        t = t or self.t
        elt = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
        attr = (ir.FloatAttr.get(elt, value) if isinstance(elt, (ir.F32Type, ir.F64Type))
                else ir.IntegerAttr.get(elt, int(value)))
        if isinstance(t, ir.VectorType):
            attr = ir.DenseElementsAttr.get_splat(t, attr)
        return arith.ConstantOp(t, attr).result

    def fma(self, a, b, c):
        return math.fma(a, b, c)

    def horner(self, x, coeffs):
        acc = self.const(coeffs[0])
        for c in coeffs[1:]:
            acc = self.fma(acc, x, self.const(c))
        return acc

    def clamp(self, x, lo, hi):
        return arith.minimumf(arith.maximumf(x, self.const(lo)), self.const(hi))

    def cmp(self, pred: str, a, b):
        return arith.cmpf(getattr(arith.CmpFPredicate, pred), a, b)

    def pow2i(self, n):
        """2**n for i32 n in the normal exponent range."""
        biased = arith.addi(n, self.const(127, self.i32))
        return arith.bitcast(self.t, arith.shli(biased, self.const(23, self.i32)))

    def keep_nan(self, x, result):
        return arith.select(self.cmp("UNO", x, x), x, result)


def _exp_parts(f: _F, x, lo: float | None, hi: float):
    """x = n ln2 + r, |r| <= ln2/2: returns (n as i32, expm1(r) as a polynomial). x is
    clamped to [lo, hi] (lo None: x is known to be above the range's bottom)."""
    xc = arith.minimumf(x, f.const(hi)) if lo is None else f.clamp(x, lo, hi)
    n = math.roundeven(arith.mulf(xc, f.const(LOG2E)))
    r = f.fma(n, f.const(-LN2_HI), xc)
    r = f.fma(n, f.const(-LN2_LO), r)
    pm1 = f.fma(arith.mulf(r, r), f.horner(r, EXP_P), r)
    return arith.fptosi(f.i32, n), pm1


def _scale(f: _F, p, n):
    """p * 2**n for n in [-150, 129], in two steps so denormal results and overflow round once."""
    if f.ldexp and not f.vec:  # the LLVM dialect's ldexp takes a scalar exponent only
        return ir.Operation.create("llvm.intr.ldexp", results=[f.t], operands=[p, n]).result
    n1 = arith.shrsi(n, f.const(1, f.i32))
    n2 = arith.subi(n, n1)
    return arith.mulf(arith.mulf(p, f.pow2i(n1)), f.pow2i(n2))


def _exp(f: _F, x):
    # below -104, exp(x) rounds to 0: those lanes (a masked attention score, -inf or the
    # dtype's min) are computed as exp(0) and replaced by 0, since scaling toward 0 (by
    # vscalefps or by multiplication) takes a microcode assist per underflowing vector:
    # a causally masked softmax ran 9x slower than eager's
    zero = f.const(0.0)
    under = f.cmp("OLT", x, f.const(-104.0))
    n, pm1 = _exp_parts(f, arith.select(under, zero, x), None, 89.0)
    return f.keep_nan(x, arith.select(under, zero, _scale(f, arith.addf(pm1, f.const(1.0)), n)))


def _expm1(f: _F, x):
    n, pm1 = _exp_parts(f, x, -88.0, 89.0)
    # only taken for n > 127: other lanes scale by 2**127, not toward 0 (an assist each)
    big = _scale(f, arith.addf(pm1, f.const(1.0)), arith.maxsi(n, f.const(127, f.i32)))
    # 2**n exactly for n <= 127 (n = -127 gives 0, where expm1 is -1 anyway)
    s = f.pow2i(arith.minsi(n, f.const(127, f.i32)))
    small = f.fma(s, pm1, arith.subf(s, f.const(1.0)))
    return f.keep_nan(x, arith.select(arith.cmpi(arith.CmpIPredicate.sgt, n,
                                                 f.const(127, f.i32)), big, small))


def _log(f: _F, x):
    tiny = f.cmp("OLT", x, f.const(1.1754943508222875e-38))
    xs = arith.select(tiny, arith.mulf(x, f.const(8388608.0)), x)  # denormals * 2**23
    bits = arith.bitcast(f.i32, xs)
    e = arith.subi(arith.shrui(bits, f.const(23, f.i32)), f.const(126, f.i32))
    e = arith.select(tiny, arith.subi(e, f.const(23, f.i32)), e)
    mant = arith.ori(arith.andi(bits, f.const(0x007FFFFF, f.i32)), f.const(0x3F000000, f.i32))
    m = arith.bitcast(f.t, mant)  # [0.5, 1)
    low = f.cmp("OLT", m, f.const(0.707106781186547524))
    e = arith.select(low, arith.subi(e, f.const(1, f.i32)), e)
    m = arith.subf(arith.select(low, arith.addf(m, m), m), f.const(1.0))
    ef = arith.sitofp(f.t, e)
    z = arith.mulf(m, m)
    y = arith.mulf(arith.mulf(m, z), f.horner(m, LOG_P))
    y = f.fma(ef, f.const(LN2_LO), y)
    y = f.fma(z, f.const(-0.5), y)
    r = f.fma(ef, f.const(LN2_HI), arith.addf(m, y))
    r = arith.select(f.cmp("OEQ", x, f.const(pymath.inf)), x, r)
    r = arith.select(f.cmp("OEQ", x, f.const(0.0)), f.const(-pymath.inf), r)
    r = arith.select(f.cmp("OLT", x, f.const(0.0)), f.const(pymath.nan), r)
    return f.keep_nan(x, r)


def _log1p(f: _F, x, log: Callable = _log):
    u = arith.addf(x, f.const(1.0))
    d = arith.subf(u, f.const(1.0))
    # log(u) * x / (u - 1) corrects the rounding of 1 + x (Goldberg)
    r = arith.mulf(log(f, u), arith.divf(x, d))
    r = arith.select(f.cmp("OEQ", d, f.const(0.0)), x, r)
    return arith.select(f.cmp("OEQ", x, f.const(pymath.inf)), x, r)


def _tanh(f: _F, x):
    # |tanh| rounds to 1 beyond 9; the clamp keeps a NaN (arith.minimumf/maximumf
    # propagate it), and so does expm1
    xc = f.clamp(x, -9.0, 9.0)
    e = _expm1(f, arith.addf(xc, xc))
    return arith.divf(e, arith.addf(e, f.const(2.0)))


def _erf(f: _F, x):
    xc = f.clamp(x, -4.0, 4.0)  # keeps a NaN, which the arithmetic below keeps too
    x2 = arith.mulf(xc, xc)
    ratio = arith.divf(f.horner(x2, ERF_ALPHA), f.horner(x2, ERF_BETA))
    return arith.mulf(xc, ratio)  # one rounding for denormal x


def _sincos(f: _F, x, cosine: bool):
    # reduce by pi/2 in f64: exact quadrant and remainder for |x| < 2**20 * pi/2
    xd = arith.extf(f.f64, x)
    j = math.roundeven(arith.mulf(xd, f.const(2.0 / pymath.pi, f.f64)))
    r = f.fma(j, f.const(-PIO2_HI, f.f64), xd)
    r = arith.truncf(f.t, f.fma(j, f.const(-PIO2_LO, f.f64), r))
    j = arith.minimumf(arith.maximumf(j, f.const(-2.0 ** 40, f.f64)), f.const(2.0 ** 40, f.f64))
    q = arith.trunci(f.i32, arith.fptosi(f.i64, arith.select(
        arith.cmpf(arith.CmpFPredicate.UNO, j, j), f.const(0.0, f.f64), j)))
    if cosine:
        q = arith.addi(q, f.const(1, f.i32))
    z = arith.mulf(r, r)
    s = f.fma(arith.mulf(r, z), f.horner(z, SIN_P), r)
    c = f.fma(arith.mulf(z, z), f.horner(z, COS_P), f.fma(z, f.const(-0.5), f.const(1.0)))
    odd = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(q, f.const(1, f.i32)), f.const(0, f.i32))
    neg = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(q, f.const(2, f.i32)), f.const(0, f.i32))
    v = arith.select(odd, c, s)
    return arith.select(neg, arith.negf(v), v)


def _constant_exponent(v: ir.Value) -> float | None:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    attr = owner.operation.attributes["value"]
    if isinstance(attr, ir.DenseElementsAttr):
        if not attr.is_splat:
            return None
        attr = attr.get_splat_value()
    return ir.FloatAttr(attr).value


def _powf(f: _F, x, y):
    c = _constant_exponent(y)
    if c is None:
        return None
    if c == 1.0:
        return x
    if c == 2.0:
        return arith.mulf(x, x)
    if c == 3.0:
        return arith.mulf(arith.mulf(x, x), x)
    if c == 4.0:
        sq = arith.mulf(x, x)
        return arith.mulf(sq, sq)
    if c == -1.0:
        return arith.divf(f.const(1.0), x)
    if c == -2.0:
        return arith.divf(f.const(1.0), arith.mulf(x, x))
    if c == 0.5:  # pow(-inf, 0.5) = inf and pow(-0, 0.5) = +0, unlike sqrt
        r = math.sqrt(x)
        r = arith.select(f.cmp("OEQ", x, f.const(-pymath.inf)), f.const(pymath.inf), r)
        return arith.select(f.cmp("OEQ", x, f.const(0.0)), f.const(0.0), r)
    return None


_UNARY: dict[str, Callable] = {
    "math.exp": _exp, "math.expm1": _expm1, "math.log": _log, "math.log1p": _log1p,
    "math.tanh": _tanh, "math.erf": _erf,
    "math.sin": lambda f, x: _sincos(f, x, cosine=False),
    "math.cos": lambda f, x: _sincos(f, x, cosine=True),
}


def _libm_log1p(f: _F, x):
    """f64 log1p as Goldberg's correction around math.log (libm's log): LLVM's lowering
    of math.log1p is log(1 + x), which loses every bit of an x below 1e-16 (a
    log-add-exp of two values 40 apart)."""
    return _log1p(f, x, lambda _, u: math.log(u))


def _element(t: ir.Type) -> ir.Type:
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def expand(op: ir.Operation, ldexp: bool = False) -> bool:
    """Replace `op` by its inline expansion; False if it has none (kept as is)."""
    if op.name not in _UNARY and op.name != "math.powf":
        return False
    element = _element(op.results[0].type)
    f64_log1p = op.name == "math.log1p" and isinstance(element, ir.F64Type)
    if not (isinstance(element, ir.F32Type) or f64_log1p):
        return False
    with ir.InsertionPoint(op), op.location:
        f = _F(op.results[0].type, ldexp)
        if f64_log1p:
            new = _libm_log1p(f, op.operands[0])
        elif op.name == "math.powf":
            new = _powf(f, op.operands[0], op.operands[1])
            if new is None:
                return False
        else:
            new = _UNARY[op.name](f, op.operands[0])
    op.results[0].replace_all_uses_with(new)
    op.erase()
    return True


def expand_math(module: ir.Operation, ldexp: bool = False) -> None:
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in _UNARY or op.name == "math.powf":
            ops.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    for op in ops:
        expand(op, ldexp)

"""Counter-based random numbers: a pure function of (seed, element index).

Element i of a result gets `bits = mix32(mix32(i ^ key) + key)` with
`key = mix32(seed_lo ^ mix32(seed_hi))`, all in wrapping uint32 arithmetic,
and `u = (bits >> 8) * 2^-24` in [0, 1). Being stateless, the backward of
dropout regenerates (or receives) exactly the forward's mask, and every
backend produces the same bits as this reference.
"""
from __future__ import annotations


from .core import Attr, Kind, ShapeError, define, lowering, reference_rule, shape_rule
from .types import is_float, torch_dtype
from .lazy_torch import torch

MIX_MUL1 = 0x7FEB352D
MIX_MUL2 = 0x846CA68B
MASK32 = 0xFFFFFFFF

define("rng_uniform", ("seed",), kind=Kind.RANDOM,
       summary="uniform [0, 1) floats from a 0-d i64 seed")
define("rng_bernoulli", ("seed",), attrs={"p": Attr.F64}, kind=Kind.RANDOM,
       summary="1 with probability p else 0, from a 0-d i64 seed")


@shape_rule("rng_uniform", "rng_bernoulli")
def _rng_shape(ins, attrs, hint, *, op):
    (seed,) = ins
    if seed.shape != () or seed.dtype != "i64":
        raise ShapeError(f"dg.{op}: seed must be tensor<i64>, got {seed}")
    if hint is None:
        raise ShapeError(f"dg.{op} needs the result type")
    if not is_float(hint[0].dtype):
        raise ShapeError(f"dg.{op}: result must be floating point, got {hint[0].dtype}")
    if op == "rng_bernoulli" and not 0.0 <= attrs["p"] <= 1.0:
        raise ShapeError(f"dg.rng_bernoulli: p={attrs['p']} outside [0, 1]")
    return list(hint)


def mix32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 integer hash on int64 tensors holding uint32 values."""
    x = x ^ (x >> 16)
    x = (x * MIX_MUL1) & MASK32
    x = x ^ (x >> 15)
    x = (x * MIX_MUL2) & MASK32
    return x ^ (x >> 16)


def uniform_bits(seed: int, numel: int) -> torch.Tensor:
    lo, hi = seed & MASK32, (seed >> 32) & MASK32
    key = mix32(torch.tensor(lo) ^ mix32(torch.tensor(hi)))
    i = torch.arange(numel, dtype=torch.int64) & MASK32
    return mix32((mix32(i ^ key) + key) & MASK32)


@reference_rule("rng_uniform", "rng_bernoulli")
def _rng_ref(seed, *, op, attrs, out):
    spec = out[0]
    u = (uniform_bits(int(seed), spec.numel) >> 8).to(torch.float64) * 2.0 ** -24
    if op == "rng_bernoulli":
        u = (u < attrs["p"]).to(torch.float64)
    return [u.to(torch_dtype(spec.dtype)).reshape(spec.shape)]


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
def _mix32(x):
    """mix32 on an i32 scalar (wrapping arithmetic, logical shifts)."""
    from mlir.dialects import arith
    from ..conversion import linalg_builders as lb
    for shift, mul in ((16, MIX_MUL1), (15, MIX_MUL2)):
        x = arith.xori(x, arith.shrui(x, lb.const("i32", shift)))
        x = arith.muli(x, lb.const("i32", mul))
    return arith.xori(x, arith.shrui(x, lb.const("i32", 16)))


@lowering("rng_uniform", "rng_bernoulli")
def _rng_lower(op, operands, *, op_name, attrs, out):
    """The module docstring's hash per element in i32 arithmetic; the float is formed in
    f64 and converted once, exactly as the reference does."""
    from mlir.dialects import arith
    from ..conversion import linalg_builders as lb
    from .core import lookup
    o = out[0]
    i32, i64 = lb.element_type("i32"), lb.element_type("i64")
    seed = lb.extract(operands[0], [])
    lo = arith.trunci(i32, seed)
    hi = arith.trunci(i32, arith.shrui(seed, lb.const("i64", 32)))
    key = _mix32(arith.xori(lo, _mix32(hi)))
    convert = lookup("convert")

    def body(_):
        linear = lb.const("i64", 0)
        for d, size in enumerate(o.shape):  # row-major element number
            linear = arith.addi(arith.muli(linear, lb.const("i64", size)),
                                lb.index_cast(lb.loop_index(d), i64))
        bits = _mix32(arith.addi(_mix32(arith.xori(arith.trunci(i32, linear), key)), key))
        u = arith.mulf(arith.uitofp(lb.element_type("f64"), arith.shrui(bits, lb.const("i32", 8))),
                       lb.const("f64", 2.0 ** -24))
        if op_name == "rng_bernoulli":
            u = arith.select(arith.cmpf(arith.CmpFPredicate.OLT, u, lb.const("f64", attrs["p"])),
                             lb.const("f64", 1.0), lb.const("f64", 0.0))
        return [convert.scalar([u], op="convert", attrs={}, in_dtypes=["f64"], out_dtype=o.dtype)]

    return lb.elementwise([], o.shape, [o.dtype], body)


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)
from .core import jvp_rule, vjp_rule  # noqa: E402


@vjp_rule("rng_uniform", "rng_bernoulli")
def _rng_vjp(b, ins, outs, cts, *, op, attrs):
    return [None]  # the seed is an integer


@jvp_rule("rng_uniform", "rng_bernoulli")
def _rng_jvp(b, ins, outs, tangents, *, op, attrs):
    return [None]

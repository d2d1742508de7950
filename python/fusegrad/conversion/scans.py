"""dg.scan as loops: its combiners' arithmetic, and the loop nest that lowers the op.

One step of a scan combines the running value (`earlier`) with the next element
(`later`). `combine` emits that step with arith/math on scalars or on vectors of them,
so the lowering's scalar loops and the CPU's vector kernels (codegen/cpu/scans.py)
compute one rule:

- add, mul: sums and products, 16-bit floats accumulated in f32 and f32 in f64
  (`accumulator_dtype`: eager's CPU kernels accumulate so, rounding each result);
- logaddexp: eager's `_log_add_exp_helper`, the larger plus log1p(exp(-|x - y|)) with
  NaN propagated and equal infinities kept, 16-bit floats in f32 and f32 in f64 (eager's
  CPU kernel accumulates so), the step log1p(exp(...)) in f32 (f64 for f64 data);
- max, min: (value, index) pairs in eager's cummax/cummin order: the later element
  wins when it is NaN, or at least as large (small) as the running one (an ordered
  comparison: never where that is NaN); before the start the running value is the
  dtype's lowest (highest), which every element beats.

The nest (`scan_nest`) runs over the other dims, outermost first, around a serial loop
along the scanned dim that carries the running value; every loop of it carries the
`SCAN_ATTR` attribute (combiner, dim, reverse), by which the targets' kernel passes
find it after bufferization: the CPU vectorizes it, the CUDA target runs one thread per
iteration of the other dims.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from mlir import ir
from mlir.dialects import arith, math as mmath, scf

from . import linalg_builders as lb

SCAN_ATTR = "dg.scan"
COMBINERS = ("add", "mul", "max", "min", "logaddexp")
ARG_COMBINERS = ("max", "min")  # also give the index of the running extreme


def accumulator_dtype(combiner: str, dtype: str) -> str:
    """The dtype a scan of `dtype` accumulates in: sums, products and log-sum-exps as
    eager's CPU kernels, 16-bit floats in f32 and f32 in f64."""
    if dtype in ("f16", "bf16") and combiner in ("add", "mul", "logaddexp"):
        return "f32"
    if dtype == "f32" and combiner in ("add", "mul", "logaddexp"):
        return "f64"
    return dtype


def step_type(data: ir.Type) -> ir.Type:
    """The type logaddexp's step log1p(exp(-|x - y|)) is computed in for data of element
    type `data`: f32 (f64 for f64 data). The running value is held in the accumulator
    type, so a step's rounding is relative to the step, not to the running value: f32
    data keeps eager's f64 accuracy with exp and log1p as f32 vector polynomials
    (dg-expand-math), where f64 ones would be a libm call per element."""
    return data if isinstance(data, ir.F64Type) else ir.F32Type.get()


def identity(combiner: str, element: ir.Type) -> float | int:
    """The running value before the first element, which the first element replaces
    (max/min: the lowest/highest value of the type, which any element beats or ties)."""
    if combiner in ARG_COMBINERS:
        lowest = combiner == "max"
        if lb.is_float_type(element):
            return -math.inf if lowest else math.inf
        bits = ir.IntegerType(element).width
        return -(1 << (bits - 1)) if lowest else (1 << (bits - 1)) - 1
    return {"add": 0, "mul": 1, "logaddexp": -math.inf}[combiner]


def constant_like(value: float | int, like: ir.Type) -> ir.Value:
    """A constant of type `like` (a scalar type or a vector of one, splat)."""
    if not isinstance(like, ir.VectorType):
        return lb.const(like, value)
    element = ir.VectorType(like).element_type
    attr = ir.FloatAttr.get(element, float(value)) if lb.is_float_type(element) else \
        ir.IntegerAttr.get(element, int(value))
    return arith.ConstantOp(like, ir.DenseElementsAttr.get_splat(like, attr)).result


def _element_of(t: ir.Type) -> ir.Type:
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def _is_float(v: ir.Value) -> bool:
    return lb.is_float_type(_element_of(v.type))


def combine(combiner: str, earlier: Sequence[ir.Value], later: Sequence[ir.Value],
            data: ir.Type) -> list[ir.Value]:
    """One scan step on scalars or vectors: the values (and for max/min the i64
    indices) of `earlier` then `later`, in the accumulator dtype, for a scan of data of
    element type `data`."""
    e, l = earlier[0], later[0]
    floating = _is_float(l)
    if combiner == "add":
        return [arith.addf(e, l) if floating else arith.addi(e, l)]
    if combiner == "mul":
        return [arith.mulf(e, l) if floating else arith.muli(e, l)]
    if combiner == "logaddexp":
        return [_log_add_exp(e, l, step_type(data))]
    larger = combiner == "max"
    if floating:
        take = arith.ori(arith.cmpf(arith.CmpFPredicate.UNO, l, l), arith.cmpf(
            arith.CmpFPredicate.OGE if larger else arith.CmpFPredicate.OLE, l, e))
    else:
        take = arith.cmpi(arith.CmpIPredicate.sge if larger else arith.CmpIPredicate.sle, l, e)
    return [arith.select(take, l, e), arith.select(take, later[1], earlier[1])]


def _log_add_exp(y: ir.Value, x: ir.Value, step: ir.Type) -> ir.Value:
    """eager's `_log_add_exp_helper(x, y)` (x the element, y the running value): the
    larger plus log1p(exp(-|x - y|)), NaN from either; where y is infinite, y if it is
    above x, else x (x where both are the same infinity, whose difference is NaN). The
    log1p(exp(...)) runs in `step` (`step_type`); a difference beyond its range is -inf
    there, whose step is 0, as it would be."""
    difference = arith.subf(x, y)
    zero, inf = constant_like(0.0, y.type), constant_like(math.inf, y.type)
    hi = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, difference, zero), x, y)
    gap = convert(arith.negf(mmath.absf(difference)), step)
    general = arith.addf(convert(mmath.log1p(mmath.exp(gap)), _element_of(hi.type)), hi)
    at_infinity = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, y, x), y, x)
    infinite = arith.cmpf(arith.CmpFPredicate.OEQ, mmath.absf(y), inf)
    return arith.select(infinite, at_infinity, general)


def convert(v: ir.Value, to: ir.Type) -> ir.Value:
    """Float `v` (scalar or vector) extended or truncated to the element type `to`."""
    t = v.type
    src = _element_of(t)
    if src == to:
        return v
    target = ir.VectorType.get(ir.VectorType(t).shape, to) if isinstance(t, ir.VectorType) else to
    wider = lb.is_float_type(src) and _bits(to) > _bits(src)
    return arith.extf(target, v) if wider else arith.truncf(target, v)


def _bits(t: ir.Type) -> int:
    return 64 if isinstance(t, ir.F64Type) else 32 if isinstance(t, ir.F32Type) else 16


def attribute(combiner: str, dim: int, reverse: bool) -> ir.DictAttr:
    return ir.DictAttr.get({"combiner": ir.StringAttr.get(combiner),
                            "dim": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), dim),
                            "reverse": ir.BoolAttr.get(reverse)})


def read_attribute(op: ir.Operation) -> tuple[str, int, bool]:
    """(combiner, dim, reverse) of a loop that carries `SCAN_ATTR`."""
    d = ir.DictAttr(op.attributes[SCAN_ATTR])
    return (ir.StringAttr(d["combiner"]).value, ir.IntegerAttr(d["dim"]).value,
            ir.BoolAttr(d["reverse"]).value)


def scan_nest(x: ir.Value, out_dtypes: Sequence[str], dim: int, combiner: str,
              reverse: bool) -> list[ir.Value]:
    """dg.scan of tensor `x` as scf.for loops over its other dims (static dims of 1
    get none) around a serial loop along `dim` (from its end when `reverse`), carrying
    the result tensors and the running value; tensor.extract, combine, tensor.insert."""
    shape = lb.dims(x)
    rank = len(shape)
    acc = lb.element_type(accumulator_dtype(combiner, out_dtypes[0]))
    tag = attribute(combiner, dim, reverse)
    loops = [k for k in range(rank) if k != dim and shape[k] != 1]

    def tagged(lower: Any, upper: Any, inits: list) -> scf.ForOp:
        loop = scf.ForOp(lb.index(lower), lb.index(upper), lb.index(1), inits)
        loop.attributes[SCAN_ATTR] = tag
        return loop

    def serial(tensors: list, ivs: dict) -> list:
        carry = [lb.const(acc, identity(combiner, acc))]
        if combiner in ARG_COMBINERS:
            carry.append(lb.const("i64", -1))
        loop = tagged(0, shape[dim], tensors + carry)
        with ir.InsertionPoint(loop.body):
            inner = list(loop.inner_iter_args)
            i = loop.induction_variable
            pos = arith.subi(arith.subi(lb.index(shape[dim]), lb.index(1)), i) if reverse else i
            zero = lb.index(0)
            coords = [pos if k == dim else ivs.get(k, zero) for k in range(rank)]
            later = [convert(lb.extract(x, coords), acc)]
            if combiner in ARG_COMBINERS:
                later.append(arith.index_cast(ir.IntegerType.get_signless(64), pos))
            new = combine(combiner, inner[len(tensors):], later,
                          ir.RankedTensorType(x.type).element_type)
            stored = [convert(new[0], ir.RankedTensorType(tensors[0].type).element_type),
                      *new[1:]]
            scf.YieldOp([lb.insert(v, t, coords) for v, t in zip(stored, inner)] + new)
        return list(loop.results)[:len(tensors)]

    def nest(level: int, tensors: list, ivs: dict) -> list:
        if level == len(loops):
            return serial(tensors, ivs)
        k = loops[level]
        loop = tagged(0, shape[k], tensors)
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(nest(level + 1, list(loop.inner_iter_args),
                             {**ivs, k: loop.induction_variable}))
        return list(loop.results)

    return nest(0, [lb.empty(shape, dt) for dt in out_dtypes], {})

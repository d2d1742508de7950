"""Float sums as a tree of short loops, so their rounding error stays near eager's.

A float sum carried through one loop rounds at every step, and its error grows with the
loop's length: LLVM's vectorized loop keeps 64 f32 partial sums (16 lanes, 4 vectors),
but with prefetch chunks each chunk's partials were reduced into one scalar carried over
the row, so a row of 4096 summed about 250 roundings deep (5x eager's relative error,
20x for a million elements). Eager PyTorch sums in a cascade (ATen's `cascade_sum`:
levels of 16 steps). Here a reduction loop that sums floats becomes a nest: the
innermost loop runs over a block of BLOCK_BYTES (one prefetch chunk, `dg.sum_block`),
which LLVM unrolls into vector partial sums and reduces horizontally; each loop above
(`dg.sum_level`) adds at most LEVEL_MAX results of the one below, in f64 for f32
(`wider`: one add per block); every loop starts from the identity and its result is
combined once, without `reassoc`, into the loop above (the top one into the carried
accumulator), so LLVM keeps the tree. A row of 4096 f32 is 32 blocks in 6 x 6, within
eager's error (test_numerics.py), for the horizontal reductions the prefetch chunks
already cost.
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Sequence

from mlir import ir
from mlir.dialects import arith, scf

from ..common.loops import combine, identity

# elements of the innermost block: one prefetch chunk (dg-prefetch-streams' CHUNK_BYTES)
BLOCK_BYTES = 512
# results of the loop below that one loop adds at most
LEVEL_MAX = 8
# levels above the block for a loop whose length only the run time knows: up to
# LEVEL_MAX^3 blocks (256K f32) per step of the top loop
RUN_TIME_LEVELS = 3
# attributes on the loops of a nest: the innermost block loop (its span in elements, which
# dg-prefetch-streams prefetches before it instead of strip-mining it) and those above it
BLOCK_ATTR = "dg.sum_block"
LEVEL_ATTR = "dg.sum_level"

_SUM = "arith.addf"
_LANED = ("arith.maximumf", "arith.minimumf")  # Nest's max/min lanes take those


def sums(combiners: Optional[Sequence[str]]) -> bool:
    """Does a reduction with these (float) combiners sum, so that it accumulates blocked?
    Max and min are exact in any order (and run in lanes, `Nest._reduce_in_lanes`)."""
    return combiners is not None and _SUM in combiners and \
        not any(c in _LANED for c in combiners)


def block_elements(types: Sequence[ir.Type]) -> int:
    """Elements of the innermost block: BLOCK_BYTES of the widest of `types`."""
    width = max((t.width for t in types if isinstance(t, (ir.FloatType, ir.IntegerType))),
                default=32)
    return max(1, BLOCK_BYTES * 8 // width)


def spans(size: Optional[int], block: int) -> list[int]:
    """Elements each loop of the nest covers, innermost first: the block (or the whole
    loop, when shorter), then per level at most LEVEL_MAX times the one below, balanced
    (32 blocks: 6 x 6, not 8 x 4); the top loop steps over the whole length by the last
    span. `size`: the loop's length, or None when only the run time knows it."""
    if size is None:
        return [block * LEVEL_MAX ** k for k in range(RUN_TIME_LEVELS + 1)]
    if size <= block:
        return [size]
    blocks = -(-size // block)
    levels = math.ceil(math.log(blocks, LEVEL_MAX) - 1e-9)  # loops above the block
    step = math.ceil(blocks ** (1 / levels) - 1e-9)
    return [block * step ** k for k in range(levels)]


def neutral(combiner: str, t: ir.Type) -> ir.Value:
    """Where a partial result starts: the identity, but -0.0 for a sum (x + -0.0 is x for
    every x, which LLVM folds; x + 0.0 is not, for x = -0.0)."""
    if combiner == _SUM:
        return arith.ConstantOp(t, -0.0).result
    return identity(combiner, t)


def wider(t: ir.Type) -> ir.Type:
    """The type the levels of a sum of `t` accumulate in: f64 for f32 (and f64), f32 for
    16-bit floats. One widening add per block costs nothing next to the block's vector
    adds, and leaves the output's own rounding as the sum's main error, as in eager's
    double-accumulated CPU var and std."""
    if isinstance(t, (ir.F16Type, ir.BF16Type)):
        return ir.F32Type.get()
    return ir.F64Type.get() if isinstance(t, ir.FloatType) else t


def emit(size: ir.Value, static_size: Optional[int], loop_spans: Sequence[int],
         accs: Sequence[ir.Value], combiners: Sequence[str],
         element: Callable[[ir.Value, list], list], innermost: bool) -> list:
    """The loop nest summing `element(iv, carried)` for iv in [0, size) over `loop_spans`
    (`spans`), at the current insertion point, into `accs`; returns the results.
    `element` returns the new carried values at iv (a body combined into `carried`), in
    the accumulators' types; the levels above the block accumulate in `wider` types (a
    loop of one block adds to the accumulators in their own).
    `innermost`: the block loop is the innermost loop of its nest (it gets BLOCK_ATTR)."""
    index = ir.IndexType.get()
    once = static_size is not None and static_size <= loop_spans[-1]  # the top loop runs once
    # (one block adds to the accumulator once: in f64 or not, one rounding of their sum)
    single = once and len(loop_spans) == 1
    wide = [a.type if single else wider(a.type) for a in accs]

    def const(v: int) -> ir.Value:
        return arith.ConstantOp(index, v).result

    def end(start: ir.Value, span: int) -> ir.Value:
        stop = arith.addi(start, const(span))
        exact = static_size is not None and static_size % span == 0
        return stop if exact else arith.minsi(stop, size)

    def add(carried: Sequence[ir.Value], inner: Sequence[ir.Value]) -> list:
        return [combine(c, a, b, reassoc=False) for c, a, b in zip(combiners, carried, inner)]

    def level(k: int, start: ir.Value, stop: ir.Value) -> list:
        """The sum over [start, stop) by loop k of the nest (0: the block's elements), in
        the wide types."""
        types = [a.type for a in accs] if k == 0 else wide
        step = 1 if k == 0 else loop_spans[k - 1]
        loop = scf.ForOp(start, stop, const(step),
                         [neutral(c, t) for c, t in zip(combiners, types)])
        if k:
            loop.operation.attributes[LEVEL_ATTR] = ir.UnitAttr.get()
        elif innermost:
            loop.operation.attributes[BLOCK_ATTR] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), loop_spans[0])
        with ir.InsertionPoint(loop.body):
            carried = list(loop.inner_iter_args)
            if k == 0:
                scf.YieldOp(element(loop.induction_variable, carried))
            else:
                iv = loop.induction_variable
                scf.YieldOp(add(carried, level(k - 1, iv, end(iv, loop_spans[k - 1]))))
        if k:
            return list(loop.results)
        return [convert(v, t) for v, t in zip(loop.results, wide)]

    top = len(loop_spans) - 1
    inits = [convert(a, t) for a, t in zip(accs, wide)]
    if once:
        results = add(inits, level(top, const(0), size))
    else:
        loop = scf.ForOp(const(0), size, const(loop_spans[-1]), inits)
        loop.operation.attributes[LEVEL_ATTR] = ir.UnitAttr.get()
        with ir.InsertionPoint(loop.body):
            iv = loop.induction_variable
            scf.YieldOp(add(list(loop.inner_iter_args), level(top, iv, end(iv, loop_spans[-1]))))
        results = list(loop.results)
    return [convert(v, a.type) for v, a in zip(results, accs)]


def convert(v: ir.Value, t: ir.Type) -> ir.Value:
    """`v` as a float of type `t` (extended or rounded), or itself."""
    if v.type == t:
        return v
    if ir.FloatType(v.type).width < ir.FloatType(t).width:
        return arith.extf(t, v)
    return arith.truncf(t, v)

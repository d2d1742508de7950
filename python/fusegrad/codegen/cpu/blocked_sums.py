"""Float sums in blocks added in f64, so their rounding error stays near eager's.

A float sum carried through one loop rounds at every step, and its error grows with the
loop's length: LLVM's vectorized loop keeps 64 f32 partial sums (16 lanes, 4 vectors),
but with prefetch chunks each chunk's partials were reduced into one scalar carried over
the row, so a row of 4096 summed about 250 roundings deep (5x eager's relative error,
20x for a million elements). Eager PyTorch sums in a cascade (ATen's `cascade_sum`).
Here a reduction loop that sums floats becomes two: the inner one over a block of
BLOCK_BYTES (one prefetch chunk, `dg.sum_block`) from the identity, which LLVM unrolls
into vector partial sums and reduces horizontally, and the outer one over the blocks
(`dg.sum_blocks`), adding each block's sum once, without `reassoc` (LLVM keeps the
order), into accumulators of a `wider` type: f64 for f32. f64 rounds 2^29 times finer, so
its sequential sum of a million blocks still errs far below one f32 rounding: the
output's own rounding is most of the error (test_numerics.py), as in eager's
double-accumulated var. The horizontal reductions are those the prefetch chunks already
cost; one f64 add per block is next to nothing.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from mlir import ir
from mlir.dialects import arith, scf

from ..common.loops import combine, convert, neutral, wider

# elements of a block: one prefetch chunk (dg-prefetch-streams' CHUNK_BYTES)
BLOCK_BYTES = 512
# ... of a loop over a row an earlier loop of its row kernel read, in L1 and not
# prefetched: in 512-byte blocks a variance's second pass over rows of 1024 ran 10%
# slower than in one (a horizontal reduction per block)
CACHED_BLOCK_BYTES = 4096
# inner sums (an outer reduction loop's elements) a block of an outer loop adds in f32
OUTER_BLOCK = 8
# attributes: on the block loop innermost in its nest (its span in elements, which
# dg-prefetch-streams prefetches before it instead of strip-mining it), and on the ops
# around it (the loop over the blocks; for a run-time length, the choice of one block)
BLOCK_ATTR = "dg.sum_block"
BLOCKS_ATTR = "dg.sum_blocks"

_SUM = "arith.addf"
_LANED = ("arith.maximumf", "arith.minimumf")  # Nest's max/min lanes take those


def sums(combiners: Optional[Sequence[str]]) -> bool:
    """Does a reduction with these (float) combiners sum, so that it accumulates blocked?
    Max and min are exact in any order (and run in lanes, `Nest._reduce_in_lanes`)."""
    return combiners is not None and _SUM in combiners and \
        not any(c in _LANED for c in combiners)


def block_elements(types: Sequence[ir.Type], cached: bool = False) -> int:
    """Elements of the innermost block: BLOCK_BYTES (CACHED_BLOCK_BYTES for a row in L1)
    of the widest of `types`."""
    width = max((t.width for t in types if isinstance(t, (ir.FloatType, ir.IntegerType))),
                default=32)
    return max(1, (CACHED_BLOCK_BYTES if cached else BLOCK_BYTES) * 8 // width)


def emit(size: ir.Value, static_size: Optional[int], block: int,
         accs: Sequence[ir.Value], combiners: Sequence[str],
         element: Callable[[ir.Value, list], list], innermost: bool) -> list:
    """The loops summing `element(iv, carried)` for iv in [0, size), at the current
    insertion point, into `accs`, in blocks of `block` iterations; returns the results.
    `element` returns the new carried values at iv (a body combined into `carried`), in
    the accumulators' types; the blocks' sums add in `wider` types (a loop of one block
    adds to the accumulators in their own: in f64 or not, one rounding of their sum).
    `innermost`: the block loop is the innermost loop of its nest (it gets BLOCK_ATTR)."""
    index = ir.IndexType.get()

    def const(v: int) -> ir.Value:
        return arith.ConstantOp(index, v).result

    def add(carried: Sequence[ir.Value], sums: Sequence[ir.Value]) -> list:
        return [combine(c, a, convert(b, a.type), reassoc=False)
                for c, a, b in zip(combiners, carried, sums)]

    def block_sum(start: ir.Value, stop: ir.Value) -> list:
        loop = scf.ForOp(start, stop, const(1),
                         [neutral(c, a.type) for c, a in zip(combiners, accs)])
        if innermost:  # its span: a block, or a shorter static length
            span = block if static_size is None else min(block, static_size)
            loop.operation.attributes[BLOCK_ATTR] = ir.IntegerAttr.get(
                ir.IntegerType.get_signless(64), span)
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(element(loop.induction_variable, list(loop.inner_iter_args)))
        return list(loop.results)

    def in_blocks() -> list:
        wide = [convert(a, wider(a.type)) for a in accs]
        blocks = scf.ForOp(const(0), size, const(block), wide)
        blocks.operation.attributes[BLOCKS_ATTR] = ir.UnitAttr.get()
        with ir.InsertionPoint(blocks.body):
            iv = blocks.induction_variable
            stop = arith.addi(iv, const(block))
            if static_size is None or static_size % block:
                stop = arith.minsi(stop, size)
            scf.YieldOp(add(list(blocks.inner_iter_args), block_sum(iv, stop)))
        return [convert(v, a.type) for v, a in zip(blocks.results, accs)]

    if static_size is not None:
        return add(accs, block_sum(const(0), size)) if static_size <= block else in_blocks()
    # a run-time length within one block sums as a static one: the loop over the blocks
    # and its conversions cost a row of 32 (a layer norm's) 1.6x its time
    short = scf.IfOp(arith.cmpi(arith.CmpIPredicate.ule, size, const(block)),
                     [a.type for a in accs], has_else=True)
    short.operation.attributes[BLOCKS_ATTR] = ir.UnitAttr.get()
    with ir.InsertionPoint(short.then_block):
        scf.YieldOp(add(accs, block_sum(const(0), size)))
    with ir.InsertionPoint(short.else_block):
        scf.YieldOp(in_blocks())
    return list(short.results)

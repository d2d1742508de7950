"""Float sums of the CUDA reduction templates added in f64 (f32 for 16-bit floats) where
f32 would leave them less accurate than eager's (docs/CUDA.md, "Accuracy of sums").

A thread per output (`kernels.emit_thread_per_output`) adds each output's whole
reduction in one serial chain, whose rounding error grows with its length: in f32,
over 256 values in [10, 11), 3.8x eager's relative error against float64, over 1024
10x, over 4096 15x (in the kernel emulator). A block per output
(`kernels.emit_block_per_output`: a batch norm's per-channel statistics) adds short
strided chains, then a tree across its threads, whose last additions round at the
sum's own magnitude: a few roundings, where eager's batch norm, accumulating in double,
has one (the output of one of mean 300 erred 1.9x eager's, its weight gradient 3.1x).
Both add such sums in `wider` types here: each element's value is the body computed
from -0.0 (`neutral`, so exactly the value), extended and added to a wide accumulator;
a block's tree (`gpu.all_reduce`) runs on the wide partials, and the output is rounded
once. The f64 adds run at half the f32 rate on the targets (A100, H100, H200), in
kernels bound by memory; no GPU has measured them yet. Other combiners (max and min are
exact in any order) and f64 sums keep their type, and so do static sums of at most
SHORT_SUM elements per output: eager adds as few serially too, with the same results.

Row kernels and full reductions stay f32: each thread adds a few elements, and the
errors of many threads average out in the tree (within eager's error, measured).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from mlir import ir

from ..common.loops import combine, convert, identity, neutral, wider

# static sums of at most this many elements per output accumulate in their own type
SHORT_SUM = 16

_SUM = "arith.addf"


@dataclass
class WideSums:
    """A reduction's outputs' combiners and element types, and which of them accumulate
    wide (`wide[i]`: a float sum of a narrower type than `wider`'s, long enough)."""

    combiners: list[str]
    types: list[ir.Type]
    wide: list[bool]

    @classmethod
    def of(cls, combiners: Optional[Sequence[str]], outs: Sequence[ir.Value],
           reduced: Sequence) -> "WideSums":
        """For a reduction writing the memrefs `outs` with `combiners` (None: not every
        output an associative combine, none wide) over loops of sizes `reduced` (ints,
        or `DynSize`s of run-time sizes)."""
        types = [ir.MemRefType(b.type).element_type for b in outs]
        if combiners is None:
            return cls([""] * len(types), types, [False] * len(types))
        long = not all(isinstance(n, int) for n in reduced) or math.prod(reduced) > SHORT_SUM
        return cls(list(combiners), types,
                   [long and c == _SUM and wider(t) != t for c, t in zip(combiners, types)])

    def accumulator_types(self) -> list[ir.Type]:
        return [wider(t) if w else t for t, w in zip(self.types, self.wide)]

    def identities(self) -> list[ir.Value]:
        """The accumulators' starting values (the combiners' identities)."""
        return [identity(c, t) for c, t in zip(self.combiners, self.accumulator_types())]

    def widen(self, values: Sequence[ir.Value]) -> list[ir.Value]:
        return [convert(v, t) for v, t in zip(values, self.accumulator_types())]

    def narrow(self, values: Sequence[ir.Value]) -> list[ir.Value]:
        return [convert(v, t) for v, t in zip(values, self.types)]

    def step(self, accs: Sequence[ir.Value],
             compute: Callable[[list], list]) -> list[ir.Value]:
        """The accumulators after one element: `compute(outs)` runs the reduction's body
        with `outs` as the outputs' values; a wide output's body starts from -0.0, and
        its value is added to the wide accumulator."""
        outs = [neutral(c, t) if w else a
                for c, t, w, a in zip(self.combiners, self.types, self.wide, accs)]
        results = compute(outs)
        return [combine(c, a, convert(r, a.type)) if w else r
                for c, w, a, r in zip(self.combiners, self.wide, accs, results)]

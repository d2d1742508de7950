"""dg-generic-to-loops: linalg.generic on memrefs -> scf.for loops LLVM can vectorize.

Upstream `convert-linalg-to-loops` loads and stores a reduction's accumulator
in every iteration of the reduction loop (`acc[i] = acc[i] + x[i, j]`). LLVM
cannot keep it in a register, since the accumulator may alias the input, so a
row sum stays a scalar load-add-store chain. Here trailing reduction loops
carry their accumulators as `iter_args` (loaded once before, stored once
after), and the combining op gets `fastmath<reassoc>`, so LLVM's loop
vectorizer turns the row into vector partial sums with one horizontal
reduction per row. Parallel loops are plain: LLVM vectorizes the innermost
one, with runtime alias checks where it needs them.

Loops follow the generic's dim order (the fusion lowering puts the
contiguous dim last). Generics whose indexing maps are not projected
permutations (with constant-0 indices) are left to `convert-linalg-to-loops`.
"""
from __future__ import annotations

from typing import Optional, Sequence

from mlir import ir
from mlir.dialects import arith, memref, scf

from .registry import register_pass

_COMBINERS = ("arith.addf", "arith.mulf", "arith.maximumf", "arith.minimumf",
              "arith.maxnumf", "arith.minnumf")

Access = tuple  # per operand dim: loop dim, or None for the constant index 0


def _accesses(maps: Sequence[ir.AffineMap]) -> Optional[list[Access]]:
    out = []
    for m in maps:
        acc = []
        for e in m.results:
            if isinstance(e, ir.AffineDimExpr):
                acc.append(e.position)
            elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
                acc.append(None)
            else:
                return None
        out.append(tuple(acc))
    return out


def _loop_sizes(operand_types: Sequence[ir.Type], accesses: Sequence[Access],
                n: int) -> Optional[list[int]]:
    sizes: list[Optional[int]] = [None] * n
    for t, acc in zip(operand_types, accesses):
        if not isinstance(t, ir.MemRefType) or not t.has_static_shape:
            return None
        for d, s in zip(acc, t.shape):
            if d is not None:
                sizes[d] = s
    return None if any(s is None for s in sizes) else sizes


class _Emitter:
    def __init__(self, op: ir.Operation, accesses: list[Access], sizes: list[int],
                 iterators: list[str]) -> None:
        self.op = op
        self.g = op.opview
        self.ins = list(self.g.inputs)
        self.outs = list(self.g.outputs)
        self.accesses = accesses
        self.sizes = sizes
        self.n = len(sizes)
        red = [k for k, it in enumerate(iterators) if it == "reduction"]
        # reductions carried in registers only when they are the innermost loops
        self.carry = bool(red) and red == list(range(self.n - len(red), self.n))
        self.first_red = self.n - len(red) if self.carry else self.n
        self.body = self.g.regions[0].blocks[0]
        self.ivs: list[Optional[ir.Value]] = [None] * self.n

    def _index(self, acc: Access) -> list[ir.Value]:
        return [self.zero if d is None else self.ivs[d] for d in acc]

    def _load(self, buf: ir.Value, acc: Access) -> ir.Value:
        return memref.LoadOp(buf, self._index(acc)).result

    def _loop(self, dim: int, inits: Sequence[ir.Value] = ()) -> scf.ForOp:
        ub = arith.ConstantOp(ir.IndexType.get(), self.sizes[dim]).result
        loop = scf.ForOp(self.zero, ub, self.one, list(inits))
        self.ivs[dim] = loop.induction_variable
        return loop

    def _compute(self, out_values: Sequence[Optional[ir.Value]]) -> list[ir.Value]:
        """Clone the body for the current ivs; `out_values` are the outs' current values."""
        mapping: dict = {}
        args = list(self.body.arguments)
        n_in = len(self.ins)
        used = [len(list(a.uses)) > 0 for a in args]
        for k, (buf, arg) in enumerate(zip(self.ins, args[:n_in])):
            if used[k]:
                mapping[arg] = self._load(buf, self.accesses[k])
        for k, arg in enumerate(args[n_in:]):
            if used[n_in + k]:
                v = out_values[k]
                mapping[arg] = v if v is not None else self._load(
                    self.outs[k], self.accesses[n_in + k])
        results = None
        for inner in self.body.operations:
            inner = inner.operation
            if inner.name == "linalg.yield":
                results = [mapping.get(v, v) for v in inner.operands]
                break
            if inner.name == "linalg.index":
                d = ir.IntegerAttr(inner.attributes["dim"]).value
                mapping[inner.results[0]] = self.ivs[d]
                continue
            clone = inner.clone()
            for i, v in enumerate(clone.operands):
                if v in mapping:
                    clone.operands[i] = mapping[v]
            for old, new in zip(inner.results, clone.results):
                mapping[old] = new
        return results

    def _mark_combiners(self, results: Sequence[ir.Value]) -> None:
        for v in results:
            owner = v.owner
            if isinstance(owner, ir.Block):
                continue
            owner = owner.operation
            if owner.name in _COMBINERS:
                owner.attributes["fastmath"] = ir.Attribute.parse("#arith.fastmath<reassoc>")

    def emit(self) -> None:
        with ir.InsertionPoint(self.op), self.op.location:
            self.zero = arith.ConstantOp(ir.IndexType.get(), 0).result
            self.one = arith.ConstantOp(ir.IndexType.get(), 1).result
            self._nest(0)

    def _nest(self, dim: int) -> None:
        if dim == self.first_red:
            self._inner()
            return
        loop = self._loop(dim)
        with ir.InsertionPoint(loop.body):
            self._nest(dim + 1)
            scf.YieldOp([])

    def _inner(self) -> None:
        n_in = len(self.ins)
        if not self.carry:
            results = self._compute([None] * len(self.outs))
        else:
            inits = [self._load(b, self.accesses[n_in + k]) for k, b in enumerate(self.outs)]
            results = self._reduce(self.first_red, inits)
        for k, (buf, v) in enumerate(zip(self.outs, results)):
            memref.StoreOp(v, buf, self._index(self.accesses[n_in + k]))

    def _reduce(self, dim: int, accs: list[ir.Value]) -> list[ir.Value]:
        loop = self._loop(dim, accs)
        with ir.InsertionPoint(loop.body):
            carried = list(loop.inner_iter_args)
            if dim == self.n - 1:
                results = self._compute(carried)
                self._mark_combiners(results)
            else:
                results = self._reduce(dim + 1, carried)
            scf.YieldOp(results)
        return list(loop.results)


def _emitter(op: ir.Operation) -> Optional[_Emitter]:
    g = op.opview
    if not g.regions[0].blocks or len(g.regions[0].blocks) != 1:
        return None
    maps = [ir.AffineMapAttr(a).value for a in g.indexing_maps]
    accesses = _accesses(maps)
    if accesses is None:
        return None
    n = maps[0].n_dims
    types = [v.type for v in (*g.inputs, *g.outputs)]
    sizes = _loop_sizes(types, accesses, n)
    if sizes is None:
        return None
    iterators = [str(a).split("<")[-1].rstrip(">") for a in g.iterator_types]
    for inner in g.regions[0].blocks[0].operations:
        if len(inner.operation.regions):
            return None
    return _Emitter(op, accesses, sizes, iterators)


@register_pass("dg-generic-to-loops",
               "linalg.generic on static memrefs -> scf.for loops with reductions in registers")
def generic_to_loops(module: ir.Operation) -> None:
    generics: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.generic":
            generics.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    for op in generics:
        e = _emitter(op)
        if e is None:
            continue
        e.emit()
        op.erase()

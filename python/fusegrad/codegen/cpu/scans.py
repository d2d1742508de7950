"""dg-cpu-scans: dg.scan's loop nests as vector code.

dg.scan lowers to a serial loop along the scanned dim inside loops over the other
dims (conversion/scans.py: one dependent chain per line, which LLVM cannot
vectorize). This pass rebuilds each nest, found by its `dg.scan` attribute, from its
buffers:

- Along a last dim of unit stride (rows), each row goes in vectors of 64 bytes: a
  prefix scan inside the vector (log2(lanes) steps, each combining the vector with
  itself shifted by 1, 2, 4, ... lanes, the identity shifted in), then the combination
  with the carry (the previous vector's last lane, broadcast), then a scalar loop for
  the rest of the row. One vector combine per element and step instead of a chain of
  scalar ones: a compiled cumsum over [4, 32000] rows took 0.087 ms as scalar chains,
  0.052 ms so (eager 0.066 ms; 1 thread, the call included).
- Along another dim, the scanned dim's loop goes outside the dims after it, and the
  running values of one slice of those dims live in a buffer: the innermost loop runs
  along contiguous memory, and LLVM vectorizes it (cumsum over the columns of
  [1024, 1024]: 12.9 ms as strided chains, 0.45 ms so; eager, a strided chain too, 6 to
  24 ms on this 2-core machine), or, for logaddexp, whose loop it declines, this pass
  writes it in vectors of 64 bytes of the data.

The combine step is the lowering's own (`conversion.scans.combine`), on vectors here.
A nest whose buffers have another layout, or whose scanned loop canonicalize folded
(one element), keeps its loops.
"""
from __future__ import annotations

import logging
from typing import Callable, Optional, Sequence

from mlir import ir
from mlir.dialects import arith, func, memref, scf, vector

from .kernels import PARALLEL_MIN_WORK, PARALLEL_SUFFIX, mark_kernel
from ..common.outline import symbols
from ...conversion.scans import (ARG_COMBINERS, SCAN_ATTR, accumulator_dtype, combine,
                                 constant_like, convert, identity, read_attribute)
from ...dialects.types import dtype_of, element_type
from ...passes import functions

log = logging.getLogger(__name__)

VECTOR_BYTES = 64  # one AVX-512 register of the data; LLVM splits it on narrower hosts
_VECTOR_DTYPES = ("f32", "f64", "i32", "i64")
# combiners whose loops along columns are written in vectors here: LLVM's loop vectorizer
# declines logaddexp's (f32 data, f64 running values; logcumsumexp over the columns of
# [1024, 1024]: 2.8 ms scalar, 2.1 ms so) and vectorizes the others better itself
# (cumprod: 0.57 ms, 0.70 ms in these vectors)
_COLUMN_VECTOR_COMBINERS = ("logaddexp",)


class _Nest:
    """A scan nest's buffers and attributes, read off the loads and stores of its
    serial loop. `outs` are the values' and (max/min) the indices' buffers, None for
    a result nothing reads (canonicalize dropped its stores)."""

    def __init__(self, serial: ir.Operation, x: ir.Value, outs: list[Optional[ir.Value]]
                 ) -> None:
        self.x, self.outs = x, outs
        self.combiner, self.dim, self.reverse = read_attribute(serial)
        self.rank = ir.MemRefType(x.type).rank
        self.data = ir.MemRefType(x.type).element_type
        self.acc = element_type(accumulator_dtype(self.combiner, dtype_of(self.data)))
        self.i64 = ir.IntegerType.get_signless(64)

    @property
    def with_index(self) -> bool:
        return self.combiner in ARG_COMBINERS

    @property
    def vectors(self) -> bool:
        """Whether the last dim goes in vectors: a vector dtype, every buffer unit-stride."""
        return dtype_of(self.data) in _VECTOR_DTYPES and \
            all(_unit_stride(v) for v in self.buffers())

    def buffers(self) -> list[ir.Value]:
        return [self.x, *(o for o in self.outs if o is not None)]

    def with_buffers(self, buffers: Sequence[ir.Value]) -> list[Optional[ir.Value]]:
        """`outs` with the buffers after x in `buffers` (a kernel's arguments) in place."""
        rest = iter(buffers[1:])
        return [next(rest) if o is not None else None for o in self.outs]


def _nest(top: ir.Operation) -> Optional[_Nest]:
    """The nest under the tagged loop `top`, if its serial loop (the tagged loop with
    results: the running values) loads one buffer and stores results, all defined
    outside it."""
    serial = top
    while not len(serial.results):
        inner = [o.operation for o in serial.regions[0].blocks[0].operations
                 if o.operation.name == "scf.for" and SCAN_ATTR in o.operation.attributes]
        if len(inner) != 1:
            return None
        serial = inner[0]
    body = [o.operation for o in serial.regions[0].blocks[0].operations]
    loads = [o for o in body if o.name == "memref.load"]
    stores = [o for o in body if o.name == "memref.store"]
    if len(loads) != 1 or not 1 <= len(stores) <= 2:
        return None
    outs: list[Optional[ir.Value]] = [None, None]
    for store in stores:
        outs[1 if _stores_index(store) else 0] = store.operands[1]
    if any(v is not None and not _defined_outside(v, top)
           for v in [loads[0].operands[0], *outs]):
        return None
    return _Nest(serial, loads[0].operands[0], outs)


def _stores_index(store: ir.Operation) -> bool:
    """Whether `store` writes a max/min scan's index: the select of the element's
    position (an index_cast) or the running index."""
    value = store.operands[0]
    if isinstance(value.owner, ir.Block) or value.owner.name != "arith.select":
        return False
    position = value.owner.operands[1]
    return not isinstance(position.owner, ir.Block) and \
        position.owner.name == "arith.index_cast"


def _defined_outside(v: ir.Value, top: ir.Operation) -> bool:
    owner = v.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner.operation
    while op is not None:
        if op == top:
            return False
        op = op.parent
    return True


def _unit_stride(v: ir.Value) -> bool:
    strides, _ = ir.MemRefType(v.type).get_strides_and_offset()
    return strides[-1] == 1


def _index(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), value).result


def _size(v: ir.Value, d: int) -> ir.Value:
    n = ir.MemRefType(v.type).shape[d]
    return memref.DimOp(v, _index(d)).result if ir.ShapedType.is_dynamic_size(n) \
        else _index(n)


def _product(sizes: Sequence[ir.Value]) -> ir.Value:
    total = _index(1)
    for s in sizes:
        total = arith.muli(total, s)
    return total


def _loops(sizes: Sequence[ir.Value], body: Callable[[list[ir.Value]], None],
           first: Optional[tuple[ir.Value, ir.Value]] = None) -> None:
    """A nest of scf.for over `sizes` (outermost first; the first over [lo, hi) =
    `first` where given) around `body(indices)`."""
    if not sizes:
        body([])
        return
    lo, hi = first if first is not None else (_index(0), sizes[0])
    loop = scf.ForOp(lo, hi, _index(1))
    with ir.InsertionPoint(loop.body):
        _loops(sizes[1:], lambda ivs: body([loop.induction_variable, *ivs]))
        scf.YieldOp([])


def _rows_of(sizes: Sequence[ir.Value], lo: ir.Value, hi: ir.Value,
             body: Callable[[list[ir.Value]], None]) -> None:
    """`body(indices)` for the row-major positions [lo, hi) of the dims `sizes`."""
    loop = scf.ForOp(lo, hi, _index(1))
    with ir.InsertionPoint(loop.body):
        rest, ivs = loop.induction_variable, []
        for s in reversed(sizes[1:]):
            ivs.insert(0, arith.remui(rest, s))
            rest = arith.divui(rest, s)
        body([rest, *ivs] if sizes else [])
        scf.YieldOp([])


def _identities(n: _Nest, like: Sequence[ir.Type]) -> list[ir.Value]:
    values = [constant_like(identity(n.combiner, n.acc), like[0])]
    return values + ([constant_like(-1, like[1])] if n.with_index else [])


def _element(n: _Nest, element: ir.Value, position: ir.Value) -> list[ir.Value]:
    """What a scan step combines: `element` (data, scalar or vector) in the accumulator
    type, and its `position` (an integer) where the scan gives indices."""
    return [convert(element, n.acc)] + ([position] if n.with_index else [])


def _store(values: list[ir.Value], outs: list[Optional[ir.Value]], indices: list[ir.Value],
           store: Callable) -> None:
    """The running values (and indices) at `indices` of the result buffers there are."""
    for value, out in zip(values, outs):
        if out is not None:
            store(convert(value, ir.MemRefType(out.type).element_type), out, indices)


def _scalar_store(value: ir.Value, buffer: ir.Value, indices: list[ir.Value]) -> None:
    memref.StoreOp(value, buffer, indices)


def _vector_store(value: ir.Value, buffer: ir.Value, indices: list[ir.Value]) -> None:
    vector.StoreOp(value, buffer, indices)


def _bits(t: ir.Type) -> int:
    return ir.IntegerType(t).width if isinstance(t, ir.IntegerType) else \
        {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[dtype_of(t)]


def _rows(n: _Nest, x: ir.Value, outs: list[Optional[ir.Value]], lo: ir.Value,
          hi: ir.Value) -> None:
    """Rows [lo, hi) (row-major over the dims before the last), each in vectors, then a
    scalar loop for the rest."""
    sizes = [_size(x, d) for d in range(n.rank)]
    lanes = VECTOR_BYTES * 8 // _bits(n.data)
    data_v = ir.VectorType.get([lanes], n.data)
    acc_v, index_v = ir.VectorType.get([lanes], n.acc), ir.VectorType.get([lanes], n.i64)
    length = sizes[-1]
    whole = arith.subi(length, arith.remui(length, _index(lanes)))
    # indices within a vector are lane numbers, as i32 (one register where i64 took two
    # for f32 data), offset after its scan
    i32 = ir.IntegerType.get_signless(32)
    lane_v = ir.VectorType.get([lanes], i32)
    lane_order = arith.ConstantOp(lane_v, ir.DenseElementsAttr.get(
        [ir.IntegerAttr.get(i32, k) for k in range(lanes)], lane_v)).result

    def row(ivs: list[ir.Value]) -> None:
        loop = scf.ForOp(_index(0), whole, _index(lanes), _identities(n, [acc_v, index_v]))
        with ir.InsertionPoint(loop.body):
            j = loop.induction_variable
            start = arith.subi(arith.subi(length, _index(lanes)), j) if n.reverse else j
            where = [*ivs, start]
            values = _prefix(n, _element(n, vector.load(data_v, x, where), lane_order), lanes)
            if n.with_index:
                values[1] = arith.addi(arith.extsi(index_v, values[1]), vector.broadcast(
                    index_v, arith.index_cast(n.i64, start)))
            values = combine(n.combiner, list(loop.inner_iter_args), values, n.data)
            _store(values, outs, where, _vector_store)
            last = 0 if n.reverse else lanes - 1
            scf.YieldOp([vector.shuffle(v, v, [last] * lanes) for v in values])
        carry = [vector.extract(v, [], [0]) for v in loop.results]
        rest = arith.subi(length, whole)
        tail = scf.ForOp(_index(0), rest, _index(1), carry)
        with ir.InsertionPoint(tail.body):
            t = tail.induction_variable
            pos = arith.subi(arith.subi(rest, _index(1)), t) if n.reverse else arith.addi(whole, t)
            values = combine(n.combiner, list(tail.inner_iter_args), _element(
                n, memref.load(x, [*ivs, pos]), arith.index_cast(n.i64, pos)), n.data)
            _store(values, outs, [*ivs, pos], _scalar_store)
            scf.YieldOp(values)

    _rows_of(sizes[:-1], lo, hi, row)


def _prefix(n: _Nest, values: list[ir.Value], lanes: int) -> list[ir.Value]:
    """The scan of each vector on its own: log2(lanes) steps, each combining the vector
    with itself shifted (toward the later lanes in scan order) by 1, 2, 4, ... lanes."""
    shift = 1
    while shift < lanes:
        pads = _identities(n, [v.type for v in values])
        if n.reverse:  # earlier in scan order: the higher lanes
            mask = [k + shift if k + shift < lanes else lanes + k for k in range(lanes)]
            earlier = [vector.shuffle(v, pad, mask) for v, pad in zip(values, pads)]
        else:
            mask = [lanes + k - shift if k >= shift else k for k in range(lanes)]
            earlier = [vector.shuffle(pad, v, mask) for v, pad in zip(values, pads)]
        values = combine(n.combiner, earlier, values, n.data)
        shift *= 2
    return values


def _slices(n: _Nest, x: ir.Value, outs: list[Optional[ir.Value]], lo: ir.Value,
            hi: ir.Value) -> None:
    """The scanned dim's loop outside the dims after it, whose running values live in
    buffers of one slice, so the innermost loop goes along contiguous memory (in vectors
    for `_COLUMN_VECTOR_COMBINERS`, then a scalar loop for the rest). [lo, hi) are
    positions of the dims before the scanned one (row-major), or, where there are none,
    of the first dim after it."""
    sizes = [_size(x, d) for d in range(n.rank)]
    outer, length, inner = sizes[:n.dim], sizes[n.dim], sizes[n.dim + 1:]
    shape = [ir.MemRefType(x.type).shape[d] for d in range(n.dim + 1, n.rank)]
    dynamic = [v for v, s in zip(inner, shape) if ir.ShapedType.is_dynamic_size(s)]
    types = [n.acc, n.i64][:1 + n.with_index]
    carries = [memref.AllocOp(ir.MemRefType.get(shape, t), dynamic, []).result for t in types]
    columns = (lo, hi) if not outer else None
    vectors = n.vectors and n.combiner in _COLUMN_VECTOR_COMBINERS
    lanes = VECTOR_BYTES * 8 // _bits(n.data) if vectors else 1

    def slices(ivs: list[ir.Value]) -> None:
        starts = _identities(n, types)
        _loops(inner, lambda jvs: [memref.StoreOp(v, c, jvs) for v, c in zip(starts, carries)],
               columns)
        loop = scf.ForOp(_index(0), length, _index(1))
        with ir.InsertionPoint(loop.body):
            i = loop.induction_variable
            pos = arith.subi(arith.subi(length, _index(1)), i) if n.reverse else i
            position = arith.index_cast(n.i64, pos)

            def element(jvs: list[ir.Value], width: int) -> None:
                """The step at `jvs` of `width` contiguous elements (1: scalars)."""
                where = [*ivs, pos, *jvs]
                if width == 1:
                    running = [memref.load(c, jvs) for c in carries]
                    later = _element(n, memref.load(x, where), position)
                else:
                    running = [vector.load(ir.VectorType.get([width], t), c, jvs)
                               for c, t in zip(carries, types)]
                    later = _element(n, vector.load(ir.VectorType.get([width], n.data), x,
                                                    where),
                                     vector.broadcast(ir.VectorType.get([width], n.i64),
                                                      position) if n.with_index else None)
                values = combine(n.combiner, running, later, n.data)
                store = _scalar_store if width == 1 else _vector_store
                for v, c in zip(values, carries):
                    store(v, c, jvs)
                _store(values, outs, where, store)
            _contiguous_loops(inner, element, columns, lanes)
            scf.YieldOp([])

    if outer:
        _rows_of(outer, lo, hi, slices)
    else:
        slices([])
    for c in carries:
        memref.DeallocOp(c)


def _contiguous_loops(sizes: Sequence[ir.Value], body: Callable[[list[ir.Value], int], None],
                      first: Optional[tuple[ir.Value, ir.Value]], lanes: int) -> None:
    """`_loops` over `sizes` (the first over `first` where given) around `body(indices,
    width)`, the last dim in steps of `lanes` (width `lanes`), then one at a time
    (width 1) for the rest."""
    def last(ivs: list[ir.Value], lo: ir.Value, hi: ir.Value) -> None:
        if lanes == 1:
            steps = [(lo, hi, 1)]
        else:
            whole = arith.subi(hi, arith.remui(arith.subi(hi, lo), _index(lanes)))
            steps = [(lo, whole, lanes), (whole, hi, 1)]
        for start, stop, width in steps:
            loop = scf.ForOp(start, stop, _index(width))
            with ir.InsertionPoint(loop.body):
                body([*ivs, loop.induction_variable], width)
                scf.YieldOp([])

    if len(sizes) == 1:
        last([], *(first or (_index(0), sizes[0])))
    else:
        _loops(sizes[:-1], lambda ivs: last(ivs, _index(0), sizes[-1]), first)


def _launch(n: _Nest, fn: ir.Operation, name: str, rows: bool) -> None:
    """The nest as kernel `@name(lo, hi, x, outs...)` over the positions [lo, hi) it splits
    (`_rows`, `_slices`), called at the nest's place: through its `__parallel` launcher
    (libgomp's threads, dg-gomp-launchers) where it has PARALLEL_MIN_WORK elements and
    two positions to share, else directly."""
    buffers = n.buffers()
    index = ir.IndexType.get()
    params = [index, index] + [b.type for b in buffers]
    with ir.InsertionPoint(fn):
        kernel = func.FuncOp(name, ir.FunctionType.get(params, []), visibility="private")
        launcher = func.FuncOp(name + PARALLEL_SUFFIX, ir.FunctionType.get(params[1:], []),
                               visibility="private")
    mark_kernel(kernel.operation, buffers, 2)
    with ir.InsertionPoint(kernel.add_entry_block()):
        lo, hi, *args = kernel.entry_block.arguments
        (_rows if rows else _slices)(n, args[0], n.with_buffers(args), lo, hi)
        func.ReturnOp([])
    sizes = [_size(n.x, d) for d in range(n.rank)]
    split = sizes[:-1] if rows else sizes[:n.dim] or sizes[n.dim + 1:n.dim + 2]
    count = _product(split)
    threads = arith.andi(
        arith.cmpi(arith.CmpIPredicate.uge, _product(sizes), _index(PARALLEL_MIN_WORK)),
        arith.cmpi(arith.CmpIPredicate.uge, count, _index(2)))
    branch = scf.IfOp(threads, [], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        func.CallOp([], ir.FlatSymbolRefAttr.get(name + PARALLEL_SUFFIX), [count, *buffers])
        scf.YieldOp([])
    with ir.InsertionPoint(branch.else_block):
        func.CallOp([], ir.FlatSymbolRefAttr.get(name), [_index(0), count, *buffers])
        scf.YieldOp([])


def _rewrite(fn: ir.Operation, taken: set[str]) -> int:
    count = 0
    base = ir.StringAttr(fn.attributes["sym_name"]).value
    for op in list(fn.regions[0].blocks[0].operations):
        op = op.operation
        if op.name != "scf.for" or SCAN_ATTR not in op.attributes:
            continue
        n = _nest(op)
        if n is None:
            continue
        rows = n.dim == n.rank - 1
        if rows and not n.vectors:
            continue
        k = 0
        while f"{base}_scan{k}" in taken:
            k += 1
        taken.add(f"{base}_scan{k}")
        with ir.InsertionPoint(op), op.location:
            _launch(n, fn, f"{base}_scan{k}", rows)
        op.erase()
        count += 1
    return count


def cpu_scans(module: ir.Operation) -> None:
    taken = symbols(module.regions[0].blocks[0])
    for fn in list(functions(module)):
        count = _rewrite(fn, taken)
        if count:
            log.debug("dg-cpu-scans: @%s: %d scans as kernels",
                      ir.StringAttr(fn.attributes["sym_name"]).value, count)

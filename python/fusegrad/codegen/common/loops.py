"""Linalg ops on memrefs as loop nests, and the reductions' combiners: what both kernel
generators (codegen/cpu/kernels.py, codegen/cuda/kernels.py) start from.

`parse` reads a `linalg.generic`, `linalg.fill`, copy or transpose on static memrefs as a
`LoopOp`: its loop sizes and iterator kinds, and for each operand the loop dim that
indexes each of its dims (`accesses`). `clone_body` emits the op's scalar computation
at given loop indices, so a target decides the loops and the loads and stores alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Container, Optional, Sequence

from mlir import ir
from mlir.dialects import arith

from ...passes import PassError
from .memrefs import Access, contiguous_memref, static_memref

# combiners of parallel reductions: the float ones' identities; the integer ones' as a
# function of the width (signed extremes for maxsi/minsi, all ones for minui/andi)
FLOAT_IDENTITY = {"arith.addf": 0.0, "arith.mulf": 1.0, "arith.maximumf": float("-inf"),
             "arith.minimumf": float("inf"), "arith.maxnumf": float("-inf"),
             "arith.minnumf": float("inf")}
INT_IDENTITY: dict[str, Callable[[int], int]] = {
    "arith.addi": lambda w: 0, "arith.muli": lambda w: 1, "arith.ori": lambda w: 0,
    "arith.xori": lambda w: 0, "arith.andi": lambda w: -1, "arith.maxui": lambda w: 0,
    "arith.minui": lambda w: -1, "arith.maxsi": lambda w: -(1 << (w - 1)),
    "arith.minsi": lambda w: (1 << (w - 1)) - 1}


def identity(combiner: str, t: ir.Type) -> ir.Value:
    """The combiner's identity as a constant of type `t` (float or integer)."""
    if combiner in INT_IDENTITY:
        width = ir.IntegerType(t).width
        return arith.ConstantOp(t, ir.IntegerAttr.get(t, INT_IDENTITY[combiner](width))).result
    return arith.ConstantOp(t, ir.FloatAttr.get(t, FLOAT_IDENTITY[combiner])).result


def combine(combiner: str, a: ir.Value, b: ir.Value) -> ir.Value:
    op = ir.Operation.create(combiner, results=[a.type], operands=[a, b])
    mark_reassoc([op.results[0]])
    return op.results[0]


def mark_reassoc(results: Sequence[ir.Value]) -> None:
    """Float combiners may reassociate (integer ones always can, and take no flag): LLVM
    vectorizes a reduction loop only with `fastmath<reassoc>` on its combiner."""
    for v in results:
        if not isinstance(v.owner, ir.Block) and v.owner.operation.name in FLOAT_IDENTITY:
            v.owner.operation.attributes["fastmath"] = ir.Attribute.parse(
                "#arith.fastmath<reassoc>")


def _accesses(maps: Sequence[ir.AffineMap], n_ins: int,
               affine_ins: bool = False) -> Optional[list[Access]]:
    out = []
    for k, m in enumerate(maps):
        acc = []
        for e in m.results:
            if isinstance(e, ir.AffineDimExpr):
                acc.append(e.position)
            elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
                acc.append(None)
            elif affine_ins and k < n_ins:
                acc.append(e)
            else:
                return None
        out.append(tuple(acc))
    return out


@dataclass
class LoopOp:
    """A linalg.generic or linalg.fill as a loop nest: sizes, iterators, accesses."""

    op: ir.Operation
    ins: list
    outs: list
    accesses: list  # per in, then per out
    sizes: list
    iterators: list
    fill: Optional[ir.Value] = None  # the scalar of a linalg.fill
    copy: bool = False  # a memref.copy: the body is the loaded input
    captured: list = field(default_factory=list)  # values from above used by the body

    @property
    def work(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def buffers(self):
        """(buffer, access or None for unknown, writes?) for every memref it touches."""
        for v, a in zip(self.ins, self.accesses):
            yield v, a, False
        for v, a in zip(self.outs, self.accesses[len(self.ins):]):
            yield v, a, True
        for v in self.captured:
            if isinstance(v.type, ir.MemRefType):
                yield v, None, False


def _captured(block: ir.Block, root_op: ir.Operation, regions: bool) -> Optional[list]:
    """Values the body uses but does not define; None if the body has regions, unless
    `regions` allows those whose ops read only values from outside the body or their
    own (the `scf.if` of a checked index storing its site, conversion/index_check.py)."""
    defined = set(block.arguments)
    out: list = []

    def nested_uses(op: ir.Operation) -> Optional[list]:
        inner_defs: set = set()
        uses: list = []
        for region in op.regions:
            for b in region.blocks:
                inner_defs.update(b.arguments)
                for o in b.operations:
                    o = o.operation
                    found = nested_uses(o)
                    if found is None:
                        return None
                    uses += found + [v for v in o.operands if v not in inner_defs]
                    inner_defs.update(o.results)
        if any(v in defined for v in uses):
            return None  # the region reads a value of the body: not cloned faithfully
        return uses

    for inner in block.operations:
        inner = inner.operation
        operands = list(inner.operands)
        if len(inner.regions):
            nested = nested_uses(inner) if regions else None
            if nested is None:
                return None
            operands += nested
        for v in operands:
            if v not in defined and v not in out:
                out.append(v)
        defined.update(inner.results)
    return out


def parse(op: ir.Operation, regions: bool = False,
          affine_ins: bool = False) -> Optional[LoopOp]:
    """The op as a LoopOp, or None. `regions`: also generics whose body holds regions
    that read nothing of the body (see `_captured`). `affine_ins`: also generics reading
    inputs through other affine expressions (a flip's `n - 1 - d`), kept in the access
    as the `ir.AffineExpr` (the GPU kernels evaluate them; outputs stay plain)."""
    if op.name == "linalg.fill":
        view = op.opview
        (value,), (buf,) = list(view.inputs), list(view.outputs)
        if not static_memref(buf.type):
            return None
        rank = ir.MemRefType(buf.type).rank
        return LoopOp(op, [], [buf], [tuple(range(rank))], list(buf.type.shape),
                      ["parallel"] * rank, fill=value)
    if op.name == "memref.copy":
        src, dst = op.operands
        if not (contiguous_memref(src.type) and contiguous_memref(dst.type)):
            return None
        rank = ir.MemRefType(dst.type).rank
        if rank == 0:
            return None
        ident = tuple(range(rank))
        return LoopOp(op, [src], [dst], [ident, ident], list(dst.type.shape),
                      ["parallel"] * rank, copy=True)
    if op.name in ("linalg.transpose", "linalg.copy"):  # a strided copy: the identity perm
        src, dst = op.operands
        if not (static_memref(src.type) and static_memref(dst.type)) or \
                src.type.element_type != dst.type.element_type:
            return None
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"])) \
            if op.name == "linalg.transpose" else list(range(dst.type.rank))
        if not perm:
            return None
        # dst[i_0, .., i_n] = src[j] where src dim perm[k] is read with loop dim k
        read = [perm.index(j) for j in range(len(perm))]
        rank = len(perm)
        return LoopOp(op, [src], [dst], [tuple(read), tuple(range(rank))], list(dst.type.shape),
                      ["parallel"] * rank)
    if op.name != "linalg.generic":
        return None
    g = op.opview
    if len(g.regions[0].blocks) != 1:
        return None
    maps = [ir.AffineMapAttr(a).value for a in g.indexing_maps]
    ins, outs = list(g.inputs), list(g.outputs)
    accesses = _accesses(maps, len(ins), affine_ins)
    if accesses is None:
        return None
    n = maps[0].n_dims
    sizes: list = [None] * n
    for v, acc in zip((*ins, *outs), accesses):
        if not static_memref(v.type):
            return None
        for d, s in zip(acc, v.type.shape):
            if isinstance(d, int):
                sizes[d] = s
    if any(s is None for s in sizes):
        return None
    captured = _captured(g.regions[0].blocks[0], op, regions)
    if captured is None:
        return None
    iterators = [str(a).split("<")[-1].rstrip(">") for a in g.iterator_types]
    return LoopOp(op, ins, outs, accesses, sizes, iterators, captured=captured)


def clone_body(lop: LoopOp, load: Callable, out_values: Sequence[Optional[ir.Value]],
               ivs: Sequence[ir.Value], value: Callable = lambda v: v, *,
               copy: bool = False) -> list:
    """`lop`'s scalar results at loop indices `ivs`, emitted at the current insertion
    point (shared by the CPU and GPU kernel passes): a fill's scalar, a copy's loaded
    input, or a generic's body cloned with its inputs from `load(buffer, access)`, its
    outs from `out_values` (None: loaded) and values from above through `value`."""
    if lop.fill is not None:
        return [value(lop.fill)]
    if copy:
        return [load(lop.ins[0], lop.accesses[0])]
    block = lop.op.regions[0].blocks[0]
    args = list(block.arguments)
    n_in = len(lop.ins)
    outs_access = lop.accesses[n_in:]
    mapping: dict = {}
    for buf, acc, arg in zip(lop.ins, lop.accesses, args[:n_in]):
        if len(list(arg.uses)):
            mapping[arg] = load(buf, acc)
    for k, arg in enumerate(args[n_in:]):
        if len(list(arg.uses)):
            v = out_values[k]
            mapping[arg] = v if v is not None else load(lop.outs[k], outs_access[k])
    for inner in block.operations:
        inner = inner.operation
        if inner.name == "linalg.yield":
            return [mapping[v] if v in mapping else value(v) for v in inner.operands]
        if inner.name == "linalg.index":
            mapping[inner.results[0]] = ivs[ir.IntegerAttr(inner.attributes["dim"]).value]
            continue
        clone = inner.clone()
        for i, v in enumerate(clone.operands):
            clone.operands[i] = mapping[v] if v in mapping else value(v)
        mapping.update(zip(inner.results, clone.results))
    raise PassError("linalg.generic has no linalg.yield", lop.op.location)


def reduction_combiners(lop: LoopOp, allowed: Container[str],
                        sole_use: bool = False) -> Optional[list[str]]:
    """Per output, the op combining the accumulator with a new value, when every output
    of the body has the form `acc = combiner(acc, value)` with a combiner in `allowed`
    (and, with `sole_use`, the accumulator read by nothing else); else None."""
    if lop.fill is not None or lop.copy:
        return None
    block = lop.op.regions[0].blocks[0]
    outs = list(block.arguments)[len(lop.ins):]
    yields = [o for o in block.operations if o.operation.name == "linalg.yield"]
    names = []
    for acc, v in zip(outs, yields[0].operation.operands):
        if isinstance(v.owner, ir.Block):
            return None
        owner = v.owner.operation
        if owner.name not in allowed or acc not in list(owner.operands):
            return None
        if sole_use and len(list(acc.uses)) != 1:
            return None
        names.append(owner.name)
    return names

"""Linalg ops on memrefs as loop nests, and the reductions' combiners: what both kernel
generators (codegen/cpu/kernels.py, codegen/cuda/kernels.py) start from.

`parse` reads a `linalg.generic`, `linalg.fill`, copy or transpose on memrefs as a
`LoopOp`: its loop sizes and iterator kinds, and for each operand the loop dim that
indexes each of its dims (`accesses`). `clone_body` emits the op's scalar computation
at given loop indices, so a target decides the loops and the loads and stores alone.

A loop size is an `int`, or with `parse(..., sizes=SizeClasses(block))` a `DynSize`: a
size only the run time knows (a memref dim `?`), which names the operand dims that
have it (`memref.dim` of one reads it), estimates it at DEFAULT_SIZE_HINT for cost
models, and compares equal to the sizes of other ops that provably have the same value
(`SizeClasses`). Without `sizes` (the GPU kernels) an op over dynamic memrefs is None.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Container, Optional, Sequence

from mlir import ir
from mlir.dialects import arith

from ...passes import PassError
from .memrefs import Access, contiguous_memref, static_memref
from ...dialects.types import DEFAULT_SIZE_HINT

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


def combine(combiner: str, a: ir.Value, b: ir.Value, reassoc: bool = True) -> ir.Value:
    """combiner(a, b); `reassoc=False` keeps LLVM from reordering it (a blocked sum's tree,
    codegen/cpu/blocked_sums.py)."""
    op = ir.Operation.create(combiner, results=[a.type], operands=[a, b])
    if reassoc:
        mark_reassoc([op.results[0]])
    return op.results[0]


def mark_reassoc(results: Sequence[ir.Value]) -> None:
    """Float combiners may reassociate (integer ones always can, and take no flag): LLVM
    vectorizes a reduction loop only with `fastmath<reassoc>` on its combiner."""
    for v in results:
        if not isinstance(v.owner, ir.Block) and v.owner.operation.name in FLOAT_IDENTITY:
            v.owner.operation.attributes["fastmath"] = ir.Attribute.parse(
                "#arith.fastmath<reassoc>")


def neutral(combiner: str, t: ir.Type) -> ir.Value:
    """Where a partial result starts: the identity, but -0.0 for a sum (x + -0.0 is x for
    every x, which LLVM folds; x + 0.0 is not, for x = -0.0)."""
    if combiner == "arith.addf":
        return arith.ConstantOp(t, -0.0).result
    return identity(combiner, t)


def wider(t: ir.Type) -> ir.Type:
    """The type a float sum of `t` accumulates in to stay accurate: f64 for f32 (and f64),
    f32 for 16-bit floats (codegen/cpu/blocked_sums.py, codegen/cuda/wide_sums.py)."""
    if isinstance(t, (ir.F16Type, ir.BF16Type)):
        return ir.F32Type.get()
    return ir.F64Type.get() if isinstance(t, ir.FloatType) else t


def convert(v: ir.Value, t: ir.Type) -> ir.Value:
    """`v` as a float of type `t` (extended or rounded), or itself."""
    if v.type == t:
        return v
    if ir.FloatType(v.type).width < ir.FloatType(t).width:
        return arith.extf(t, v)
    return arith.truncf(t, v)


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


class SizeClasses:
    """Which run-time sizes of one block's memrefs are provably equal: a union-find over
    dynamic memref dims `(value, dim)` and index values, joining an alloc's dims with its
    size operands, `memref.dim` with its result, a cast's or reshape's dims with its
    source's, a copy's source with its destination, and the operand dims that one loop of
    a linalg op indexes (a valid program gives them one size; the runtime checks the
    entry's arguments against its symbolic sizes). Built once before a pass rewrites the
    block: the keys of sizes parsed later are then stable."""

    def __init__(self, block: Optional[ir.Block] = None) -> None:
        self.parent: dict = {}
        if block is None:
            return
        for op in block.operations:
            self._visit(op.operation)

    def find(self, node) -> object:
        root = node
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[node] != root:  # path compression
            self.parent[node], node = root, self.parent[node]
        return root

    def union(self, a, b) -> None:
        self.parent.setdefault(a, a)
        self.parent.setdefault(b, b)
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb

    def _dims(self, v: ir.Value, sizes: Sequence[ir.Value]) -> None:
        """`v`'s dynamic dims are `sizes`, in order."""
        dynamic = [d for d, s in enumerate(ir.MemRefType(v.type).shape)
                   if ir.ShapedType.is_dynamic_size(s)]
        if len(dynamic) == len(sizes):
            for d, size in zip(dynamic, sizes):
                self.union((v, d), size)

    def _same(self, a: ir.Value, da: int, b: ir.Value, db: int) -> None:
        ta, tb = ir.MemRefType(a.type), ir.MemRefType(b.type)
        if ir.ShapedType.is_dynamic_size(ta.shape[da]) and \
                ir.ShapedType.is_dynamic_size(tb.shape[db]):
            self.union((a, da), (b, db))

    def _visit(self, op: ir.Operation) -> None:
        name = op.name
        if name in ("memref.alloc", "memref.alloca"):
            if len(op.results) == 1 and isinstance(op.results[0].type, ir.MemRefType):
                sizes = [v for v in op.operands if isinstance(v.type, ir.IndexType)]
                self._dims(op.results[0], sizes)
        elif name == "memref.dim":
            source, index = op.operands
            d = _constant_index(index)
            if d is not None and isinstance(source.type, ir.MemRefType) and \
                    0 <= d < ir.MemRefType(source.type).rank and \
                    ir.ShapedType.is_dynamic_size(ir.MemRefType(source.type).shape[d]):
                self.union((source, d), op.results[0])
        elif name in ("memref.cast", "memref.copy"):
            a, b = op.operands[0], op.results[0] if name == "memref.cast" else op.operands[1]
            if isinstance(a.type, ir.MemRefType) and isinstance(b.type, ir.MemRefType) and \
                    ir.MemRefType(a.type).rank == ir.MemRefType(b.type).rank:
                for d in range(ir.MemRefType(a.type).rank):
                    self._same(a, d, b, d)
        elif name in ("memref.collapse_shape", "memref.expand_shape"):
            source, result = op.operands[0], op.results[0]
            groups = [[ir.IntegerAttr(d).value for d in ir.ArrayAttr(g)]
                      for g in ir.ArrayAttr(op.attributes["reassociation"])]
            for k, g in enumerate(groups):
                if len(g) == 1:
                    if name == "memref.collapse_shape":
                        self._same(source, g[0], result, k)
                    else:
                        self._same(source, k, result, g[0])
            if name == "memref.expand_shape":
                self._dims(result, list(op.operands[1:]))
        elif name in ("memref.subview", "memref.reinterpret_cast"):
            static = [list(ir.DenseI64ArrayAttr(op.attributes[a]))
                      for a in ("static_offsets", "static_sizes")]
            result = op.results[0]
            if len(static[1]) == ir.MemRefType(result.type).rank:
                # operands: the source, then the dynamic offsets, sizes and strides
                dynamic = [sum(ir.ShapedType.is_dynamic_size(x) for x in a) for a in static]
                start = 1 + dynamic[0]
                self._dims(result, list(op.operands[start:start + dynamic[1]]))
        elif name == "memref.reshape":
            self._reshape(op)
        elif name in _PARSED and any(isinstance(v.type, ir.MemRefType) and
                                     not ir.MemRefType(v.type).has_static_shape
                                     for v in op.operands):
            lop = parse(op, sizes=SizeClasses())
            if lop is None:
                return
            for size in lop.sizes:
                if isinstance(size, DynSize):
                    for src in size.sources[1:]:
                        self.union(size.sources[0], src)

    def _reshape(self, op: ir.Operation) -> None:
        """A memref.reshape's dims are the values stored at their index of its shape
        buffer, when that buffer is an alloc of one block whose every element is stored
        once, by stores before the reshape, and which nothing else writes."""
        result, shape = op.results[0], op.operands[1]
        owner = shape.owner
        if isinstance(owner, ir.Block) or owner.operation.name != "memref.alloc" or \
                owner.operation.block != op.block or \
                not ir.MemRefType(shape.type).has_static_shape:
            return
        stored: dict = {}
        for use in shape.uses:
            user = use.owner.operation
            if user.name == "memref.store" and use.operand_number == 1 and \
                    user.block == op.block and user.is_before_in_block(op) and \
                    len(user.operands) == 3:
                k = _constant_index(user.operands[2])
                if k is None or k in stored:
                    return
                stored[k] = user.operands[0]
            elif user.name not in ("memref.reshape", "memref.dealloc"):
                return
        rank = ir.MemRefType(result.type).rank
        if sorted(stored) != list(range(rank)):
            return
        for d in range(rank):
            if ir.ShapedType.is_dynamic_size(ir.MemRefType(result.type).shape[d]):
                self.union((result, d), stored[d])

    def same(self, a, b) -> bool:
        """Are nodes `a` and `b` (memref dims `(value, dim)` or index values) provably
        equal?"""
        return a == b or (a in self.parent and b in self.parent and
                          self.find(a) == self.find(b))

    def key(self, sources: Sequence[tuple]) -> object:
        """The class of a size that `sources` (memref dims) have: known sizes by their
        root, others by a key no other size has."""
        for src in sources:
            if src in self.parent:
                return self.find(src)
        return _Fresh()


class _Fresh:
    """The key of a size no SizeClasses knows: equal to nothing else."""


_PARSED = ("linalg.generic", "linalg.fill", "linalg.transpose", "linalg.copy", "memref.copy")


def _constant_index(v: ir.Value) -> Optional[int]:
    owner = v.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "arith.constant":
        return None
    attr = owner.operation.attributes["value"]
    return ir.IntegerAttr(attr).value if isinstance(attr, ir.IntegerAttr) else None


class DynSize:
    """A loop size known at run time only. `sources`: (buffer, dim) pairs of the op's
    operands with that size; `key`: equal keys, equal sizes (`SizeClasses`); `hint`: the
    estimate cost models use (DEFAULT_SIZE_HINT, as dg's for a symbol without a hint)."""

    __slots__ = ("sources", "key", "hint")

    def __init__(self, sources: Sequence[tuple], key: object,
                 hint: int = DEFAULT_SIZE_HINT) -> None:
        self.sources = list(sources)
        self.key = key
        self.hint = hint

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DynSize) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"DynSize(~{self.hint})"


def size_hint(size) -> int:
    """A loop size, or a run-time one's estimate."""
    return size.hint if isinstance(size, DynSize) else size


def is_dynamic(size) -> bool:
    return isinstance(size, DynSize)


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
        """Loop iterations (run-time sizes at their estimate)."""
        n = 1
        for s in self.sizes:
            n *= size_hint(s)
        return n

    @property
    def dynamic(self) -> bool:
        """Does a loop size only the run time knows?"""
        return any(isinstance(s, DynSize) for s in self.sizes)

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


def _identity_memref(t: ir.Type) -> bool:
    """A memref of any sizes with the identity layout (row-major, offset 0)."""
    if not isinstance(t, ir.MemRefType):
        return False
    t = ir.MemRefType(t)
    return t.rank == 0 or (isinstance(t.layout, ir.AffineMapAttr) and
                           t.layout.value == ir.AffineMap.get_identity(t.rank))


def _loop_sizes(n: int, operands: Sequence[tuple[ir.Value, Access]],
                classes: Optional[SizeClasses]) -> Optional[list]:
    """Per loop dim its size: static where an operand dim it indexes is static, else a
    DynSize over the operand dims it indexes (None without `classes`, or when a loop dim
    indexes nothing)."""
    static: list = [None] * n
    dynamic: list = [[] for _ in range(n)]
    for v, acc in operands:
        t = ir.MemRefType(v.type)
        for dim, (d, s) in enumerate(zip(acc, t.shape)):
            if not isinstance(d, int):
                continue
            if ir.ShapedType.is_dynamic_size(s):
                dynamic[d].append((v, dim))
            else:
                static[d] = s
    sizes: list = []
    for d in range(n):
        if static[d] is not None:
            sizes.append(static[d])
        elif dynamic[d] and classes is not None:
            sizes.append(DynSize(dynamic[d], classes.key(dynamic[d])))
        else:
            return None
    return sizes


def parse(op: ir.Operation, regions: bool = False, affine_ins: bool = False,
          sizes: Optional[SizeClasses] = None) -> Optional[LoopOp]:
    """The op as a LoopOp, or None. `regions`: also generics whose body holds regions
    that read nothing of the body (see `_captured`). `affine_ins`: also generics reading
    inputs through other affine expressions (a flip's `n - 1 - d`), kept in the access
    as the `ir.AffineExpr` (the GPU kernels evaluate them; outputs stay plain).
    `sizes`: also ops over memrefs of run-time sizes, whose loop sizes are then DynSizes
    keyed by these classes (else such an op is None)."""
    def shaped(t: ir.Type) -> bool:  # a memref whose sizes this parse accepts
        return static_memref(t) or (sizes is not None and isinstance(t, ir.MemRefType))

    if op.name == "linalg.fill":
        view = op.opview
        (value,), (buf,) = list(view.inputs), list(view.outputs)
        if not shaped(buf.type):
            return None
        rank = ir.MemRefType(buf.type).rank
        ident = tuple(range(rank))
        loop_sizes = _loop_sizes(rank, [(buf, ident)], sizes)
        if loop_sizes is None:
            return None
        return LoopOp(op, [], [buf], [ident], loop_sizes, ["parallel"] * rank, fill=value)
    if op.name == "memref.copy":
        src, dst = op.operands
        if not (contiguous_memref(src.type) and contiguous_memref(dst.type)) and not (
                sizes is not None and _identity_memref(src.type) and
                _identity_memref(dst.type)):
            return None
        rank = ir.MemRefType(dst.type).rank
        if rank == 0:
            return None
        ident = tuple(range(rank))
        loop_sizes = _loop_sizes(rank, [(src, ident), (dst, ident)], sizes)
        if loop_sizes is None:
            return None
        return LoopOp(op, [src], [dst], [ident, ident], loop_sizes,
                      ["parallel"] * rank, copy=True)
    if op.name in ("linalg.transpose", "linalg.copy"):  # a strided copy: the identity perm
        src, dst = op.operands
        if not (shaped(src.type) and shaped(dst.type)) or \
                src.type.element_type != dst.type.element_type:
            return None
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"])) \
            if op.name == "linalg.transpose" else list(range(dst.type.rank))
        if not perm:
            return None
        # dst[i_0, .., i_n] = src[j] where src dim perm[k] is read with loop dim k
        read = [perm.index(j) for j in range(len(perm))]
        rank = len(perm)
        accesses = [tuple(read), tuple(range(rank))]
        loop_sizes = _loop_sizes(rank, [(src, accesses[0]), (dst, accesses[1])], sizes)
        if loop_sizes is None:
            return None
        return LoopOp(op, [src], [dst], accesses, loop_sizes, ["parallel"] * rank)
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
    if not all(shaped(v.type) for v in (*ins, *outs)):
        return None
    loop_sizes = _loop_sizes(n, list(zip((*ins, *outs), accesses)), sizes)
    if loop_sizes is None:
        return None
    captured = _captured(g.regions[0].blocks[0], op, regions)
    if captured is None:
        return None
    iterators = [str(a).split("<")[-1].rstrip(">") for a in g.iterator_types]
    return LoopOp(op, ins, outs, accesses, loop_sizes, iterators, captured=captured)


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

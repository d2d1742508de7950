"""What a fusion region may hold, and how it becomes one loop nest of linalg.

This module is the single source of truth for fusion legality: `dg-fuse`
forms only regions that `plan_region` accepts, and the `fusion` lowering rule
(dialects/region_ops.py) lowers them with `lower_region`.

Every value inside a region is read through an *access map* from the loops
of the linalg.generic that evaluates it: a tuple with, per dim of the value,
the loop dim that indexes it or None (the constant index 0, for broadcast
dims of size 1). Pointwise ops keep the map, `broadcast_in_dim`, `transpose`
and unit-dim `reshape` permute or project it, sources (`full`, `iota`, splat
`constant`) become scalars in the body. So a region lowers to:

- at most one reduction generic: sibling reductions over the same operand
  shape and dims, whose body composes their pointwise prologue;
- one all-parallel generic per output shape (at most one shape without a
  reduction; the reduction's full and reduced shapes with one), whose body
  composes every op from the region inputs and the reduction results.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from mlir import ir
from mlir.dialects import arith

from ..dialects.core import Kind, attrs_of, lookup
from ..dialects.reduction import accumulator_dtype, round_to, widen
from ..dialects.region_ops import fusion_body, fusion_inputs
from ..dialects.shape_ops import pad_value
from ..dialects.types import TensorSpec, is_float, size_hints
from . import linalg_builders as lb

Map = tuple  # per value dim: loop dim index, or None for the constant index 0

REDUCTIONS = ("reduce_sum", "reduce_max", "reduce_min")
# pointwise ops that cost tens of instructions per element (a polynomial, a division)
TRANSCENDENTAL = ("exp", "expm1", "log", "log1p", "tanh", "erf", "sin", "cos", "pow", "sigmoid",
                  "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "erfc",
                  "exp2", "atan2")
INDEX_OPS = ("broadcast_in_dim", "transpose", "reshape")


def _spec(v: ir.Value) -> TensorSpec:
    return TensorSpec.from_mlir(v.type)


def _unit_reshape_dims(src: Sequence[int], dst: Sequence[int]) -> Optional[list]:
    """For a reshape that only adds/drops size-1 dims: per src dim, its dst dim (None if size 1)."""
    if [s for s in src if s != 1] != [s for s in dst if s != 1]:
        return None
    out, j = [], 0
    for s in src:
        if s == 1:
            out.append(None)
            continue
        while dst[j] == 1:
            j += 1
        out.append(j)
        j += 1
    return out


def fusible(op: ir.Operation) -> bool:
    """Can `op` sit inside a fusion region (given compatible neighbours)?"""
    name = op.name[3:] if op.name.startswith("dg.") else op.name
    try:
        d = lookup(name)
    except KeyError:
        return False
    if d.kind is Kind.ELEMENTWISE:
        return d.scalar is not None
    if name in REDUCTIONS or name in ("broadcast_in_dim", "transpose", "full"):
        return True
    if name == "iota":
        return _spec(op.results[0]).dtype != "i1"
    if name == "constant":
        return ir.DenseElementsAttr(op.attributes["value"]).is_splat
    if name == "reshape":
        return _unit_reshape_dims(_spec(op.operands[0]).shape,
                                  _spec(op.results[0]).shape) is not None
    return False


def duplicable(op: ir.Operation) -> bool:
    """Cheap ops that may be cloned into every consumer region (no arithmetic)."""
    name = op.name[3:]
    return name in ("full", "iota", "broadcast_in_dim", "transpose") or (
        name in ("constant", "reshape") and fusible(op))


def operand_map(op: ir.Operation, result_map: Map, i: int) -> Map:
    """Access map of operand `i` of `op` when its result is read through `result_map`."""
    name = op.name[3:]
    if name == "broadcast_in_dim":
        x, out = _spec(op.operands[0]).shape, _spec(op.results[0]).shape
        dims = attrs_of(op)["dims"]
        return tuple(result_map[d] if x[k] == out[d] else None for k, d in enumerate(dims))
    if name == "transpose":
        m = [None] * len(result_map)
        for k, p in enumerate(attrs_of(op)["perm"]):
            m[p] = result_map[k]
        return tuple(m)
    if name == "reshape":
        dims = _unit_reshape_dims(_spec(op.operands[0]).shape, _spec(op.results[0]).shape)
        return tuple(None if d is None else result_map[d] for d in dims)
    return result_map  # pointwise


@dataclass
class Plan:
    """How a region lowers: its reductions (one generic) and outputs grouped by shape."""

    reductions: list = field(default_factory=list)  # reduction ops, one generic
    parallel: dict = field(default_factory=dict)  # shape -> output values, one generic each

    @property
    def loop_nests(self) -> int:
        return (1 if self.reductions else 0) + len(self.parallel)


def _owner_in(v: ir.Value, members: set) -> Optional[ir.Operation]:
    owner = v.owner
    if isinstance(owner, ir.Block):
        return None
    owner = owner.operation
    return owner if owner in members else None


def plan_region(ops: Sequence[ir.Operation], outputs: Iterable[ir.Value], *,
                fusible_checked: bool = False) -> Plan | str:
    """The lowering plan of a region holding `ops` and exporting `outputs`, or why it cannot
    be one. `fusible_checked`: the caller knows every op is `fusible` (dg-fuse asks for
    thousands of unions of the same ops)."""
    members = {op.operation for op in ops}
    if not fusible_checked:
        for op in ops:
            if not fusible(op):
                return f"'{op.name}' cannot be fused"
    reductions = [op for op in ops if op.name[3:] in REDUCTIONS]
    plan = Plan(reductions=reductions)
    if reductions:
        keys = {(_spec(r.operands[0]).shape, tuple(sorted(attrs_of(r)["dims"]))) for r in reductions}
        if len(keys) > 1:
            return "reductions over different iteration spaces"
        # no reduction may consume (within the region) another reduction's result
        red_set = {r.operation for r in reductions}
        for r in reductions:
            stack, seen = [r.operands[0]], set()
            while stack:
                owner = _owner_in(stack.pop(), members)
                if owner is None or owner in seen:
                    continue
                if owner in red_set:
                    return "a reduction depends on another reduction of the region"
                seen.add(owner)
                stack.extend(owner.operands)
        full_shape, dims = next(iter(keys))
        reduced = tuple(s for k, s in enumerate(full_shape) if k not in dims)
        allowed = {full_shape, reduced}
    red_results = {r.results[0] for r in reductions}
    for v in outputs:
        if v in red_results:
            continue
        shape = _spec(v).shape
        plan.parallel.setdefault(shape, []).append(v)
    if reductions:
        if not set(plan.parallel) <= allowed:
            return "an output does not map onto the reduction's iteration space"
    elif len(plan.parallel) > 1:
        return "pointwise outputs of different shapes"
    return plan


class _Body:
    """Composes the scalar rules of region ops inside one linalg.generic body."""

    def __init__(self, leaves: dict) -> None:
        self.leaves = leaves  # region value -> tensor value outside the generic
        self.reads: dict = {}  # (value, map) -> input position, in first-use order
        self.memo: dict = {}
        self.collected: set = set()  # (value, map) pairs whose reads are recorded
        self.variance: dict = {}  # (value, map) -> depends on the innermost loop?
        self.n_loops = 0  # of the generic being emitted

    def collect(self, v: ir.Value, m: Map) -> None:
        # each (value, map) once: a region whose values are read many times (a pooling
        # window's maxima) is a DAG, and walking it as a tree took exponential time
        if (v, m) in self.collected:
            return
        self.collected.add((v, m))
        if v in self.leaves:
            self.reads[(v, m)] = len(self.reads)
            return
        op = v.owner.operation
        for i, x in enumerate(op.operands):
            self.collect(x, operand_map(op, m, i))

    def inputs_and_maps(self, n_loops: int) -> tuple[list, list]:
        ins, maps = [], []
        for (v, m) in self.reads:
            ins.append(self.leaves[v])
            maps.append(_affine(n_loops, m))
        return ins, maps

    def emit(self, v: ir.Value, m: Map, args: Sequence[ir.Value]) -> ir.Value:
        key = (v, m)
        if key in self.memo:
            return self.memo[key]
        if v in self.leaves:
            r = args[self.reads[key]]
        else:
            r = self._emit_op(v.owner.operation, m, args)
        self.memo[key] = r
        return r

    def _emit_op(self, op: ir.Operation, m: Map, args: Sequence[ir.Value]) -> ir.Value:
        name = op.name[3:]
        out = _spec(op.results[0])
        attrs = attrs_of(op)
        if name == "full":
            return lb.const(out.dtype, pad_value(out.dtype, attrs["value"]))
        if name == "constant":
            splat = ir.DenseElementsAttr(attrs["value"]).get_splat_value()
            return arith.ConstantOp(lb.element_type(out.dtype), splat).result
        if name == "iota":
            loop = m[attrs["dim"]]
            idx = lb.index(0) if loop is None else lb.loop_index(loop)
            if is_float(out.dtype):
                return arith.sitofp(lb.element_type(out.dtype), lb.index_cast(idx, "i64"))
            return lb.index_cast(idx, out.dtype)
        if name in INDEX_OPS:
            return self.emit(op.operands[0], operand_map(op, m, 0), args)
        d = lookup(name)
        xs = [self.emit(x, m, args) for x in op.operands]
        if name == "div" and is_float(out.dtype) and self.n_loops and \
                not self.varies(op.operands[1], m) and not self.constant(op.operands[1]):
            # a divisor invariant along the innermost loop (a row's sum): one division per
            # row, hoisted by LLVM, and a multiplication per element (as eager's softmax).
            # A constant stays a division, as in eager's mean and var: times the rounded
            # reciprocal of 4095 a variance erred by up to an ulp more on every row (LLVM
            # multiplies where the reciprocal is exact, a power of two)
            return arith.mulf(xs[0], arith.divf(lb.const(out.dtype, 1.0), xs[1]))
        return d.scalar(xs, op=name, attrs=attrs, in_dtypes=[_spec(x).dtype for x in op.operands],
                        out_dtype=out.dtype)

    def constant(self, v: ir.Value) -> bool:
        """Is `v` a constant of the region (dg.full or dg.constant, through index ops)?"""
        while v not in self.leaves:
            op = v.owner.operation
            if op.name[3:] in ("full", "constant"):
                return True
            if op.name[3:] not in INDEX_OPS:
                return False
            v = op.operands[0]
        return False

    def varies(self, v: ir.Value, m: Map) -> bool:
        """Does `v`, read through `m`, depend on the innermost loop (the last loop dim)?"""
        inner = self.n_loops - 1
        key = (v, m)
        if key not in self.variance:
            if v in self.leaves:
                result = inner in m
            else:
                op = v.owner.operation
                name = op.name[3:]
                if name == "iota":
                    result = m[attrs_of(op)["dim"]] == inner
                else:
                    result = any(self.varies(x, operand_map(op, m, i))
                                 for i, x in enumerate(op.operands))
            self.variance[key] = result
        return self.variance[key]


def _affine(n_loops: int, m: Map) -> ir.AffineMap:
    exprs = [ir.AffineConstantExpr.get(0) if d is None else ir.AffineDimExpr.get(d) for d in m]
    return ir.AffineMap.get(n_loops, 0, exprs)


_COMBINE = {  # reduction -> (float, signed int, i1) combiner
    "reduce_sum": ("addf", "addi", None),
    "reduce_max": ("maximumf", "maxsi", "maxui"),
    "reduce_min": ("minimumf", "minsi", "minui"),
}


def _identity(name: str, dtype: str) -> float | int | bool:
    if name == "reduce_sum":
        return 0
    big = float("inf") if is_float(dtype) else (1 if dtype == "i1" else (1 << (int(dtype[1:]) - 1)) - 1)
    small = float("-inf") if is_float(dtype) else (0 if dtype == "i1" else -(1 << (int(dtype[1:]) - 1)))
    return small if name == "reduce_max" else big


def _combine(name: str, dtype: str, acc: ir.Value, x: ir.Value) -> ir.Value:
    f, i, b = _COMBINE[name]
    fn = f if is_float(dtype) else (b if dtype == "i1" else i)
    if fn is None:
        raise NotImplementedError(f"dg.{name} on {dtype} has no combiner")
    return getattr(arith, fn)(acc, x)


def _emit_reductions(reductions: list, leaves: dict) -> list[ir.Value]:
    full = _spec(reductions[0].operands[0]).shape
    dims = set(attrs_of(reductions[0])["dims"])
    n = len(full)
    ident = tuple(range(n))
    body = _Body(leaves)
    for r in reductions:
        body.collect(r.operands[0], ident)
    ins, maps = body.inputs_and_maps(n)
    body.n_loops = n
    kept = [k for k in range(n) if k not in dims]
    out_map = _affine(n, tuple(kept))
    covered = {d for (_, m) in body.reads for d in m if d is not None} | set(kept)
    if len(covered) < n:
        # no operand spans the loop domain (e.g. a broadcast reduced over its new dim):
        # an unused shape-carrying operand lets linalg derive the loop sizes
        ins.append(lb.empty(full, "i1"))
        maps.append(_affine(n, ident))
    inits, dtypes = [], []
    for r in reductions:
        s = _spec(r.results[0])
        dtypes.append(accumulator_dtype(r.name[3:], s.dtype))
        inits.append(lb.full(s.shape, dtypes[-1], _identity(r.name[3:], dtypes[-1])))
    iters = ["reduction" if k in dims else "parallel" for k in range(n)]

    def compute(args):
        accs = args[len(ins):]
        return [_combine(r.name[3:], dtype, acc,
                         widen(body.emit(r.operands[0], ident, args), dtype))
                for r, acc, dtype in zip(reductions, accs, dtypes)]
    totals = lb.generic(ins, inits, maps + [out_map] * len(inits), iters, compute)
    return [round_to(t, _spec(r.results[0]).dtype) for r, t in zip(reductions, totals)]


def _emit_parallel(shape: tuple, values: list, leaves: dict) -> list[ir.Value]:
    n = len(shape)
    ident = tuple(range(n))
    body = _Body(leaves)
    for v in values:
        body.collect(v, ident)
    ins, maps = body.inputs_and_maps(n)
    body.n_loops = n
    inits = [lb.empty(shape, _spec(v).dtype) for v in values]
    return lb.generic(ins, inits, maps + [_affine(n, ident)] * len(inits), ["parallel"] * n,
                      lambda args: [body.emit(v, ident, args) for v in values])


def _reached(roots: Iterable[ir.Value], m: Map, leaves: dict) -> set:
    """(value, access map) pairs a generic evaluating `roots` through `m` computes (up to
    the region's inputs and reduction results)."""
    seen: set = set()
    stack = [(v, m) for v in roots]
    while stack:
        v, vm = stack.pop()
        if v in leaves or (v, vm) in seen:
            continue
        seen.add((v, vm))
        op = v.owner.operation
        if op.name[3:] in REDUCTIONS:
            continue
        stack.extend((x, operand_map(op, vm, i)) for i, x in enumerate(op.operands))
    return seen


def _shared_transcendentals(ops: Sequence[ir.Operation], plan: Plan, leaves: dict,
                            row_bytes_max: int) -> list[ir.Value]:
    """Transcendental values that both the reduction and the full-shape outputs compute
    per element (a softmax backward's exp: once for the row's dot product, once for the
    gradient), when a row of them takes at most `row_bytes_max` bytes; in region order.
    Evaluated once, into a tensor the CPU row kernels keep as one row on the stack, they
    cost a store and a load instead of a second polynomial."""
    full = _spec(plan.reductions[0].operands[0]).shape
    if row_bytes_max <= 0 or not full or full not in plan.parallel:
        return []
    ident = tuple(range(len(full)))
    both = _reached([r.operands[0] for r in plan.reductions], ident, leaves) & \
        _reached(plan.parallel[full], ident, leaves)
    body = _Body(leaves)
    body.n_loops = len(full)
    shared = []
    for op in ops:
        if op.name[3:] not in TRANSCENDENTAL:
            continue
        v = op.results[0]
        if (v, ident) not in both:
            continue
        # a symbolic row is weighed at the size hints: dg-cpu-kernels keeps a row whose
        # length only the run time knows on the heap, not the stack
        spec = _spec(v).hinted(size_hints(op))  # (v's shape is `full`)
        if spec.nbytes <= row_bytes_max * spec.shape[0] and body.varies(v, ident):
            shared.append(v)
    return shared


def lower_region(fusion: ir.Operation, row_bytes_max: int = 0) -> list[ir.Value]:
    """Emit the linalg loop nests of a fusion region at the current insertion point;
    `row_bytes_max`: see `_shared_transcendentals` (0: recompute them)."""
    ops, yielded = fusion_body(fusion)
    plan = plan_region(ops, yielded)
    if isinstance(plan, str):
        raise ValueError(f"fusion region at {fusion.location} cannot be lowered: {plan}; "
                         "form regions with dg-fuse only")
    leaves = {v: v for v in fusion_inputs(fusion)}
    if plan.reductions:
        shared = _shared_transcendentals(ops, plan, leaves, row_bytes_max)
        if shared:
            full = _spec(plan.reductions[0].operands[0]).shape
            leaves.update(zip(shared, _emit_parallel(full, shared, leaves)))
        results = _emit_reductions(plan.reductions, leaves)
        leaves.update({r.results[0]: t for r, t in zip(plan.reductions, results)})
    # smaller (reduced) shapes first: larger nests then read them instead of recomputing
    hints = size_hints(fusion)  # (symbolic shapes are ordered at their hints)
    for shape, values in sorted(plan.parallel.items(),
                                key=lambda kv: TensorSpec(kv[0], "f32").hinted(hints).numel):
        leaves.update(zip(values, _emit_parallel(shape, values, leaves)))
    return [leaves[v] for v in yielded]

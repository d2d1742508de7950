"""The sizes a CUDA-lowered host function computes, as expressions of its symbols.

A function of run-time sizes reads them on the host: `memref.dim` of its arguments,
its size arguments (`dg-size-arguments`), `arith` integer ops on them (a slice's
bounds, a grid's block count), allocations' size operands and views' offsets, sizes
and strides. `HostSizes` evaluates an `index` value (`size`) and a buffer's geometry
(`geometry`: sizes, and strides and offset in elements of its root buffer) as dims
(`abi.Dim`: ints, or sympy expressions of the symbols `s0`, `s1`, ...), from the
function's signature and the ops computing them. The launch plan writes them as text
and the runtime evaluates them at each call's sizes. Static values stay ints: a static
buffer's geometry is its type's.
"""
from __future__ import annotations

from typing import Callable, Iterator, Sequence

from mlir import ir

from ..common.memrefs import SIZE_ARITH
from ...runtime import abi
from ...runtime.cuda import PlanError

# sizes, strides (elements), offset (elements from the root buffer's start)
Geometry = tuple[list[abi.Dim], list[abi.Dim], abi.Dim]


def _floor_div(a: abi.Dim, b: abi.Dim) -> abi.Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    import sympy
    return sympy.floor(sympy.sympify(a) / b)


def _ceil_div(a: abi.Dim, b: abi.Dim) -> abi.Dim:
    # as a floor: the runtime's generated code (`abi.dim_code`) has floors only
    return _floor_div(a + b - 1, b)


def _sympy(name: str) -> Callable[[abi.Dim, abi.Dim], abi.Dim]:
    def apply(a: abi.Dim, b: abi.Dim) -> abi.Dim:
        import sympy
        return getattr(sympy, name)(a, b)
    return apply


# `SIZE_ARITH`'s ops -> their value
_ARITH: dict[str, Callable[[abi.Dim, abi.Dim], abi.Dim]] = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b, "arith.divui": _floor_div, "arith.divsi": _floor_div,
    "arith.floordivsi": _floor_div, "arith.ceildivui": _ceil_div,
    "arith.ceildivsi": _ceil_div, "arith.remui": _sympy("Mod"), "arith.remsi": _sympy("Mod"),
    "arith.minui": _sympy("Min"), "arith.minsi": _sympy("Min"),
    "arith.maxui": _sympy("Max"), "arith.maxsi": _sympy("Max"),
}
assert set(_ARITH) == set(SIZE_ARITH)
_CASTS = ("arith.index_cast", "arith.index_castui")


def _affine(e: ir.AffineExpr, dims: list, symbols: list) -> abi.Dim:
    """Affine expression `e` at dim and symbol values."""
    if isinstance(e, ir.AffineDimExpr):
        return dims[e.position]
    if isinstance(e, ir.AffineSymbolExpr):
        return symbols[e.position]
    if isinstance(e, ir.AffineConstantExpr):
        return e.value
    for kind, apply in ((ir.AffineAddExpr, _ARITH["arith.addi"]),
                        (ir.AffineMulExpr, _ARITH["arith.muli"]),
                        (ir.AffineFloorDivExpr, _floor_div), (ir.AffineCeilDivExpr, _ceil_div),
                        (ir.AffineModExpr, _ARITH["arith.remui"])):
        if isinstance(e, kind):
            return apply(_affine(e.lhs, dims, symbols), _affine(e.rhs, dims, symbols))
    raise PlanError(f"affine expression {e} has no size")


def row_major(shape: Sequence[abi.Dim]) -> list[abi.Dim]:
    """The strides of a contiguous buffer of `shape`."""
    strides: list[abi.Dim] = []
    step: abi.Dim = 1
    for s in reversed(shape):
        strides.insert(0, step)
        step = abi.as_dim(step * s)
    return strides


class HostSizes:
    """The sizes of one host function. `arguments`: its buffer arguments and their shapes
    (the signature's dims); `symbols`: its size arguments and the symbols they hold."""

    def __init__(self, arguments: dict, symbols: dict) -> None:
        self._sizes: dict = dict(symbols)
        self._geometry: dict = {v: (list(shape), row_major(shape), 0)
                                for v, shape in arguments.items()}

    def size(self, v: ir.Value) -> abi.Dim:
        """The value of `index` (or integer) value `v`: an int, or an expression."""
        if v not in self._sizes:
            self._sizes[v] = abi.as_dim(self._evaluate(v))
        return self._sizes[v]

    def _evaluate(self, v: ir.Value) -> abi.Dim:
        owner = v.owner
        if isinstance(owner, ir.Block):
            raise PlanError("a block argument that is not a size argument is used as a size")
        op = owner.operation
        if op.name == "arith.constant":
            return ir.IntegerAttr(op.attributes["value"]).value
        if op.name in _CASTS:
            return self.size(op.operands[0])
        if op.name == "memref.dim":
            d = self.size(op.operands[1])
            if not isinstance(d, int):
                raise PlanError(f"memref.dim at {op.location}: a dim number only the run "
                                "time knows")
            return self.geometry(op.operands[0])[0][d]
        if op.name in _ARITH:
            return _ARITH[op.name](self.size(op.operands[0]), self.size(op.operands[1]))
        if op.name == "affine.apply":  # (canonicalization's size arithmetic)
            amap = ir.AffineMapAttr(op.attributes["map"]).value
            values = [self.size(x) for x in op.operands]
            return _affine(amap.results[0], values[:amap.n_dims], values[amap.n_dims:])
        raise PlanError(f"'{op.name}' at {op.location} computes a size the launch plan "
                        "cannot evaluate on the host")

    def geometry(self, v: ir.Value) -> Geometry:
        """Sizes, strides and offset of buffer `v` (a function argument, allocation,
        global or view of one) in elements of its root buffer."""
        if v not in self._geometry:
            self._geometry[v] = self._view(v)
        return self._geometry[v]

    def _view(self, v: ir.Value) -> Geometry:
        t = ir.MemRefType(v.type)
        strides, offset = t.get_strides_and_offset()
        if t.has_static_shape and not any(t.is_dynamic_stride_or_offset(x)
                                          for x in [*strides, offset]):
            return list(t.shape), list(strides), offset
        owner = v.owner
        if isinstance(owner, ir.Block):
            raise PlanError(f"a block argument of type {t} is not a buffer the plan knows")
        op = owner.operation
        if op.name == "memref.alloc":
            dynamic = iter(op.operands)
            shape = [self.size(next(dynamic)) if ir.ShapedType.is_dynamic_size(s) else s
                     for s in t.shape]
            return shape, row_major(shape), 0
        if op.name == "memref.cast":
            return self.geometry(op.operands[0])
        if op.name == "memref.subview":
            return self._subview(op, t)
        if op.name == "memref.reinterpret_cast":
            offsets, sizes, steps = self._mixed(op, ("static_offsets", "static_sizes",
                                                     "static_strides"))
            return sizes, steps, offsets[0]
        if op.name == "memref.expand_shape":
            return self._expand(op)
        if op.name == "memref.collapse_shape":
            return self._collapse(op)
        raise PlanError(f"'{op.name}' at {op.location}: a view of run-time sizes the launch "
                        "plan cannot follow")

    def _mixed(self, op: ir.Operation, names: Sequence[str]) -> list[list[abi.Dim]]:
        """The op's mixed static/dynamic lists (attributes `names`; their dynamic entries
        are the operands after the source, in order) as dims."""
        dynamic: Iterator[ir.Value] = iter(list(op.operands)[1:])
        marker = ir.ShapedType.get_dynamic_size()  # (the same for offsets and strides)
        return [[self.size(next(dynamic)) if x == marker else x
                 for x in ir.DenseI64ArrayAttr(op.attributes[name])] for name in names]

    def _subview(self, op: ir.Operation, t: ir.MemRefType) -> Geometry:
        shape, strides, offset = self.geometry(op.operands[0])
        offsets, sizes, steps = self._mixed(op, ("static_offsets", "static_sizes",
                                                 "static_strides"))
        offset = abi.as_dim(offset + sum(o * s for o, s in zip(offsets, strides)))
        strides = [abi.as_dim(a * b) for a, b in zip(strides, steps)]
        kept = _rank_reduced(list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"])),
                             list(t.shape))
        if kept is None:
            raise PlanError(f"memref.subview at {op.location}: cannot tell which unit dims "
                            f"it drops ({t})")
        return [sizes[d] for d in kept], [strides[d] for d in kept], offset

    def _expand(self, op: ir.Operation) -> Geometry:
        _, strides, offset = self.geometry(op.operands[0])
        dynamic = iter(list(op.operands)[1:])
        shape = [self.size(next(dynamic)) if ir.ShapedType.is_dynamic_size(s) else s
                 for s in ir.DenseI64ArrayAttr(op.attributes["static_output_shape"])]
        out_strides: list[abi.Dim] = [0] * len(shape)
        for j, group in enumerate(_groups(op)):
            step = strides[j]
            for d in reversed(group):
                out_strides[d] = step
                step = abi.as_dim(step * shape[d])
        return shape, out_strides, offset

    def _collapse(self, op: ir.Operation) -> Geometry:
        shape, strides, offset = self.geometry(op.operands[0])
        groups = _groups(op)
        sizes = []
        for g in groups:
            n: abi.Dim = 1
            for d in g:
                n = abi.as_dim(n * shape[d])
            sizes.append(n)
        return sizes, [strides[g[-1]] for g in groups], offset


def _groups(op: ir.Operation) -> list[list[int]]:
    return [[ir.IntegerAttr(d).value for d in ir.ArrayAttr(g)]
            for g in ir.ArrayAttr(op.attributes["reassociation"])]


def _rank_reduced(sizes: Sequence[int], result: Sequence[int]) -> list[int] | None:
    """The dims of a subview's static `sizes` (dynamic markers for run-time ones) that
    its result, of static shape `result`, keeps: matched in order, a 1 dropped where the
    result's next dim differs (MLIR's rank-reduction mask); None when they do not match."""
    kept: list[int] = []
    for d, s in enumerate(sizes):
        if len(kept) < len(result) and result[len(kept)] == s:
            kept.append(d)
        elif s != 1:
            return None
    return kept if len(kept) == len(result) else None

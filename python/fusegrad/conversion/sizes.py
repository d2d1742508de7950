"""Symbolic sizes as SSA values while a function is lowered.

dg types name each `?` dim's size (`tensor<?x128xf32, "s0">`); linalg and tensor ops
need them as `index` values. `function_sizes(fn)` binds each symbol of a function once,
at the top of its entry block: from `tensor.dim` of an argument with the plain symbol as
a dim, or solved from a dim `k*s + c` of it (`_solved`, as the runtime's
`abi.bind_sizes` binds sizes), or from an `index` argument the function takes for it
(`dg-size-arguments` appends those for symbols no argument shows). `size_value(d)` then gives any size
expression as a value, built once per function from the bound symbols with arith ops.
"""
from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator, Sequence

from mlir import ir
from mlir.dialects import arith, tensor

from ..dialects.core import SIZES_SUFFIX
from ..dialects.types import TensorSpec, symbolic_dims
from ..runtime import abi

# function attribute: the symbols its trailing `index` arguments give, in order
SIZE_ARGUMENTS_ATTR = "dg.size_arguments"
DYNAMIC = ir.ShapedType.get_dynamic_size


class SizeError(ValueError):
    """A size the function has no value for."""


class FunctionSizes:
    """The size values of one function, built at the top of its entry block."""

    def __init__(self, fn: ir.Operation) -> None:
        self.block = fn.regions[0].blocks[0]
        # the values go before this op (never used: canonicalize drops it), in creation
        # order; an op of the function would not do: lowering erases and replaces those
        with ir.InsertionPoint.at_block_begin(self.block), ir.Location.unknown():
            self.anchor = arith.ConstantOp(ir.IndexType.get(), 0).operation
        self.values: dict = {}
        args = list(self.block.arguments)
        named = list(ir.ArrayAttr(fn.attributes[SIZE_ARGUMENTS_ATTR])) \
            if SIZE_ARGUMENTS_ATTR in fn.attributes else []
        for name, arg in zip(named, args[len(args) - len(named):]):
            self.values[abi.symbol(ir.StringAttr(name).value)] = arg
        dims = _symbolic_dims(fn)
        for arg, k, d in dims:
            if d.is_Symbol and d not in self.values:
                with self._at_top():
                    self.values[d] = tensor.DimOp(self.block.arguments[arg],
                                                  self._constant(k)).result
        for (arg, k, d), x, slope in _solved(dims, set(self.values)):
            with self._at_top():  # x = (dim - d at x = 0) / slope
                dim = tensor.DimOp(self.block.arguments[arg], self._constant(k)).result
                rest = arith.SubIOp(dim, self.value(d.subs(x, 0))).result
                self.values[x] = arith.DivSIOp(rest, self._constant(slope)).result

    @contextlib.contextmanager
    def _at_top(self) -> Iterator[None]:
        with ir.InsertionPoint(self.anchor), ir.Location.unknown():
            yield

    def _constant(self, n: int) -> ir.Value:
        key = int(n)
        if key not in self.values:
            self.values[key] = arith.ConstantOp(ir.IndexType.get(), key).result
        return self.values[key]

    def value(self, d: abi.Dim) -> ir.Value:
        """`d` as an `index` value (a constant for a static size)."""
        if isinstance(d, int):
            with self._at_top():
                return self._constant(d)
        if d in self.values:
            return self.values[d]
        with self._at_top():
            v = self._build(d)
        self.values[d] = v
        return v

    def _build(self, d) -> ir.Value:
        import sympy

        if d.is_Integer:
            return self._constant(int(d))
        if d.is_Symbol:
            raise SizeError(f"no value for size {d}: no argument of the function has it as a "
                            "dim (dg-size-arguments adds an argument for it)")
        folds = {sympy.Add: arith.AddIOp, sympy.Mul: arith.MulIOp, sympy.Max: arith.MaxSIOp,
                 sympy.Min: arith.MinSIOp}
        if d.func in folds or (isinstance(d, sympy.Pow) and d.exp.is_Integer and d.exp > 0):
            op, args = (arith.MulIOp, [d.base] * int(d.exp)) if isinstance(d, sympy.Pow) \
                else (folds[d.func], list(d.args))
            out = self.value(args[0])
            for t in args[1:]:
                out = op(out, self.value(t)).result
            return out
        if isinstance(d, sympy.floor):
            num, den = d.args[0].as_numer_denom()
            return arith.FloorDivSIOp(self.value(num), self.value(den)).result
        if isinstance(d, sympy.Mod):
            return arith.RemSIOp(self.value(d.args[0]), self.value(d.args[1])).result
        raise SizeError(f"cannot compute size {d} in compiled code")


_CURRENT: contextvars.ContextVar[FunctionSizes | None] = contextvars.ContextVar(
    "fusegrad_function_sizes", default=None)


@contextlib.contextmanager
def function_sizes(fn: ir.Operation) -> Iterator[FunctionSizes]:
    """Make `fn`'s sizes the ones `size_value` builds from while lowering it."""
    sizes = FunctionSizes(fn)
    token = _CURRENT.set(sizes)
    try:
        yield sizes
    finally:
        _CURRENT.reset(token)


def size_value(d: abi.Dim) -> ir.Value:
    """The `index` value of size `d` in the function being lowered."""
    sizes = _CURRENT.get()
    if sizes is None:
        if isinstance(d, int):
            return arith.ConstantOp(ir.IndexType.get(), int(d)).result
        raise SizeError(f"size {d} outside a function being lowered")
    return sizes.value(d)


def mixed(dims: Sequence[abi.Dim]) -> tuple[list[int], list[ir.Value]]:
    """Static entries (DYNAMIC for symbolic ones) and the values of the symbolic ones,
    as ops with mixed static/dynamic sizes or offsets take them."""
    dims = [abi.as_dim(d) for d in dims]
    static = [d if isinstance(d, int) else DYNAMIC() for d in dims]
    return static, [size_value(d) for d in dims if not isinstance(d, int)]


def _symbols_of(t: ir.Type) -> set:
    if not isinstance(t, ir.RankedTensorType) or t.has_static_shape:
        return set()
    return {s for d in TensorSpec.from_mlir(t).shape if abi.is_symbolic(d) for s in d.free_symbols}


def _symbolic_dims(fn: ir.Operation) -> list[tuple[int, int, abi.Dim]]:
    """(argument, dim, size) of the symbolic dims of `fn`'s tensor arguments."""
    dims = []
    for i, arg in enumerate(fn.regions[0].blocks[0].arguments):
        if isinstance(arg.type, ir.RankedTensorType) and not arg.type.has_static_shape:
            dims += [(i, k, d) for k, d in enumerate(TensorSpec.from_mlir(arg.type).shape)
                     if abi.is_symbolic(d)]
    return dims


def _solved(dims: list[tuple[int, int, abi.Dim]], bound: set) -> list[tuple]:
    """((argument, dim, size), symbol, slope) for each symbol not in `bound` that a dim
    `slope*x + rest` gives, `rest` of symbols bound before (an embedding bag's offsets
    less one: `s2 - 1`), in an order each can be built in."""
    bound, found = set(bound), []
    for _ in range(2):
        for arg, k, d in dims:
            free = [x for x in d.free_symbols if x not in bound]
            if len(free) != 1:
                continue
            (x,) = free
            slope = d.diff(x)
            if slope.is_Integer and slope != 0 and d.diff(x, 2) == 0:
                bound.add(x)
                found.append(((arg, k, d), x, int(slope)))
    return found


def _shown(fn: ir.Operation) -> set:
    """The symbols an argument of `fn` gives: a plain dim, or solved from a dim."""
    dims = _symbolic_dims(fn)
    shown = {d for _, _, d in dims if d.is_Symbol}
    return shown | {x for _, x, _ in _solved(dims, shown)}


def size_arguments_pass(module: ir.Operation) -> None:
    """dg-size-arguments: a function whose types or attributes use a symbolic size that no
    argument has as a plain dim (a backward whose cotangent is a scalar, an offset given
    as an integer) takes it as a trailing `index` argument; `dg.size_arguments` names
    them in order, on the function and, per entry, on the module (which the runtime reads
    after lowering). The caller passes the values: those it bound where the forward ran,
    or the integers it was called with."""
    recorded = {}
    for op in module.regions[0].blocks[0].operations:
        fn = op.operation
        if fn.name != "func.func" or not fn.regions[0].blocks:
            continue
        used: set = set()
        block = fn.regions[0].blocks[0]
        for t in ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).results:
            used |= _symbols_of(t)

        def visit(o: ir.Operation) -> None:
            for r in o.results:
                used.update(_symbols_of(r.type))
            for k in range(len(o.attributes)):  # a size only an attribute has (an offset)
                named = o.attributes[k]
                if named.name.endswith(SIZES_SUFFIX) and isinstance(named.attr, ir.StringAttr):
                    used.update(s for d in symbolic_dims(ir.StringAttr(named.attr).value)
                                for s in d.free_symbols)
            for region in o.regions:
                for b in region.blocks:
                    for inner in b.operations:
                        visit(inner.operation)
        for inner in block.operations:
            visit(inner.operation)
        missing = sorted(used - _shown(fn), key=lambda s: int(str(s)[1:]))
        if not missing:
            continue
        index = ir.IndexType.get()
        for _ in missing:
            block.add_argument(index, ir.Location.unknown())
        fn_type = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [*fn_type.inputs, *[index] * len(missing)], fn_type.results))
        names = ir.ArrayAttr.get([ir.StringAttr.get(str(s)) for s in missing])
        fn.attributes[SIZE_ARGUMENTS_ATTR] = names
        recorded[ir.StringAttr(fn.attributes["sym_name"]).value] = names
    if recorded:
        module.attributes[SIZE_ARGUMENTS_ATTR] = ir.DictAttr.get(recorded)


def size_arguments(module: ir.Operation) -> dict[str, list[str]]:
    """Entry -> the symbols of its trailing size arguments, as dg-size-arguments
    recorded them on the module."""
    if SIZE_ARGUMENTS_ATTR not in module.attributes:
        return {}
    attrs = ir.DictAttr(module.attributes[SIZE_ARGUMENTS_ATTR])
    return {attrs[k].name: [ir.StringAttr(n).value for n in ir.ArrayAttr(attrs[k].attr)]
            for k in range(len(attrs))}


def _plain(t: ir.Type) -> ir.Type:
    if isinstance(t, ir.RankedTensorType) and t.encoding is not None \
            and isinstance(t.encoding, ir.StringAttr):
        return ir.RankedTensorType.get(list(t.shape), t.element_type)
    return t


def drop_size_encodings_pass(module: ir.Operation) -> None:
    """dg-drop-size-encodings: once lowered to linalg (every size an SSA value), tensor
    types drop the encodings that named their `?` dims, which bufferization does not
    take."""
    def visit(o: ir.Operation) -> None:
        for r in o.results:
            plain = _plain(r.type)
            if plain != r.type:
                r.set_type(plain)
        for region in o.regions:
            for b in region.blocks:
                for a in b.arguments:
                    plain = _plain(a.type)
                    if plain != a.type:
                        a.set_type(plain)
                for inner in b.operations:
                    visit(inner.operation)
        if o.name == "func.func":
            t = ir.FunctionType(ir.TypeAttr(o.attributes["function_type"]).value)
            o.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
                [_plain(x) for x in t.inputs], [_plain(x) for x in t.results]))
    for op in module.regions[0].blocks[0].operations:
        visit(op.operation)

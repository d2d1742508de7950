"""Symbolic sizes in the frontend: Dynamo's size symbols as dg's.

A Dynamo graph captured with its own fake example values (`capture.capture_symbolic`)
has SymInt sizes: sympy expressions of Dynamo's symbols (`s47`, `s87`, ...) held by
Dynamo's `ShapeEnv`. dg names its sizes `s0`, `s1`, ... (`runtime/abi.py`). A
`SizeSymbols` renames them canonically, in order of first appearance in a function's
tensor inputs (left to right, dim by dim), so that one graph imports to the same IR
whatever numbers Dynamo gave its symbols; converts torch's sympy functions (`FloorDiv`,
`PythonMod`, ...) into plain sympy, which dg's size text parses back; gives the size
hints (the values the symbols had when Dynamo traced); and decides conditions on sizes
as the ShapeEnv knows them (a symbol's range, Dynamo's guards) without adding guards.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import sympy
import torch

from ..runtime import abi


class NotExpressible(Exception):
    """A size or integer that dg cannot name: a symbol no tensor input's shape binds
    (a data-dependent size, an integer input that is no size), or a function of sizes
    dg's size expressions do not have."""


SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def is_symbolic_value(v: Any) -> bool:
    """Is `v` (a node's example value) a SymInt/SymFloat/SymBool or a tensor with a
    SymInt size?"""
    if isinstance(v, SYM_TYPES):
        return True
    return isinstance(v, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in v.shape)


def raw_expr(v: Any) -> Any:
    """The sympy expression of a SymInt/SymFloat/SymBool (Dynamo's symbols, with the
    ShapeEnv's replacements applied), or the Python number itself."""
    if isinstance(v, SYM_TYPES):
        return v.node.expr
    if isinstance(v, (bool, int, float)):
        return v
    raise NotExpressible(f"{type(v).__name__} is not a size")


# torch's sympy functions (torch.utils._sympy.functions) as plain sympy, for the
# arguments converted already; each is exact for the sizes' values (non-negative
# dividends, positive divisors)
def _floor_div(a: Any, b: Any) -> Any:
    return sympy.floor(a / b)


_FUNCTIONS = {
    "FloorDiv": _floor_div,
    "CleanDiv": _floor_div,  # exact division: floor says it is an integer
    "CeilDiv": lambda a, b: sympy.ceiling(a / b),
    "Mod": sympy.Mod,
    "PythonMod": sympy.Mod,
    "ModularIndexing": lambda x, d, m: sympy.Mod(sympy.floor(x / d), m),
    "Max": sympy.Max,
    "Min": sympy.Min,
    "PowByNatural": lambda a, b: a ** b,
    "Identity": lambda a: a,
    # SymFloats (a scale 1/sqrt(head_dim) from a symbolic size)
    "ToFloat": lambda a: a,
    "IntTrueDiv": lambda a, b: a / b,
    "FloatTrueDiv": lambda a, b: a / b,
    "FloatPow": lambda a, b: a ** b,
    "OpaqueUnaryFn_sqrt": sympy.sqrt,
    "FloorToInt": sympy.floor,
    "CeilToInt": sympy.ceiling,
}


def plain_sympy(expr: Any) -> Any:
    """`expr` with torch's sympy functions replaced by sympy's own (NotExpressible for
    one without an exact counterpart)."""
    if isinstance(expr, (bool, int, float)) or expr.is_Atom:
        return expr
    args = [plain_sympy(a) for a in expr.args]
    kind = type(expr)
    if kind.__module__.startswith("sympy"):
        return expr.func(*args)
    convert = _FUNCTIONS.get(kind.__name__)
    if convert is None:
        raise NotExpressible(f"the size expression {expr} uses {kind.__name__}, which dg's "
                             "sizes do not express")
    return convert(*args)


class SizeSymbols:
    """Dynamo's size symbols of one graph named `s0`, `s1`, ... in order of first
    appearance in its tensor inputs' shapes (`values`: the inputs' example values, in
    order), then the integer inputs that are symbols of their own (a position offset:
    `scalars`, dg name -> position in `values`; the caller passes their values)."""

    def __init__(self, values: Sequence[Any]) -> None:
        self.shape_env = None
        self.to_dg: dict[sympy.Symbol, sympy.Symbol] = {}
        for v in values:
            if isinstance(v, SYM_TYPES) and self.shape_env is None:
                self.shape_env = v.node.shape_env
            if not isinstance(v, torch.Tensor):
                continue
            for d in v.shape:
                if not isinstance(d, torch.SymInt):
                    continue
                self.shape_env = self.shape_env or d.node.shape_env
                expr = d.node.expr
                for s in sorted(getattr(expr, "free_symbols", ()), key=str):
                    if s not in self.to_dg:
                        self.to_dg[s] = abi.symbol(f"s{len(self.to_dg)}")
        self.scalars: dict[str, int] = {}
        given: dict[sympy.Symbol, int] = {}  # Dynamo symbols integer inputs give
        for k, v in enumerate(values):
            expr = v.node.expr if isinstance(v, torch.SymInt) else None
            if not isinstance(expr, sympy.Symbol):
                continue
            given.setdefault(expr, k)
            if expr not in self.to_dg:
                self.to_dg[expr] = abi.symbol(f"s{len(self.to_dg)}")
                self.scalars[str(self.to_dg[expr])] = k
        self.to_dynamo = {v: k for k, v in self.to_dg.items()}
        # a size the shapes show only within expressions (a part of a split graph sees
        # the tokens, batch * length) that an integer input gives: passed as well
        shapes = [[self._dim_or_none(d) for d in v.shape] for v in values
                  if isinstance(v, torch.Tensor)]
        for name in self.unbound([[d for d in shape if d is not None] for shape in shapes]):
            symbol = self.to_dynamo[abi.symbol(name)]
            if symbol in given:
                self.scalars[name] = given[symbol]

    @staticmethod
    def of(values: Iterable[Any]) -> "SizeSymbols | None":
        """The symbols of inputs `values`, or None where none of them is symbolic."""
        values = list(values)
        if not any(is_symbolic_value(v) for v in values):
            return None
        return SizeSymbols(values)

    @property
    def names(self) -> dict[str, str]:
        """dg's name of each size -> Dynamo's."""
        return {str(dg): str(dynamo) for dynamo, dg in self.to_dg.items()}

    def hints(self) -> dict[str, int]:
        """Each size's value when Dynamo traced (the ShapeEnv's hints)."""
        env = self.shape_env
        if env is None:
            return {}
        values = getattr(env, "backed_var_to_val", None)
        if values is None:
            values = env.var_to_val
        return {str(dg): int(values[dynamo]) for dynamo, dg in self.to_dg.items()
                if dynamo in values}

    def expr(self, v: Any) -> Any:
        """`v` (a SymInt/SymFloat/SymBool, a number, or a sympy expression of Dynamo's
        symbols) in dg's symbols, as plain sympy; a Python number stays one."""
        e = raw_expr(v) if not isinstance(v, sympy.Basic) else v
        if isinstance(e, (bool, int, float)):
            return e
        unknown = [s for s in e.free_symbols if s not in self.to_dg]
        if unknown:
            names = ", ".join(sorted(map(str, unknown)))
            raise NotExpressible(
                f"size {e} depends on {names}, which no tensor input's shape gives (an "
                "integer that is not a size, or a data-dependent size)")
        e = plain_sympy(e.xreplace(self.to_dg))
        if e is sympy.true or e is sympy.false:
            return bool(e)
        if e.is_Integer:
            return int(e)
        if e.is_Float or e.is_Rational:
            return float(e)
        return e

    def _dim_or_none(self, d: Any) -> abi.Dim | None:
        try:
            return self.dim(d)
        except NotExpressible:
            return None

    def dim(self, d: Any) -> abi.Dim:
        """A tensor dim (an int or a SymInt) as a dg dim."""
        if isinstance(d, int):
            return d
        e = self.expr(d)
        if isinstance(e, bool) or isinstance(e, float) or (
                isinstance(e, sympy.Basic) and e.is_integer is False):
            raise NotExpressible(f"size {d} is not an integer")
        if isinstance(e, int):
            return e
        e = self._choices_decided(e)
        if e.is_Integer:
            return int(e)
        try:  # in the form the IR's text reads back (types compare as text)
            return abi.parse_dim(abi.format_dim(e))
        except ValueError as err:
            raise NotExpressible(str(err)) from None

    def _choices_decided(self, e: Any) -> Any:
        """`e` with each min / max of two sizes that the sizes' ranges or Dynamo's guards
        decide replaced by the one it is: a QR's reduced size `Min(8, s0)`, known to be
        `s0`, then broadcasts against `s0`."""
        for choice in sorted(e.atoms(sympy.Min, sympy.Max), key=str):
            if len(choice.args) != 2:
                continue
            a, b = choice.args
            for kept, other in ((a, b), (b, a)):
                if self.decide(kept <= other if isinstance(choice, sympy.Min)
                               else kept >= other):
                    e = e.xreplace({choice: kept})
                    break
        return e

    def decide(self, condition: Any) -> bool | None:
        """Whether a condition on sizes (in dg's symbols) holds: decided by sympy, else by
        the ShapeEnv (the symbols' ranges, Dynamo's guards) without adding a guard; None
        where only the sizes' values decide."""
        if isinstance(condition, bool):
            return condition
        from ..dialects.core import holds
        try:
            decided = holds(condition)
        except ArithmeticError:  # sympy's PrecisionExhausted, simplifying floor()s
            decided = None
        if decided is not None:
            return decided
        if self.shape_env is None:
            return None
        condition = condition.xreplace(self.to_dynamo)
        try:
            r = self.shape_env._maybe_evaluate_static(condition)
        except Exception:  # a form the ShapeEnv does not reason about: undecided
            r = None
        if r is sympy.true or r is sympy.false:
            return bool(r)
        statements = _as_nonnegative(condition)
        if statements is None:
            return None
        if all(self._nonnegative(e) for e in statements):
            return True
        # a conjunction is false where one of its parts is: e >= 0 fails where -e - 1 >= 0
        if any(self._nonnegative(-e - 1) for e in statements):
            return False
        return None

    def _nonnegative(self, e: Any) -> bool:
        """Is integer expression `e` (Dynamo's symbols) provably >= 0: by the symbols'
        ranges, or as one of Dynamo's guards `f >= 0` plus what the ranges bound below by 0?"""
        env = self.shape_env
        rounded = list(e.atoms(sympy.floor, sympy.ceiling))
        if rounded:
            # y - 1 < floor(y) <= y <= ceiling(y) < y + 1: e at the bound it decreases to
            r, x = rounded[0], sympy.Dummy("r")
            slope = e.xreplace({r: x}).diff(x)
            if not slope.is_Number or e.xreplace({r: x}).diff(x, 2) != 0:
                return False
            y = r.args[0]
            low, high = (y - 1, y) if isinstance(r, sympy.floor) else (y, y + 1)
            return self._nonnegative(sympy.expand(e.xreplace({r: low if slope > 0 else high})))
        choices = [m for m in e.atoms(sympy.Max, sympy.Min) if len(m.args) == 2]
        if choices:
            # max(a, b) is a or b: e >= 0 at both is e >= 0; where e grows with max(a, b)
            # (shrinks with min(a, b)), e >= 0 at either is enough
            m = choices[0]
            x = sympy.Dummy("m")
            slope = e.xreplace({m: x}).diff(x)
            either = slope.is_Number and (slope > 0 if isinstance(m, sympy.Max) else slope < 0)
            cases = (self._nonnegative(sympy.expand(e.xreplace({m: a}))) for a in m.args)
            return any(cases) if either else all(cases)
        try:
            if env.bound_sympy(e).lower >= 0:
                return True
        except Exception:
            return False
        for fact in self._facts():
            try:
                if env.bound_sympy(sympy.expand(e - fact)).lower >= 0:
                    return True
            except Exception:
                continue
        return False

    def _facts(self) -> list[Any]:
        """Dynamo's guards on sizes as integer expressions known to be >= 0."""
        guards = self.shape_env.guards
        if getattr(self, "_facts_of", None) is not None and self._facts_of[0] == len(guards):
            return self._facts_of[1]
        facts = []
        for guard in guards:
            for part in sympy.And.make_args(guard.expr):
                found = _as_nonnegative(part)
                if found is not None and len(found) <= 2:
                    facts.extend(found)
        self._facts_of = (len(guards), facts)
        return facts

    def unbound(self, shapes: Sequence[Sequence[abi.Dim]]) -> list[str]:
        """The sizes that tensor input shapes `shapes` do not bind as `abi.bind_sizes`
        does (a dim that is a plain size, or `k*s + c` of one size not bound yet), other
        than the `scalars` the caller passes."""
        bound: set = set()
        for _ in range(2):
            for shape in shapes:
                for d in shape:
                    if isinstance(d, int):
                        continue
                    free = [s for s in d.free_symbols if s not in bound]
                    if len(free) != 1:
                        continue
                    slope = d.diff(free[0])  # an integer once the bound sizes are known
                    if slope != 0 and slope.free_symbols <= bound and d.diff(free[0], 2) == 0:
                        bound.add(free[0])
        return [str(s) for s in self.to_dynamo if s not in bound and str(s) not in self.scalars]


def _as_nonnegative(condition: Any) -> list[Any] | None:
    """An integer condition as the expressions it says are >= 0 (all of them), or None
    for one of another form (`a != b`, an `or`)."""
    def integer(e: Any) -> bool:
        return getattr(e, "is_integer", False) is True
    if isinstance(condition, sympy.And):
        parts = [_as_nonnegative(a) for a in condition.args]
        return None if any(p is None for p in parts) else [e for p in parts for e in p]
    if not isinstance(condition, sympy.core.relational.Relational) or isinstance(
            condition, sympy.Ne):
        return None
    a, b = condition.lhs, condition.rhs
    if not (integer(a) and integer(b)):
        return None
    if isinstance(condition, sympy.Eq):
        return [sympy.expand(a - b), sympy.expand(b - a)]
    if isinstance(condition, sympy.GreaterThan):
        return [sympy.expand(a - b)]
    if isinstance(condition, sympy.StrictGreaterThan):
        return [sympy.expand(a - b - 1)]
    if isinstance(condition, sympy.LessThan):
        return [sympy.expand(b - a)]
    if isinstance(condition, sympy.StrictLessThan):
        return [sympy.expand(b - a - 1)]
    return None

"""What the compiler and both runtimes agree on: dtype names and tensor signatures.

Compiled code names element types by dg's dtype names (`f32`, `bf16`, `i1`, ...); a
library's metadata, a launch plan and an exported artifact describe each entry's
tensors as `TensorSig`s (shape, dtype name). The compiler's `dialects.types` builds on
this table (adding MLIR types); this module imports neither MLIR nor torch at import.

A dim is an `int`, or for a program compiled once for many sizes a symbolic size: a
sympy expression of integer symbols `s0`, `s1`, ... (the sizes that vary, each >= 1),
such as `s0`, `4*s0` or `s0 + 1`. Compiled code reads the symbols' values off its
inputs; `eval_dim` gives a dim at given symbol values.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

# dg dtype name -> (torch dtype name, bytes per element, is a float)
DTYPES: dict[str, tuple[str, int, bool]] = {
    "f16": ("float16", 2, True),
    "bf16": ("bfloat16", 2, True),
    "f32": ("float32", 4, True),
    "f64": ("float64", 8, True),
    "i1": ("bool", 1, False),
    "i8": ("int8", 1, False),
    "i16": ("int16", 2, False),
    "i32": ("int32", 4, False),
    "i64": ("int64", 8, False),
}


@functools.cache
def _torch_dtypes() -> dict[str, Any]:
    import torch

    return {name: getattr(torch, spec[0]) for name, spec in DTYPES.items()}


@functools.cache
def _dg_dtypes() -> dict[Any, str]:
    return {t: name for name, t in _torch_dtypes().items()}


def torch_dtype(name: str) -> Any:
    """The torch dtype of dg dtype `name` (KeyError for an unknown name)."""
    return _torch_dtypes()[name]


def dg_dtype(dtype: Any) -> str | None:
    """The dg dtype name of a torch dtype, or None when compiled code has none."""
    return _dg_dtypes().get(dtype)


def itemsize(name: str) -> int:
    return DTYPES[name][1]


Dim = Any  # int | sympy.Expr


@functools.cache
def symbol(name: str) -> Any:
    """Symbolic size `name` (`s0`, ...): a positive integer, as sympy can reason about."""
    import sympy

    return sympy.Symbol(name, integer=True, positive=True)


_SYMBOL_NAME = re.compile(r"\bs[0-9]+\b")


@functools.lru_cache(maxsize=4096)
def parse_dim(text: str) -> Dim:
    """A dim from its text (`128`, `s0`, `4*s0`, `s0 + 1`); ValueError for anything else."""
    if text.strip().lstrip("-").isdigit():
        return int(text)
    import sympy

    names = {n: symbol(n) for n in _SYMBOL_NAME.findall(text)}
    try:
        expr = sympy.sympify(text, locals=names, rational=True)
    except (sympy.SympifyError, SyntaxError, TypeError) as e:
        raise ValueError(f"bad symbolic size '{text}': {e}") from None
    if not isinstance(expr, sympy.Expr) or expr.free_symbols - set(names.values()) \
            or not expr.is_integer:
        raise ValueError(f"bad symbolic size '{text}': expected an integer expression of "
                         "sizes s0, s1, ...")
    return as_dim(expr)


def as_dim(d: Any) -> Dim:
    """`d` as a dim: an int when it is a number, else the symbolic expression."""
    if isinstance(d, int):
        return d
    try:
        return int(d)
    except TypeError:  # sympy: "cannot convert symbols to int"
        return d


def is_symbolic(d: Dim) -> bool:
    return not isinstance(d, int)


def format_dim(d: Dim) -> str:
    return str(d)


def eval_dim(d: Dim, sizes: Mapping[str, int]) -> int:
    """The value of dim `d` when each symbol `sN` is `sizes["sN"]`."""
    if isinstance(d, int):
        return d
    return _evaluate(d, tuple(sorted(sizes.items())))


@functools.lru_cache(maxsize=1 << 14)
def _evaluate(d: Any, sizes: tuple[tuple[str, int], ...]) -> int:
    """`eval_dim`, memoized: cost models ask the same dims at the same hints thousands of
    times per graph (dg-fuse's element counts), and sympy's `subs` took 40 us each (0.8 s
    of a GPT-2 training graph's fusion); `xreplace` and the numbers' own arithmetic, 8."""
    import sympy

    value = d.xreplace({symbol(n): sympy.Integer(v) for n, v in sizes})
    if not value.is_Integer:
        value = d.subs(dict((symbol(n), v) for n, v in sizes))
    if not value.is_Integer:
        raise ValueError(f"size {d} is not known from the sizes {dict(sizes)}")
    return int(value)


def dim_code(d: Dim) -> str:
    """Dim `d` as a Python integer expression of variables named like its symbols: what
    the runtime's generated calls compute sizes with."""
    if isinstance(d, int):
        return str(d)
    import sympy

    if d.is_Integer or d.is_Symbol:
        return str(d)
    if isinstance(d, sympy.Add):
        return "(" + " + ".join(dim_code(t) for t in d.args) + ")"
    if isinstance(d, sympy.Mul):
        return "(" + " * ".join(dim_code(t) for t in d.args) + ")"
    if isinstance(d, sympy.Pow) and d.exp.is_Integer and d.exp > 0:
        return f"({dim_code(d.base)} ** {int(d.exp)})"
    if isinstance(d, sympy.floor):
        num, den = d.args[0].as_numer_denom()
        return f"({dim_code(num)} // {dim_code(den)})"
    if isinstance(d, sympy.Mod):
        return f"({dim_code(d.args[0])} % {dim_code(d.args[1])})"
    if isinstance(d, (sympy.Max, sympy.Min)):
        fn = "max" if isinstance(d, sympy.Max) else "min"
        return f"{fn}({', '.join(dim_code(t) for t in d.args)})"
    raise ValueError(f"size {d} has no integer expression")


class SizeMismatch(ValueError):
    """Tensors whose shapes do not fit a program's symbolic shapes."""


def bind_sizes(expected: Sequence[Sequence[Dim]], actual: Sequence[Sequence[int]],
               names: Sequence[str] | None = None,
               known: dict[str, int] | None = None) -> dict[str, int]:
    """The symbols' values that make shapes `expected` equal `actual` (one per tensor):
    a dim that is a plain symbol binds it, a dim `k*s + c` of one unbound symbol solves
    it; then every dim is checked. `known`: values bound before (a backward's sizes are
    its forward's: its arguments may not show them all). SizeMismatch names the tensor
    (`names[i]`, else its position) and the dim that does not fit."""
    sizes: dict[str, int] = dict(known or {})
    pending = []
    for i, (want, got) in enumerate(zip(expected, actual)):
        what = names[i] if names is not None else f"tensor {i}"
        if len(want) != len(got):
            raise SizeMismatch(f"{what} has shape {list(got)}, expected rank {len(want)}")
        pending += [(what, k, w, int(g)) for k, (w, g) in enumerate(zip(want, got))]
    for _ in range(2):
        for _what, _k, w, g in pending:
            if isinstance(w, int):
                continue
            unknown = [x for x in w.free_symbols if str(x) not in sizes]
            if len(unknown) != 1:
                continue
            (x,) = unknown
            rest = w.subs({symbol(n): v for n, v in sizes.items()})
            slope = rest.diff(x)
            if slope.is_Integer and slope != 0 and rest.diff(x, 2) == 0:
                value = (g - rest.subs(x, 0)) / slope
                if value.is_Integer and value >= 1:
                    sizes[str(x)] = int(value)
    for what, k, w, g in pending:
        try:
            value = eval_dim(w, sizes)
        except ValueError:
            raise SizeMismatch(f"{what}: dim {k} of size {g} leaves size {w} unknown") from None
        if value != g:
            raise SizeMismatch(f"{what}: dim {k} has size {g}, expected {w}"
                               + (f" = {value}" if not isinstance(w, int) else ""))
    return sizes


def symbols_of(shapes: Iterable[Sequence[Dim]]) -> set[str]:
    """The names of the symbols the dims of `shapes` use."""
    return {str(x) for shape in shapes for d in shape if is_symbolic(d) for x in d.free_symbols}


def ordered(symbols: Iterable[str]) -> list[str]:
    """Symbol names by number (`s2` before `s10`): the order sizes are passed in."""
    return sorted(symbols, key=lambda name: int(name[1:]))


def plain_dims(shapes: Sequence[Sequence[Dim]]) -> dict[str, tuple[int, int]]:
    """Per symbol that some dim is alone, the first such dim as (tensor, dim): where a call
    reads the symbol's value."""
    found: dict[str, tuple[int, int]] = {}
    for i, shape in enumerate(shapes):
        for k, d in enumerate(shape):
            if is_symbolic(d) and d.is_Symbol:
                found.setdefault(str(d), (i, k))
    return found


def binding_source(tensors: Sequence[str], shapes: Sequence[Sequence[Dim]],
                   wanted: Iterable[str]) -> list[str]:
    """Python statements (at function-body indentation) of a generated call that bind a
    local variable per symbol of `wanted` from its tensors, named `tensors`, of `shapes`:
    from the first dim that is the symbol alone, else from the mapping `sizes` (a
    backward's, bound where its forward ran) or `mismatch(args, sizes)` (which binds
    them by `bind_sizes` or raises); then check every other dim, calling
    `mismatch(args, sizes)` to raise on a difference. The call defines `args`, `sizes`
    and `mismatch`."""
    plain = plain_dims(shapes)
    lines = [f"    {name} = {tensors[i]}.shape[{k}]" for name, (i, k) in plain.items()]
    lines += [f"    {name} = sizes[{name!r}] if sizes is not None and {name!r} in sizes "
              f"else mismatch(args, sizes)[{name!r}]" for name in ordered(set(wanted) - set(plain))]
    binding = set(plain.values())
    checks = [f"{tensors[i]}.shape[{k}] == {dim_code(d)}" for i, shape in enumerate(shapes)
              for k, d in enumerate(shape) if (i, k) not in binding]
    if checks:
        lines += [f"    if not ({' and '.join(checks)}):", "        mismatch(args, sizes)"]
    return lines


def size_binder(shapes: Sequence[Sequence[Dim]], wanted: Iterable[str],
                mismatch: Callable[[Sequence[Any], Mapping[str, int] | None], dict[str, int]],
                what: str) -> Callable[..., tuple[int, ...]]:
    """`bind(tensors, sizes=None)`: the values of the symbols `wanted` (in `ordered`
    order) in a call with `tensors` of `shapes` whose ranks are checked, as generated
    code (`binding_source`); `mismatch(tensors, sizes)` raises where a dim does not
    fit. `what` names the call in tracebacks."""
    names = [f"a{i}" for i in range(len(shapes))]
    lines = ["def bind(args, sizes=None):", f"    [{''.join(f'{a}, ' for a in names)}] = args",
             *binding_source(names, shapes, wanted)]
    lines.append(f"    return ({''.join(f'{n}, ' for n in ordered(wanted))})")
    env: dict[str, Any] = {"mismatch": mismatch}
    exec(compile("\n".join(lines), f"<fusegrad sizes of {what}>", "exec"), env)
    return env["bind"]


def sizes_reader(shapes: Sequence[Sequence[Dim]], wanted: Iterable[str],
                 bind: Callable[[Sequence[Any]], dict[str, int]],
                 ) -> Callable[[Sequence[Any]], dict[str, int]]:
    """The function giving the values of the symbols `wanted` in a call with tensors of
    `shapes` and the `sizes` it was given (what a forward hands its backward as
    `sizes`): read off their dims where each is some dim alone, else
    `bind(tensors, sizes)`."""
    plain = plain_dims(shapes)
    if not set(wanted) <= set(plain):
        return bind
    items = sorted((name, plain[name]) for name in wanted)

    def read(args: Sequence[Any], sizes: Mapping[str, int] | None = None) -> dict[str, int]:
        found = {name: args[i].shape[k] for name, (i, k) in items}
        return found if sizes is None else {**found, **sizes}
    return read


@dataclass(frozen=True)
class TensorSig:
    """A tensor's signature as compiled code sees it: shape and dg dtype name. The
    compiler's `dialects.types.TensorSpec` is one, with MLIR conversions added."""

    shape: tuple[Dim, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(as_dim(d) for d in self.shape))

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * itemsize(self.dtype)

    def to_json(self) -> dict[str, Any]:
        return {"shape": [d if isinstance(d, int) else format_dim(d) for d in self.shape],
                "dtype": self.dtype}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TensorSig":
        return cls(tuple(d if isinstance(d, int) else parse_dim(d) for d in data["shape"]),
                   data["dtype"])

    def __str__(self) -> str:
        dims = "".join(f"{d}x" if isinstance(d, int) else "?x" for d in self.shape)
        symbolic = ", ".join(format_dim(d) for d in self.shape if not isinstance(d, int))
        return f"tensor<{dims}{self.dtype}" + (f', "{symbolic}">' if symbolic else ">")

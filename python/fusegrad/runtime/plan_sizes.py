"""Run-time sizes in launch plans: a function compiled once for every size binds its sizes
from a call's tensors, and runs its steps at their values.

A plan function of symbolic sizes (`tensor<?x128xf32, "s0">`) has symbolic dims in its
signatures, and its steps hold sizes as text (`abi.format_dim`, e.g. `"s0"`,
`"floor(s0/256 + 255/256)"`) where a static plan holds numbers (`SIZE_FIELDS`: an
alloc's shape, a view's shape, strides and offset, a launch's grid) and size kernel
arguments (`{"size": "s0", "type": "i64"}`). `PlanSizes.bind` reads the symbols' values
off a call's tensors (or a backward's from its forward's `sizes`), and `steps_at` gives
the steps at those values with every size a number, as a static function's: each size
expression is compiled to Python once (`abi.dim_code`), not evaluated by sympy per call.
Launches whose grid is empty at those values (a kernel over no element) are dropped.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from . import abi
from .abi import TensorSig

# step op -> its fields that hold sizes (an int, a size's text, or a list of them)
SIZE_FIELDS = {"alloc": ("shape",), "view": ("shape", "strides", "offset"),
               "launch": ("grid",)}


class SizeError(ValueError):
    """A call's tensors do not fit a function's symbolic shapes, or a plan's size is not
    a size expression."""


def parse_size(text: Any) -> abi.Dim:
    """A size of a step: an int as it is, a text as its expression (SizeError if it is
    none)."""
    if isinstance(text, int):
        return text
    try:
        return abi.parse_dim(text)
    except (ValueError, TypeError) as e:
        raise SizeError(str(e)) from None


def step_sizes(step: dict) -> list[abi.Dim]:
    """The sizes a step holds (`SIZE_FIELDS` and size kernel arguments), in order."""
    found: list = []
    for name in SIZE_FIELDS.get(step["op"], ()):
        value = step[name]
        found += value if isinstance(value, list) else [value]
    if step["op"] == "launch":
        found += [a["size"] for a in step["args"] if "size" in a]
    return [parse_size(v) for v in found]


def is_symbolic_step(step: dict) -> bool:
    return any(abi.is_symbolic(d) for d in step_sizes(step))


class PlanSizes:
    """One plan function's symbolic sizes: which there are, how a call binds them, and its
    steps and output shapes at their values."""

    def __init__(self, name: str, inputs: Sequence[TensorSig], outputs: Sequence[TensorSig],
                 steps: Sequence[dict]) -> None:
        self.name = name
        self.inputs = list(inputs)
        self.steps = list(steps)
        self.outputs = list(outputs)
        sizes = [step_sizes(s) for s in steps]
        self.symbols = abi.ordered(abi.symbols_of([*(s.shape for s in (*inputs, *outputs)),
                                                   *sizes]))
        self.bind: Callable[..., tuple[int, ...]] = abi.size_binder(
            [s.shape for s in inputs], self.symbols, self._mismatch, f"@{name}")
        # every size of the steps and the outputs, as one generated function of the symbols
        dims = [d for found in sizes for d in found] + [d for s in outputs for d in s.shape]
        source = (f"lambda {', '.join(self.symbols)}: "
                  f"[{', '.join(abi.dim_code(d) for d in dims)}]")
        self._evaluate = eval(compile(source, f"<fusegrad sizes of @{name}>", "eval"), {})
        self.sizes_of = abi.sizes_reader(
            [s.shape for s in inputs], self.symbols,
            lambda args, sizes=None: self.named(self.bind(args, sizes)))

    def named(self, values: Sequence[int]) -> dict[str, int]:
        """`bind`'s values by symbol name."""
        return dict(zip(self.symbols, values))

    def _mismatch(self, args: Sequence[Any], sizes: Mapping[str, int] | None) -> dict[str, int]:
        """The sizes of a call the generated binding could not read off its inputs alone
        (SizeError names what does not fit, or a size it is not given)."""
        try:
            bound = abi.bind_sizes([s.shape for s in self.inputs],
                                   [tuple(t.shape) for t in args],
                                   [f"@{self.name} input {i}" for i in range(len(args))],
                                   dict(sizes or {}))
        except abi.SizeMismatch as e:
            raise SizeError(str(e)) from None
        for name in self.symbols:
            if name not in bound:
                raise SizeError(f"@{self.name}: no input shows size {name}: its caller "
                                "passes it (sizes=, a backward's from its forward)")
        return bound

    def at(self, values: Sequence[int]) -> tuple[list[dict], list[tuple[int, ...]]]:
        """The steps and the output shapes at the symbols' `values` (`bind`'s order)."""
        numbers = iter(self._evaluate(*values))
        steps = []
        for step in self.steps:
            fields = SIZE_FIELDS.get(step["op"], ())
            if not fields:
                steps.append(step)
                continue
            concrete = dict(step)
            for name in fields:
                value = step[name]
                concrete[name] = [next(numbers) for _ in value] if isinstance(value, list) \
                    else next(numbers)
            if step["op"] == "launch":
                concrete["args"] = [{"scalar": next(numbers), "type": a["type"]}
                                    if "size" in a else a for a in step["args"]]
                if 0 in concrete["grid"]:
                    continue
            steps.append(concrete)
        outputs = [tuple(next(numbers) for _ in s.shape) for s in self.outputs]
        return steps, outputs

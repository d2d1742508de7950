"""torch.export's `dynamic_shapes` for `fusegrad.export`: which dims of which inputs vary.

A spec gives, per input, None (all dims fixed) or `{dim index: torch.export.Dim or a
name}` (a list with one entry per dim is taken too), in input order or as a dict keyed
by the function's argument names; the same Dim or name on two inputs is one size. It is
checked against the example inputs here, so that a mistake names the input and dim
before anything is traced, and becomes one `DynamicDim` per name.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch.export import Dim
from torch.utils._sympy.numbers import int_oo


class DynamicShapesError(ValueError):
    """A `dynamic_shapes` spec that does not fit the inputs (names the input and dim)."""


@dataclass(frozen=True)
class DynamicDim:
    """A size that varies, named as the user named it, with its range `[min, max]` (max
    None: unbounded). dg's sizes are positive, so `min` is at least 1. `automatic_min`:
    the user gave no lower bound (a name, or a Dim's default 0); the artifact then takes
    the smallest size its trace holds for, 1 or 2 (`frontend.torch_export`)."""

    name: str
    min: int
    max: int | None
    automatic_min: bool

    def torch_dim(self) -> Dim:
        return Dim(self.name, min=self.min, max=self.max)

    def __str__(self) -> str:
        return f"{self.name} in [{self.min}, {'inf' if self.max is None else self.max}]"


# per input: dim index -> its DynamicDim (empty: the input is static)
DynamicDims = list[dict[int, DynamicDim]]


def argument_names(fn: Callable[..., Any]) -> list[str] | None:
    """The names of `fn`'s positional parameters (an nn.Module's `forward`'s), which a
    spec keyed by name refers to; None where it takes `*args`."""
    target = fn.forward if isinstance(fn, torch.nn.Module) else fn
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return None
    names = []
    for p in parameters:
        if p.kind == p.VAR_POSITIONAL:
            return None
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return names


def parse_dynamic_shapes(spec: Any, example_inputs: Sequence[torch.Tensor],
                         names: Sequence[str] | None) -> DynamicDims:
    """The dynamic dims of each input under `spec` (`names`: the function's argument
    names, for a spec keyed by them). Raises DynamicShapesError for a spec of the wrong
    structure, a dim out of range, a Dim that is derived or a hint (Dim.AUTO), one name
    with two ranges, or example sizes outside a Dim's range or unequal for one name."""
    per_input = _per_input(spec, len(example_inputs), names)
    dims: DynamicDims = []
    declared: dict[str, tuple[DynamicDim, str, int]] = {}  # name -> (dim, where, example size)
    for i, (x, entry) in enumerate(zip(example_inputs, per_input)):
        what = f"input #{i}" + (f" ({names[i]})" if names and i < len(names) else "")
        dims.append({})
        if entry is None:
            continue
        if not isinstance(x, torch.Tensor):
            raise DynamicShapesError(f"{what} is a {type(x).__name__}, not a tensor: it has "
                                     "no dims to make dynamic")
        if isinstance(entry, (list, tuple)):
            if len(entry) != x.dim():
                raise DynamicShapesError(f"{what}: {len(entry)} entries for a tensor of "
                                         f"{x.dim()} dims")
            entry = dict(enumerate(entry))
        if not isinstance(entry, dict):
            raise DynamicShapesError(f"{what}: expected None or a dict {{dim: Dim or name}}, "
                                     f"got a {type(entry).__name__}")
        for k, given in entry.items():
            if not isinstance(k, int) or isinstance(k, bool) or not -x.dim() <= k < x.dim():
                raise DynamicShapesError(f"{what}: dim {k!r} is out of range for a tensor of "
                                         f"{x.dim()} dims")
            k %= x.dim()
            where = f"{what} dim {k}"
            dim = _dynamic_dim(given, where, int(x.shape[k]))
            if dim is None:
                continue
            first = declared.setdefault(dim.name, (dim, where, int(x.shape[k])))
            if first[0] != dim:
                raise DynamicShapesError(f"{where}: {dim.name} is declared as {dim} here and "
                                         f"as {first[0]} at {first[1]}")
            if first[2] != x.shape[k]:
                raise DynamicShapesError(f"{where}: the example's size {x.shape[k]} differs "
                                         f"from {dim.name}'s size {first[2]} at {first[1]}; one "
                                         "name is one size")
            dims[i][k] = dim
    return dims


def _per_input(spec: Any, count: int, names: Sequence[str] | None) -> list[Any]:
    """`spec` as one entry per input."""
    if isinstance(spec, dict):
        if names is None:
            raise DynamicShapesError("a dict keyed by argument names needs a function with "
                                     "named parameters; give a list in input order")
        unknown = sorted(set(spec) - set(names[:count]))
        if unknown:
            raise DynamicShapesError(f"{unknown} are not among the inputs' names "
                                     f"{list(names[:count])}")
        return [spec.get(n) for n in names[:count]]
    if not isinstance(spec, (list, tuple)):
        raise DynamicShapesError(f"expected a list (one entry per input) or a dict keyed by "
                                 f"argument names, got a {type(spec).__name__}")
    if len(spec) != count:
        raise DynamicShapesError(f"{len(spec)} entries for {count} inputs")
    return list(spec)


def _dynamic_dim(given: Any, where: str, example: int) -> DynamicDim | None:
    """The DynamicDim `given` (a Dim or a name) declares, None for a fixed one (None, or
    the example's size as an int)."""
    from torch.export.dynamic_shapes import _DerivedDim, _DimHint

    if given is None:
        return None
    if isinstance(given, int) and not isinstance(given, bool):
        if given != example:
            raise DynamicShapesError(f"{where} is fixed to {given}, but the example's size "
                                     f"is {example}")
        return None
    if isinstance(given, str):
        if not given.isidentifier():
            raise DynamicShapesError(f"{where}: a dim's name must be an identifier, got "
                                     f"{given!r}")
        given = Dim(given)
    if isinstance(given, _DerivedDim):
        raise DynamicShapesError(f"{where}: {given} is derived from another Dim, which "
                                 "fusegrad.export does not take yet; give it a Dim of its own")
    if isinstance(given, _DimHint) or not isinstance(given, Dim):
        raise DynamicShapesError(f"{where}: expected a torch.export.Dim or a name, got "
                                 f"{given!r}")
    dim = DynamicDim(given.__name__, max(int(given.min), 1),
                     None if given.max is int_oo else int(given.max), given.min < 1)
    if dim.max is not None and dim.max <= dim.min:
        raise DynamicShapesError(f"{where}: {given} leaves at most one size (dg's sizes are "
                                 "at least 1); make the dim fixed")
    if example < dim.min or (dim.max is not None and example > dim.max):
        raise DynamicShapesError(f"{where}: the example's size {example} is outside "
                                 f"{dim.name}'s range [{dim.min}, "
                                 f"{'inf' if dim.max is None else dim.max}]")
    return dim

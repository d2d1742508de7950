"""Programs traced by torch.export (non-strict) into one graph that capture takes.

`fusegrad.export` traces with torch.export what `capture` cannot trace directly (Python
control flow on tensor values: HF models read `.item()`s), since an artifact is one
graph, and every program some of whose dims the user made dynamic: torch.export checks
that the program holds over the ranges declared (and says which dim it specializes
where it does not), and `capture_symbolic` takes the graph it makes as it takes
Dynamo's, with those dims as dg's sizes `s0`, `s1`, ...
"""
from __future__ import annotations

import inspect
import logging
import re
from dataclasses import replace
from typing import Any, Sequence

import torch

from .capture import Captured, CaptureError, capture_symbolic
from .dynamic_shapes import DynamicDim, DynamicDims

log = logging.getLogger(__name__)


class DimConstrained(CaptureError):
    """The program holds for only part of a dynamic dim's range: it specializes the dim
    to a constant, ties it to another, or takes a path that needs other sizes.
    `names`: those dims."""

    def __init__(self, message: str, names: frozenset[str]) -> None:
        super().__init__(message)
        self.names = names


def trace(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
          dynamic_shapes: Any = None) -> torch.fx.GraphModule:
    """torch.export's graph of `module(*example_inputs)` (its errors as they are), its
    views as reshapes and its constants as buffers, as capture takes it."""
    program = torch.export.export(module, tuple(example_inputs), dynamic_shapes=dynamic_shapes,
                                  strict=False)
    return _constants_as_buffers(_views_as_reshapes(program.module()))


def capture_dynamic(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
                    dims: DynamicDims) -> tuple[Captured, torch.fx.GraphModule,
                                                dict[str, DynamicDim]]:
    """`module(*example_inputs)` captured once for every size of the dynamic dims `dims`
    (`dynamic_shapes.parse_dynamic_shapes`): traced by torch.export with those dims
    symbolic, then by `capture_symbolic`. Returns the capture, torch.export's module
    (whose tensors are the ones lifted) and each of dg's sizes as its dim, with the
    range the artifact takes.

    Both traces take sizes as torch.export's size-oblivious mode does
    (`backed_size_oblivious`): a dynamic dim may be 1, so a trace that would take
    another path at 1 says so by a guard (Dynamo's default assumes sizes of 2 and more
    without one). Every guard and runtime assertion the traces make on the dims must
    hold over their ranges, or the program would be right for part of them only. A dim
    without a lower bound of its own (`DynamicDim.automatic_min`) starts at 1, or at 2
    where the trace needs it (torch's reshape of a matmul's transposed operand does:
    attention's sequence dim; topk's k of 2 does).

    Raises DimConstrained where the program holds for part of a dim's range (it
    specializes the dim, or needs a narrower range), naming the dim, the input and why;
    CaptureError where tracing fails otherwise."""
    try:
        return _capture(module, example_inputs, dims)
    except DimConstrained as e:
        from_two = _may_start_at_two(dims, e.names, example_inputs)
        if not from_two:
            raise
        log.info("export: %s start at 2 (%s)", ", ".join(sorted(from_two)), e)
        return _capture(module, example_inputs, _starting_at_two(dims, from_two))


def _capture(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor],
             dims: DynamicDims) -> tuple[Captured, torch.fx.GraphModule, dict[str, DynamicDim]]:
    """`capture_dynamic` tracing at the ranges of `dims` as they are."""
    import torch.fx.experimental._config as shapes_config
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.symbolic_shapes import _ShapeEnvGuardError

    named = _Named(dims)
    with shapes_config.patch(backed_size_oblivious=True):
        try:
            gm = trace(module, example_inputs, _torch_export_shapes(module, dims))
        except torch._dynamo.exc.UserError as e:
            found = _VIOLATED.search(str(e))
            names = {n.strip() for n in found.group(1).split(",")} & set(named.where) \
                if found else set()
            if names:
                raise named.constrained(names, _reason(str(e))) from None
            raise CaptureError(f"torch.export: {e}") from e
        except Exception as e:  # torch.export fails in many ways
            raise CaptureError(f"torch.export: {type(e).__name__}: {e}") from e
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        symbols: dict[Any, DynamicDim] = {}  # Dynamo's symbol -> the dim it is
        for node, per in zip(placeholders, dims):
            node.meta["example_value"] = node.meta["val"]
            for k, d in per.items():
                size = node.meta["val"].shape[k]
                if not (isinstance(size, torch.SymInt) and size.node.expr.is_Symbol):
                    raise named.constrained({d.name}, f"torch.export traced it as {size}")
                symbols[size.node.expr] = d
        shape_env = detect_fake_mode([n.meta["val"] for n in placeholders]).shape_env
        symbols = _settled(_conditions(shape_env, gm, symbols), symbols, named,
                           example_inputs, dims)
        with shape_env.error_on_new_guards():
            try:
                captured = capture_symbolic(gm, example_inputs)
            except CaptureError as e:
                if not isinstance(e.__cause__, _ShapeEnvGuardError):
                    raise
                guard = str(e.__cause__).split(": ", 1)[-1]
                names = {d.name for s, d in symbols.items() if re.search(rf"\b{s}\b", guard)}
                for s, d in symbols.items():
                    guard = re.sub(rf"\b{s}\b", d.name, guard)
                raise named.constrained(names or set(named.where), "tracing it through "
                                        f"fusegrad's decompositions needs {guard}") from None
    by_name = {str(s): d for s, d in symbols.items()}
    return captured, gm, {dg: by_name[dynamo]
                          for dg, dynamo in captured.symbolic.symbols.items()}


class _Named:
    """The dims' names in errors: where each is first declared (`input #0 dim 1`)."""

    def __init__(self, dims: DynamicDims) -> None:
        self.where: dict[str, str] = {}
        for i, per in enumerate(dims):
            for k, d in per.items():
                self.where.setdefault(d.name, f"input #{i} dim {k}")

    def constrained(self, names: set[str], why: str) -> DimConstrained:
        listed = ", ".join(f"{n} ({self.where[n]})" for n in sorted(names))
        return DimConstrained(f"the function constrains the dynamic "
                              f"dim{'s' if len(names) > 1 else ''} {listed}: {why}",
                              frozenset(names))


_SQUEEZES = (torch.ops.aten.squeeze.default, torch.ops.aten.squeeze.dim,
             torch.ops.aten.squeeze.dims)


def _conditions(shape_env: Any, gm: torch.fx.GraphModule,
                symbols: dict[Any, DynamicDim]) -> list[Any]:
    """What torch.export's trace of `gm` assumes of the dynamic dims `symbols`: its
    guards and runtime assertions on them (those tying a Dim's dims on several inputs
    hold by then), and that a dim it squeezes is not 1 (size-oblivious squeeze keeps a
    dim it cannot tell is 1; eager drops it at 1)."""
    import sympy

    conditions = [g.expr for g in shape_env.guards] + [
        a.expr for asserts in shape_env.deferred_runtime_asserts.values() for a in asserts]
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _SQUEEZES:
            continue
        shape = node.args[0].meta["val"].shape
        squeezed = range(len(shape)) if len(node.args) < 2 else \
            node.args[1] if isinstance(node.args[1], (list, tuple)) else [node.args[1]]
        conditions += [sympy.Ne(shape[k].node.expr, 1) for k in squeezed
                       if isinstance(shape[k], torch.SymInt)]
    # in the symbols the graph's sizes are (a dim declared on two inputs is one symbol)
    conditions = [shape_env.replace(c) for c in conditions]
    return [c for c in conditions if c.free_symbols & set(symbols)]


def _settled(conditions: list[Any], symbols: dict[Any, DynamicDim], named: _Named,
             example_inputs: Sequence[torch.Tensor], dims: DynamicDims) -> dict[Any, DynamicDim]:
    """`symbols` once `conditions` (`_conditions`) hold over their ranges: automatic lower
    bounds raised to 2 where that makes them hold (torch.export lets a guard `s >= 2`
    pass, as its default range), else DimConstrained naming the dims and conditions."""
    import sympy
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    def failing(table: dict[Any, DynamicDim]) -> list[Any]:
        ranges = {s: ValueRanges(d.min, int_oo if d.max is None else d.max)
                  for s, d in table.items()}
        return [c for c in conditions
                if not (c.free_symbols <= set(table) and bound_sympy(c, ranges).lower is sympy.true)]
    failed = failing(symbols)
    if not failed:
        return symbols
    names = {symbols[s].name for c in failed for s in c.free_symbols if s in symbols}
    from_two = _may_start_at_two(dims, names, example_inputs)
    raised = {s: replace(d, min=2) if d.name in from_two else d for s, d in symbols.items()}
    if from_two and not failing(raised):
        log.info("export: %s start at 2 (the trace needs %s)", ", ".join(sorted(from_two)),
                 ", ".join(str(c) for c in failed))
        return raised
    as_names = {s: sympy.Symbol(d.name) for s, d in symbols.items()}
    raise named.constrained(names, "its trace needs " + ", ".join(
        str(c.xreplace(as_names)) for c in failed))


def _may_start_at_two(dims: DynamicDims, names: set[str] | frozenset[str],
                      example_inputs: Sequence[torch.Tensor]) -> set[str]:
    """The dims among `names` that start at 1 for want of a lower bound of their own and
    whose example sizes are 2 or more: they may start at 2 instead."""
    return {d.name for x, per in zip(example_inputs, dims) for k, d in per.items()
            if d.name in names and d.automatic_min and d.min == 1 and x.shape[k] >= 2}


def _starting_at_two(dims: DynamicDims, names: set[str]) -> DynamicDims:
    return [{k: replace(d, min=2) if d.name in names else d for k, d in per.items()}
            for per in dims]


_VIOLATED = re.compile(r"Constraints violated \(([^)]*)\)")


def _reason(message: str) -> str:
    """What torch.export's constraint violation says of the dims, without its advice on
    logs and draft_export."""
    body = message.split("The error above occurred", 1)[0]
    reasons, _, fixes = body.partition("Suggested fixes:")
    lines = [line.strip().removeprefix("- ") for line in reasons.splitlines()[1:] if line.strip()]
    fixes = ", ".join(line.strip() for line in fixes.splitlines() if line.strip())
    return " ".join(lines) + (f" (torch.export suggests {fixes})" if fixes else "")


def _torch_export_shapes(module: torch.nn.Module, dims: DynamicDims) -> dict[str, Any]:
    """`dims` as torch.export's `dynamic_shapes` of `module.forward`'s parameters (a
    `*args` parameter takes a tuple), one Dim per name."""
    by_name = {d.name: d.torch_dim() for per in dims for d in per.values()}
    specs = [{k: by_name[d.name] for k, d in per.items()} or None for per in dims]
    bound = inspect.signature(module.forward).bind(*range(len(specs)))
    return {name: tuple(specs[i] for i in at) if isinstance(at, tuple) else specs[at]
            for name, at in bound.arguments.items()}


def _views_as_reshapes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """torch.export drops `.contiguous()` calls that were no-ops in eager, and its `view`s
    then rely on eager's strides, which fusegrad's decompositions need not reproduce
    (HF GPT-2's attention output). A reshape is the same value where a view is valid;
    the graph is functional (no op writes through a view), so the rewrite is safe."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
    gm.recompile()
    return gm


def _constants_as_buffers(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """torch.export keeps the tensors a program reads from outside its modules (a
    function's closure beyond what `_Closure` sees) as plain attributes of its module,
    which capture would meet as real tensors among fake ones: make them buffers, lifted
    and saved like the module's own."""
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        *path, name = node.target.split(".")
        owner = gm.get_submodule(".".join(path))
        value = getattr(owner, name, None)
        if isinstance(value, torch.Tensor) and name not in owner._parameters \
                and name not in owner._buffers:
            delattr(owner, name)
            owner.register_buffer(name, value, persistent=False)
    return gm

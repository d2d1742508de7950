"""`fusegrad.explain(fn, *inputs)`: what fusion and rematerialization do to a program.

Runs `fn` once under Dynamo, as `fusegrad.compile` does, so it sees the same
graphs (closed-over modules' parameters lifted to graph inputs), the same
graph breaks (with Dynamo's reasons) and the same eager parts (ops fusegrad
cannot compile, split off by `graph_split`). Each compiled graph or part is
captured, imported to dg and put through the optimising stages one by one
(dg-autodiff when an input requires grad, dg-remat, dg-fuse), timing each;
the report counts dg ops and kernels (`transforms.fusion.fuse.count_kernels`) per
function and the bytes saved for backward before and after rematerialization.

Graph breaks are counted as `torch._dynamo.explain` counts them: one per graph Dynamo
compiled because it had to stop (`compile_subgraph_reason.graph_break`), located at the
user's line where it stopped. Dynamo's `graph_break` counter, which says better why (but
counts a break again when Dynamo restarts its analysis, and misses breaks on Python
control flow over tensor values), supplies the reason where the graph's own is generic.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import torch
from mlir import ir

from .frontend.compile_history import symbol_dims
from .frontend.graph_split import EagerPart


@dataclass
class GraphReport:
    """One captured graph: forward and, when differentiated, backward."""

    name: str
    dg_ops: dict[str, int]  # function -> dg ops before fusion
    kernels: dict[str, int]  # function -> kernels after fusion
    saved_bytes_before_remat: int | None
    saved_bytes_after_remat: int | None
    compile_seconds: dict[str, float] = field(default_factory=dict)
    # explain(dynamic=True): each size of the program for every size (`s0`) -> the input
    # dim it is (`L_input_ids_ dim 1`); or why the graph compiles per shape instead
    dynamic_sizes: dict[str, str] = field(default_factory=dict)
    per_shape: str = ""

    def rows(self) -> list[tuple[str, int, int]]:
        return [(fn, self.dg_ops[fn], self.kernels[fn]) for fn in self.dg_ops]

    def renamed(self, name: str) -> GraphReport:
        def rekey(d: dict[str, int]) -> dict[str, int]:
            return {name + k[len(self.name):]: v for k, v in d.items()}
        return replace(self, name=name, dg_ops=rekey(self.dg_ops), kernels=rekey(self.kernels))


@dataclass(frozen=True)
class GraphBreak:
    """Where Dynamo stopped a graph and started another, and why."""

    reason: str
    where: str = ""  # "file:line in function" of the user's code, "" where unknown

    def __str__(self) -> str:
        return f"at {self.where}: {self.reason}" if self.where else self.reason


@dataclass
class Report:
    graphs: list[GraphReport]  # compiled graphs and parts, in the order they first ran
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    eager_parts: list[EagerPart] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"{len(self.graphs)} graph(s), {len(self.graph_breaks)} graph break(s), "
                 f"{len(self.eager_parts)} eager part(s)"]
        lines += [f"graph break {b}" if b.where else f"graph break: {b}"
                  for b in self.graph_breaks]
        lines += [f"eager part: {part}" for part in self.eager_parts]
        for g in self.graphs:
            lines.append(f"graph {g.name}")
            lines.append(f"  {'function':<12} {'dg ops':>7} {'kernels':>8}")
            for fn, ops, kernels in g.rows():
                lines.append(f"  {fn:<12} {ops:>7} {kernels:>8}")
            if g.saved_bytes_before_remat is not None:
                before, after = g.saved_bytes_before_remat, g.saved_bytes_after_remat
                cut = 100.0 * (before - after) / before if before else 0.0
                lines.append(f"  saved for backward: {before} B -> {after} B after remat "
                             f"({cut:.0f}% less)")
            stages = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in g.compile_seconds.items())
            lines.append(f"  compile: {stages}")
            if g.dynamic_sizes:
                lines.append("  one program for every size of " + ", ".join(
                    f"{n} ({where})" for n, where in g.dynamic_sizes.items()))
            elif g.per_shape:
                lines.append(f"  compiles per shape: {g.per_shape}")
        return "\n".join(lines)


def _funcs(module: ir.Module) -> dict[str, ir.Operation]:
    from .passes import functions
    return {ir.StringAttr(f.attributes["sym_name"]).value: f for f in functions(module.operation)}


def explain(fn: Callable[..., Any], *example_inputs: Any, dynamic: bool = False,
            **example_kwargs: Any) -> Report:
    """Run `fn(*example_inputs, **example_kwargs)` under Dynamo and report each graph's
    stages: ops, kernels, saved bytes and compile times, plus the graph breaks and eager
    parts. With `dynamic=True`, Dynamo makes the sizes dynamic (torch.compile's
    `dynamic=True`), and each graph says which of its input dims its one program for every
    size takes as sizes, or why it would compile per shape instead."""
    from torch._dynamo.utils import counters

    from .frontend.backend import LazyGraph
    from .torch_compile import own_top_frame

    reports: list[GraphReport] = []
    eager_parts: list[EagerPart] = []
    stops: list[Any] = []  # the `compile_subgraph_reason` of each graph Dynamo had to end

    sizes: dict[int, tuple[dict[str, str], str]] = {}  # id(gm) -> dynamic sizes, or why not

    def report(graph: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> Callable[..., Any]:
        g = _explain_graph(f"f{len(reports)}", graph, list(inputs))
        key = id(getattr(graph, "gm", graph))  # (a graph with its numbers baked in)
        if key in sizes:
            g.dynamic_sizes, g.per_shape = sizes[key]
        reports.append(g)
        return graph  # the part runs eagerly: explain compiles nothing

    def record(gm: torch.fx.GraphModule, inputs: list) -> Callable[..., Any]:
        why = getattr(gm, "compile_subgraph_reason", None)
        if why is not None and why.graph_break:
            stops.append(why)
        graph = LazyGraph(gm, report, dynamic=False, eager_parts=eager_parts)
        if dynamic:
            sizes[id(gm)] = _dynamic_sizes(graph, inputs)
        return graph

    breaks_before = counters["graph_break"].copy()
    compiled = torch.compile(fn, backend=record, dynamic=dynamic)
    if isinstance(fn, torch.nn.Module):
        own_top_frame(compiled)
    compiled(*example_inputs, **example_kwargs)
    breaks = _graph_breaks(stops, list(counters["graph_break"] - breaks_before))
    if len(reports) == 1:
        reports = [reports[0].renamed("f")]
    return Report(reports, breaks, eager_parts)


def _dynamic_sizes(graph: Any, inputs: list) -> tuple[dict[str, str], str]:
    """The sizes of a `LazyGraph`'s program for every size, each named by the input dim
    it is; or why the graph compiles per shape instead."""
    captured = graph.capture_for_every_size(inputs)
    if isinstance(captured, str):
        return {}, captured
    assert captured.symbolic is not None
    where = symbol_dims(graph.gm)
    return {n: where.get(dynamo, dynamo) for n, dynamo in captured.symbolic.symbols.items()}, ""


def _graph_breaks(stops: Sequence[Any], counted: Sequence[str]) -> list[GraphBreak]:
    """One break per graph Dynamo ended early (`stops`, in order), with the reason of
    Dynamo's counter (`counted`: its distinct reasons, in order) where that is the
    graph's own reason, else the next counted reason no graph claims (Dynamo ends the
    graph with a generic 'step_unsupported'), else the graph's reason. A counted reason
    left over is a break that ended no graph (one at a function's first line)."""
    claimed = {stop.reason for stop in stops} & set(counted)
    spare = [reason for reason in counted if reason not in claimed]
    breaks = []
    for stop in stops:
        if stop.reason in claimed:
            reason = stop.reason
        elif spare:
            reason = spare.pop(0)
        else:
            reason = _CONTROL_FLOW if stop.reason.startswith("generic_jump") else stop.reason
        frames = list(stop.user_stack or ())
        where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
        breaks.append(GraphBreak(_brief(reason), where))
    return breaks + [GraphBreak(_brief(reason)) for reason in spare]


_CONTROL_FLOW = ("Python control flow on a tensor's value (`if`/`while` on a tensor, "
                 "Dynamo's generic_jump): the condition runs eagerly between the graphs")


def _brief(reason: str) -> str:
    """Dynamo's reason without its hints: its first line and its explanation."""
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    if not lines:
        return reason
    explanation = next((line.removeprefix("Explanation:").strip() for line in lines
                        if line.startswith("Explanation:")), None)
    return f"{lines[0]}: {explanation}" if explanation else lines[0]


def _explain_graph(name: str, gm: Callable[..., Any], example_inputs: list) -> GraphReport:
    """One graph through capture, import, autodiff, remat and fusion (raises UnsupportedOp)."""
    from .frontend.capture import capture
    from .context import make_context
    from .frontend.importer import import_graph
    from .pass_manager import run_pipeline
    from .pipelines import fusion_pipeline
    from .transforms.fusion.fuse import count_dg_ops, count_kernels
    from .transforms.autodiff.remat import remat_module

    seconds: dict[str, float] = {}
    t = time.perf_counter()
    captured = capture(gm, example_inputs, checks_as_outputs=True)  # as compile_graph does
    seconds["capture"] = time.perf_counter() - t
    train = torch.is_grad_enabled() and any(
        isinstance(x, torch.Tensor) and x.requires_grad
        for x in [*captured.lifted, *example_inputs])
    with make_context(), ir.Location.unknown():
        t = time.perf_counter()
        module = import_graph(captured.gm, name=name)
        seconds["import"] = time.perf_counter() - t
        before = after = None
        if train:
            t = time.perf_counter()
            run_pipeline(module, "dg-autodiff")
            seconds["autodiff"] = time.perf_counter() - t
            keep = (f"{name}_fwd", f"{name}_bwd")
            t = time.perf_counter()
            results = remat_module(module.operation)
            seconds["remat"] = time.perf_counter() - t
            before = sum(r.saved_bytes_before for r in results)
            after = sum(r.saved_bytes_after for r in results)
        else:
            keep = (name,)
        funcs = _funcs(module)
        dg_ops = {fn: count_dg_ops(funcs[fn]) for fn in keep}
        t = time.perf_counter()
        run_pipeline(module, fusion_pipeline())
        seconds["fuse"] = time.perf_counter() - t
        funcs = _funcs(module)
        kernels = {fn: count_kernels(funcs[fn]) for fn in keep}
    return GraphReport(name, dg_ops, kernels, before, after, seconds)

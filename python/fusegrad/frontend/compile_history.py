"""What the backend compiled in this process, and why: `fusegrad.compile_history()`.

A model that keeps compiling (a new shape, a changed guard) is slow for a reason the
user can fix; Dynamo names the reason only in its logs. Each program the backend
compiles is recorded with the Dynamo graph it came from (Dynamo's compile id, e.g.
`0/1`: frame 0, its second graph, and the function), what it serves (the shapes it was
compiled for, or every size of its dynamic dims), and why that graph exists: the
frame's first compile, or the guard whose failure made Dynamo compile it again.
"""
from __future__ import annotations

import dataclasses
import re
import time
from typing import Sequence

import torch


@dataclasses.dataclass(frozen=True)
class DynamoOrigin:
    """The Dynamo graph a backend call received: its compile id, its function, and why
    Dynamo compiled it."""

    compile_id: str
    function: str
    reason: str


@dataclasses.dataclass(frozen=True)
class ProgramRecord:
    """One compiled program (`kind`: "static", "per shape" or "for every size"); `origin`'s
    function is where its first op is."""

    program: str  # the dg program's label (graph3), or "eager" where it fell back
    origin: DynamoOrigin
    kind: str
    serves: str  # the input shapes, or the dynamic sizes and the dims they are
    seconds: float
    note: str = ""  # why a dynamic graph compiled per shape


class CompileHistory(list):
    """The records, oldest first; `str()` is a table."""

    def __str__(self) -> str:
        if not self:
            return "fusegrad compiled nothing in this process"
        rows = ["| program | Dynamo graph | function | kind | serves | why | s |",
                "| --- | --- | --- | --- | --- | --- | ---: |"]
        for r in self:
            why = r.origin.reason + (f"; {r.note}" if r.note else "")
            rows.append(f"| {r.program} | {r.origin.compile_id} | {r.origin.function} | {r.kind} "
                        f"| {r.serves} | {why} | {r.seconds:.2f} |")
        return "\n".join(rows)


_RECORDS = CompileHistory()


def compile_history() -> CompileHistory:
    """A copy of what the backend compiled in this process, oldest first."""
    return CompileHistory(_RECORDS)


def clear() -> None:
    _RECORDS.clear()


def record(program: str, origin: DynamoOrigin | None, kind: str, serves: str,
           since: float, note: str = "") -> None:
    _RECORDS.append(ProgramRecord(program, origin or UNKNOWN, kind, serves,
                                  time.perf_counter() - since, note))


UNKNOWN = DynamoOrigin("-", "-", "compiled outside a Dynamo backend call")


def dynamo_origin(gm: torch.fx.GraphModule) -> DynamoOrigin:
    """Inside Dynamo's backend call for `gm`: the graph's compile id, function and reason
    (the guard failures Dynamo recorded for its frame since the frame's last graph)."""
    from torch._dynamo.utils import guard_failures
    from torch._guards import CompileContext

    context = CompileContext.try_get()
    compile_id = context.compile_id if context is not None else None
    if compile_id is None:
        return UNKNOWN
    function, earlier = _traced_function(gm), compile_id.frame_compile_id or 0
    if not earlier:
        return DynamoOrigin(str(compile_id), function, "the function's first graph")
    # Dynamo records one failure per earlier graph of the frame (`<frame>/<k>: why`)
    # before it compiles the next: the last `earlier` of them
    frame = f"{compile_id.frame_id}/"
    failures = [f for fs in guard_failures.values() for f in fs if f.startswith(frame)]
    # a failure is `<frame>/<k>: guard   # source line ...`, then a stack trace: the guard
    reasons = dict.fromkeys(re.split(r"\s+#", f.split(": ", 1)[-1].splitlines()[0])[0].strip()
                            for f in failures[-earlier:])
    return DynamoOrigin(str(compile_id), function,
                        "Dynamo recompiled" + (": " + "; ".join(reasons) if reasons else ""))


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _traced_function(gm: torch.fx.GraphModule) -> str:
    """The function Dynamo traced, from the first frame of a node's stack trace."""
    for node in gm.graph.nodes:
        found = _FRAME.search(node.meta.get("stack_trace") or "")
        if found:
            return f"{found[3]} ({found[1]}:{found[2]})"
    return "-"


def symbol_dims(gm: torch.fx.GraphModule) -> dict[str, str]:
    """Dynamo's size symbols -> the first input dim each is (`L_x_ dim 0`), or the integer
    input it is (`L_offset_`)."""
    where: dict[str, str] = {}
    values = [(n.target, n.meta.get("example_value")) for n in gm.graph.nodes
              if n.op == "placeholder"]
    for name, value in values:
        if isinstance(value, torch.Tensor):
            for k, d in enumerate(value.shape):
                if isinstance(d, torch.SymInt):
                    where.setdefault(str(d.node.expr), f"{name} dim {k}")
    for name, value in values:
        if isinstance(value, torch.SymInt):
            where.setdefault(str(value.node.expr), str(name))
    return where


def shapes(gm: torch.fx.GraphModule, args: Sequence[object]) -> str:
    """The graph's inputs' shapes (and numbers) a program was compiled for, by name."""
    names = [n.target for n in gm.graph.nodes if n.op == "placeholder"]
    if len(names) != len(args):
        names = [f"#{i}" for i in range(len(args))]
    return ", ".join(f"{name} {tuple(a.shape)}" if isinstance(a, torch.Tensor) else
                     f"{name} = {a!r}" for name, a in zip(names, args))

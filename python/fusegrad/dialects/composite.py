"""Derivatives of a composite op through its decomposition.

An op that a target runs as one library call (dg.attention) still has a
decomposition into other dg ops, and those ops have rules. `vjp_through` and
`jvp_through` emit the decomposition at the current insertion point and apply
its ops' rules, in reverse or in order: the derivative a rule would give if the
op had been decomposed before differentiation. Values that no cotangent reaches
are dropped by the autodiff passes' dead-code erasure.
"""
from __future__ import annotations

from typing import Callable, Sequence

from mlir import ir

from .builder import spec
from .core import attrs_of, lookup


def emitted_dg_ops(values: Sequence[ir.Value], stop: Sequence[ir.Value] = ()) -> list[ir.Operation]:
    """The dg ops computing `values`, producers first: the walk back through dg
    producers ends at other ops, block arguments and the values in `stop`."""
    order: list[ir.Operation] = []
    seen: set = set()
    stopped = set(stop)

    def visit(v: ir.Value) -> None:
        if v in stopped or isinstance(v.owner, ir.Block):
            return
        op = v.owner.operation
        if not op.name.startswith("dg.") or op in seen:
            return
        seen.add(op)
        for x in op.operands:
            visit(x)
        order.append(op)
    for v in values:
        visit(v)
    return order


def _is_float(v: ir.Value) -> bool:
    return spec(v).dtype in ("f16", "bf16", "f32", "f64")


def vjp_through(b, decompose: Callable, ins: Sequence[ir.Value],
                cts: Sequence[ir.Value | None]) -> list[ir.Value | None]:
    """Cotangents of `ins` given those of `decompose(b, *ins)`'s results (None: zero)."""
    outs = list(decompose(b, *ins))
    ops = emitted_dg_ops(outs, ins)
    active = set(ins)
    for op in ops:
        if any(v in active for v in op.operands):
            active.update(op.results)
    acc: dict = {}

    def add(v: ir.Value, g: ir.Value) -> None:
        acc[v] = b.add(acc[v], g) if v in acc else g
    for out, ct in zip(outs, cts):
        if ct is not None:
            add(out, ct)
    for op in reversed(ops):
        out_cts = [acc.get(r) for r in op.results]
        if all(c is None for c in out_cts) or not any(v in active for v in op.operands):
            continue
        d = lookup(op.name)
        grads = d.vjp(b, list(op.operands), list(op.results), out_cts, op=d.name,
                      attrs=attrs_of(op))
        for v, g in zip(op.operands, grads):
            if g is not None and v in active and _is_float(v):
                add(v, g)
    return [acc.get(x) for x in ins]


def jvp_through(b, decompose: Callable, ins: Sequence[ir.Value],
                tangents: Sequence[ir.Value | None]) -> list[ir.Value | None]:
    """Tangents of `decompose(b, *ins)`'s results given those of `ins` (None: zero)."""
    outs = list(decompose(b, *ins))
    tangent = {x: t for x, t in zip(ins, tangents) if t is not None}
    for op in emitted_dg_ops(outs, ins):
        ts = [tangent.get(v) for v in op.operands]
        if all(t is None for t in ts):
            continue
        d = lookup(op.name)
        results = d.jvp(b, list(op.operands), list(op.results), ts, op=d.name,
                        attrs=attrs_of(op))
        for r, t in zip(op.results, results):
            if t is not None:
                tangent[r] = t
    return [tangent.get(o) for o in outs]

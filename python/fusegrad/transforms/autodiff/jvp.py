"""dg-jvp: forward-mode differentiation as a transformation of dg IR.

For each public `@f` not marked `dg.differentiated` it emits
`@f_jvp(inputs..., tangents for the wrt inputs...) -> (outputs..., tangents of
the floating-point outputs...)` by running each op's JVP rule right after the
op, and marks `@f` (so running the pass again differentiates `@f_jvp`).
`@f_jvp` carries `dg.num_outputs`, `dg.wrt` and `dg.tangent_outputs`.
"""
from __future__ import annotations

from typing import Sequence

from mlir import ir

from .common import (TANGENT_OUTPUTS, Derivation, active_values, apply_rule, check_rule_result,
                     func_name, functions_to_differentiate, grad_location, mark_differentiated,
                     parse_indices)


def build_jvp(fn: ir.Operation, wrt: Sequence[int] | None = None, *,
              name: str | None = None) -> ir.Operation:
    """Emit `@<f>_jvp` after `fn` (see the module docstring); returns it.

    Tangents that are known to be zero are never materialised, except for an
    output whose tangent is zero (returned as dg.full 0).
    """
    fn = fn.operation
    d = Derivation.start(fn, wrt, name or f"{func_name(fn)}_jvp", reverse=False)
    env = d.env
    inputs = [d.source_args[i] for i in d.wrt]
    tangents = dict(zip(inputs, d.seeds))
    active = active_values(d.ops, inputs)
    with ir.InsertionPoint(d.fn.regions[0].blocks[0]), fn.location:
        for op in d.ops:
            copy = d.replay(op)
            in_tangents = [tangents.get(v) for v in op.operands]
            if not any(r in active for r in op.results) or all(t is None for t in in_tangents):
                continue
            results = apply_rule(op, "jvp", grad_location(op, "tangent"),
                                 [env[v] for v in op.operands], list(copy.results), in_tangents)
            check_rule_result(op, "JVP", results, op.results)
            for r, t in zip(op.results, results):
                if t is not None and r in active:
                    tangents[r] = t
        outputs = [d.returned[i] for i in d.float_outputs]
        out_tangents = [tangents[v] if v in tangents else d.zeros_like(env[v]) for v in outputs]
        return d.finish(out_tangents, TANGENT_OUTPUTS)


def jvp_pass(module: ir.Operation, wrt: str = "") -> None:
    option = parse_indices(wrt)
    for fn in functions_to_differentiate(module):
        build_jvp(fn, option)
        mark_differentiated(fn)

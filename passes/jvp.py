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
from mlir.dialects import func

from ..dialects.builder import Builder, spec
from .autodiff_common import (
    active_values, apply_rule, body_ops, check_rule_result, clone_op, erase_dead_ops,
    float_indices, func_name, function_type, functions_to_differentiate, grad_location,
    mark_differentiated, new_function, parse_wrt, resolve_wrt, set_i64s,
)
from .registry import register_pass

TANGENT_OUTPUTS = "dg.tangent_outputs"


def build_jvp(fn: ir.Operation, wrt: Sequence[int] | None = None, *,
              name: str | None = None) -> ir.Operation:
    """Emit `@<f>_jvp` after `fn` (see the module docstring); returns it.

    Tangents that are known to be zero are never materialised, except for an
    output whose tangent is zero (returned as dg.full 0).
    """
    fn = fn.operation
    ftype = function_type(fn)
    ins, outs = list(ftype.inputs), list(ftype.results)
    wrt = resolve_wrt(fn, list(wrt) if wrt is not None else None)
    tangent_outputs = float_indices(outs)
    ops, returned = body_ops(fn)
    out = new_function(fn.parent, fn, name or f"{func_name(fn)}_jvp",
                       ins + [ins[i] for i in wrt], outs + [outs[i] for i in tangent_outputs],
                       fn.location)
    old_args = list(fn.regions[0].blocks[0].arguments)
    args = list(out.regions[0].blocks[0].arguments)
    env = dict(zip(old_args, args))
    tangents = {old_args[i]: args[len(ins) + k] for k, i in enumerate(wrt)}
    active = active_values(ops, [old_args[i] for i in wrt])
    with ir.InsertionPoint(out.regions[0].blocks[0]), fn.location:
        for op in ops:
            copy = clone_op(op, [env[v] for v in op.operands])
            env.update(zip(op.results, copy.results))
            in_tangents = [tangents.get(v) for v in op.operands]
            if not any(r in active for r in op.results) or all(t is None for t in in_tangents):
                continue
            results = apply_rule(op, "jvp", grad_location(op, "tangent"),
                                 [env[v] for v in op.operands], list(copy.results), in_tangents)
            check_rule_result(op, "JVP", results, op.results)
            for r, t in zip(op.results, results):
                if t is not None and r in active:
                    tangents[r] = t
        out_tangents = []
        for i in tangent_outputs:
            t = tangents.get(returned[i])
            if t is None:
                s = spec(env[returned[i]])
                t = Builder(fn.location).full(shape=s.shape, dtype=s.dtype, value=0.0)
            out_tangents.append(t)
        func.ReturnOp([env[v] for v in returned] + out_tangents, loc=fn.location)
    erase_dead_ops(out)
    out.attributes["dg.num_outputs"] = ir.IntegerAttr.get(
        ir.IntegerType.get_signless(64, fn.context), len(outs))
    set_i64s(out, "dg.wrt", wrt)
    set_i64s(out, TANGENT_OUTPUTS, tangent_outputs)
    return out


@register_pass("dg-jvp", "forward mode: @f -> @f_jvp(inputs, tangents) -> (outputs, tangents); "
               "wrt=0,2 picks the inputs", wrt="")
def jvp_pass(module: ir.Operation, wrt: str = "") -> None:
    option = parse_wrt(wrt)
    for fn in functions_to_differentiate(module):
        build_jvp(fn, option)
        mark_differentiated(fn)

"""dg-autodiff: reverse-mode differentiation as a transformation of dg IR.

Two public steps, so other passes can reuse them:

- `build_joint(f)` emits `@f_vjp(inputs..., cotangents...) -> (outputs..., grads...)`:
  f's ops cloned, then each op's VJP rule applied in reverse order. The joint
  function is ordinary dg IR, so it can itself be differentiated (double backward).
- `partition(joint, saved)` splits a joint function into `@f_fwd` (outputs, then
  the saved values) and `@f_bwd(saved..., cotangents...) -> grads`; whatever the
  backward needs that is not saved is recomputed in it (dg-remat picks `saved`).

The pass runs both (or only the first with `joint=true`); see the "Autodiff
contract" in docs/autodiff.md for the functions' signatures and attributes.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

from mlir import ir
from mlir.dialects import func

from ...dialects.builder import Builder
from ...dialects.types import TensorSpec
from .common import (CT_OUTPUTS, NUM_OUTPUTS, REACHED_BY, WRT, Derivation, active_values,
                     apply_rule, body_ops, check_rule_result, clone_op, func_name, function_type,
                     functions_to_differentiate, get_i64s, grad_location, mark_differentiated,
                     new_function, outputs_reaching, parse_indices, set_i64s, set_reached_by)
from .cotangent_sum import sum_cotangents
from ...dialects.core import is_public
from ...passes import PassError, functions

log = logging.getLogger(__name__)


def build_joint(fn: ir.Operation, wrt: Sequence[int] | None = None, *,
                name: str | None = None, ct_outputs: Sequence[int] | None = None) -> ir.Operation:
    """Emit `@<f>_vjp(inputs..., cotangents...) -> (outputs..., grads...)` after `fn`.

    `wrt`: input indices to differentiate (default: `fn`'s `dg.wrt`, else every
    floating-point input). One cotangent argument per floating-point output, in
    order, or per output of `ct_outputs` only: the others get no gradient, as in
    eager, where a backward builds no terms for them. Cotangents of values used
    several times are summed with dg.add; ops that get no cotangent, or that do not
    depend on a wrt input, are skipped; a wrt input that gets no gradient returns
    zeros. The result carries
    `dg.num_outputs`, `dg.wrt`, `dg.ct_outputs` and `dg.reached_by` (per wrt input,
    the outputs whose cotangents reach its gradient: the runtime gives None, as
    eager does, where none of them has one), which `partition` reads.
    """
    fn = fn.operation
    d = Derivation.start(fn, wrt, name or f"{func_name(fn)}_vjp", reverse=True,
                         outputs=ct_outputs)
    env, returned = d.env, d.returned
    # forward value (in fn) -> the terms of its cotangent (in the joint function), summed
    # when first read, so that zero-padded slice cotangents can merge (cotangent_sum)
    terms: dict = {}

    def accumulate(value: ir.Value, ct: ir.Value, loc: ir.Location) -> None:
        terms.setdefault(value, []).append((ct, loc))

    def cotangent(value: ir.Value) -> ir.Value | None:
        if value not in terms:
            return None
        if len(terms[value]) > 1:
            terms[value] = [(sum_cotangents(terms[value]), terms[value][-1][1])]
        return terms[value][0][0]

    with ir.InsertionPoint(d.fn.regions[0].blocks[0]), fn.location:
        for op in d.ops:
            d.replay(op)
        active = active_values(d.ops, [d.source_args[i] for i in d.wrt])
        for i, ct in zip(d.float_outputs, d.seeds):
            if returned[i] in active:
                accumulate(returned[i], ct, fn.location)
        for op in reversed(d.ops):
            out_cts = [cotangent(r) for r in op.results]
            if all(c is None for c in out_cts) or not any(v in active for v in op.operands):
                continue
            loc = grad_location(op, "grad")
            grads = apply_rule(op, "vjp", loc, [env[v] for v in op.operands],
                                [env[r] for r in op.results], out_cts)
            check_rule_result(op, "VJP", grads, op.operands)
            for v, g in zip(op.operands, grads):
                if g is not None and v in active:
                    accumulate(v, g, loc)
        # an input the outputs do not depend on gets a zero gradient
        inputs = [d.source_args[i] for i in d.wrt]
        grads = [cotangent(a) if a in terms else d.zeros_like(a) for a in inputs]
        reach = outputs_reaching(d.ops, [returned[i] for i in d.float_outputs])
        joint = d.finish(grads, CT_OUTPUTS)
        set_reached_by(joint, [[d.float_outputs[k] for k in reach.get(a, ())] for a in inputs])
        return joint


@dataclass
class _Joint:
    """A joint function's pieces, split by what depends on the cotangents."""

    fn: ir.Operation
    ops: list[ir.Operation]
    returned: list[ir.Value]
    inputs: list[ir.Value]
    cotangents: list[ir.Value]
    num_outputs: int
    tainted: set  # values that depend on a cotangent: the backward proper
    from_inputs: set  # values that depend on an input

    @staticmethod
    def of(joint: ir.Operation) -> "_Joint":
        for attr in (NUM_OUTPUTS, WRT, CT_OUTPUTS):
            if attr not in joint.attributes:
                raise PassError(f"@{func_name(joint)} is not a joint function (no {attr}); "
                                "make one with build_joint", joint.location)
        ops, returned = body_ops(joint)
        args = list(joint.regions[0].blocks[0].arguments)
        n_in = len(args) - len(get_i64s(joint, CT_OUTPUTS))
        info = _Joint(joint, ops, returned, args[:n_in], args[n_in:],
                      ir.IntegerAttr(joint.attributes[NUM_OUTPUTS]).value, set(args[n_in:]),
                      set(args[:n_in]))
        for op in ops:
            for deps in (info.tainted, info.from_inputs):
                if any(v in deps for v in op.operands):
                    deps.update(op.results)
        return info

    def boundary(self) -> list[ir.Value]:
        """Forward values the backward reads, in first-use order."""
        seen: dict = {}
        for op in self.ops:
            if any(r in self.tainted for r in op.results):
                for v in op.operands:
                    if v not in self.tainted:
                        seen.setdefault(v, None)
        for g in self.returned[self.num_outputs:]:
            if g not in self.tainted:
                seen.setdefault(g, None)
        return list(seen)


def default_saved(joint: ir.Operation) -> list[ir.Value]:
    """The default saved set: every value of the forward that the backward reads,
    except those that do not depend on any input (constants: recomputed)."""
    info = _Joint.of(joint.operation)
    return [v for v in info.boundary() if v in info.from_inputs]


def partition(joint: ir.Operation, saved: Sequence[ir.Value] | None = None, *,
              fwd_name: str | None = None,
              bwd_name: str | None = None) -> tuple[ir.Operation, ir.Operation]:
    """Split a joint function (from `build_joint`) into forward and backward functions.

    `saved` are values of `joint` that do not depend on a cotangent (inputs or
    results of forward ops); default `default_saved(joint)`. `@fwd(inputs...)`
    returns the outputs then `saved`; `@bwd(saved..., cotangents...)` returns the
    grads, recomputing from `saved` every other forward value it needs (a
    PassError names a needed input that is neither saved nor recomputable).
    Names default to `<f>_fwd` / `<f>_bwd` for a joint named `<f>_vjp`. Both are
    placed after `joint`; `fwd` is marked `dg.differentiated`; `joint` is left as is.
    """
    joint = joint.operation
    info = _Joint.of(joint)
    saved = list(dict.fromkeys(default_saved(joint) if saved is None else saved))
    for v in saved:
        if v in info.tainted:
            raise PassError(f"cannot save {v.get_name()} of @{func_name(joint)}: it depends on "
                            "a cotangent, so it belongs to the backward", joint.location)
    base = func_name(joint).removesuffix("_vjp")
    producer = {r: i for i, op in enumerate(info.ops) for r in op.results}
    outputs, grads = info.returned[:info.num_outputs], info.returned[info.num_outputs:]

    recompute = _needed_ops(info, producer, info.boundary(), stop=set(saved), what="backward")
    forward = _needed_ops(info, producer, outputs + saved, stop=set(), what="forward")

    fwd = new_function(joint.parent, joint, fwd_name or f"{base}_fwd",
                       [v.type for v in info.inputs], [v.type for v in outputs + saved],
                       joint.location)
    _fill(fwd, info, dict(zip(info.inputs, fwd.regions[0].blocks[0].arguments)), forward,
          outputs + saved)
    fwd.attributes[NUM_OUTPUTS] = joint.attributes[NUM_OUTPUTS]
    mark_differentiated(fwd)

    bwd = new_function(joint.parent, fwd, bwd_name or f"{base}_bwd",
                       [v.type for v in saved + info.cotangents], [v.type for v in grads],
                       joint.location)
    bwd_args = list(bwd.regions[0].blocks[0].arguments)
    backward = recompute | {i for i, op in enumerate(info.ops)
                            if any(r in info.tainted for r in op.results)}
    _fill(bwd, info, dict(zip(saved + info.cotangents, bwd_args)), backward, grads)
    for attr in (WRT, CT_OUTPUTS, REACHED_BY):
        bwd.attributes[attr] = joint.attributes[attr]
    log.debug("partitioned @%s: %d saved values, %d ops recomputed in the backward",
              func_name(joint), len(saved), len(recompute))
    return fwd, bwd


def _needed_ops(info: _Joint, producer: dict, roots: list[ir.Value], *, stop: set,
                what: str) -> set[int]:
    """Indices of the ops computing `roots` from `stop` values and (forward) inputs."""
    needed: set[int] = set()
    stack, seen = list(roots), set()
    while stack:
        v = stack.pop()
        if v in stop or v in seen:
            continue
        seen.add(v)
        if v not in producer:  # a block argument
            if what == "backward" and v in info.from_inputs:
                raise PassError(f"the backward of @{func_name(info.fn)} needs input "
                                f"#{info.inputs.index(v)}, which is not saved: add it (or every "
                                "value computed from it that the backward reads) to `saved`",
                                info.fn.location)
            continue
        i = producer[v]
        if i not in needed:
            needed.add(i)
            stack.extend(info.ops[i].operands)
    return needed


def _fill(fn: ir.Operation, info: _Joint, env: dict, op_indices: set[int],
          results: list[ir.Value]) -> None:
    """Clone the chosen ops of the joint function (in order) into `fn` and return `results`."""
    with ir.InsertionPoint(fn.regions[0].blocks[0]):
        for i, op in enumerate(info.ops):
            if i in op_indices:
                copy = clone_op(op, [env[v] for v in op.operands])
                env.update(zip(op.results, copy.results))
        func.ReturnOp([env[v] for v in results], loc=info.fn.location)


def drop_cotangents(bwd: ir.Operation, outputs: Sequence[int]) -> None:
    """Specialize `@f_bwd` to zero cotangents for `outputs` (indices of the forward's
    outputs, among `dg.ct_outputs`): their arguments become zero splats and go, and
    `dg.ct_outputs` lists the others. Autograd gives a backward no gradient for an output
    the loss does not read (a language model's logits next to its loss); materialized,
    the zeros cost a fill and a pass over memory reading them, and a splat costs nothing
    in the fusion regions that read it."""
    bwd = bwd.operation
    ct_outputs = get_i64s(bwd, CT_OUTPUTS)
    unknown = sorted(set(outputs) - set(ct_outputs))
    if unknown:
        raise PassError(f"@{func_name(bwd)} takes no cotangent for outputs {unknown} "
                        f"(dg.ct_outputs = {ct_outputs})", bwd.location)
    block = bwd.regions[0].blocks[0]
    first = len(block.arguments) - len(ct_outputs)
    positions = sorted(first + ct_outputs.index(o) for o in outputs)
    with ir.InsertionPoint.at_block_begin(block):
        b = Builder(bwd.location)
        for p in positions:
            arg = block.arguments[p]
            s = TensorSpec.from_mlir(arg.type)
            arg.replace_all_uses_with(b.full(shape=s.shape, dtype=s.dtype, value=0.0))
    for p in reversed(positions):
        block.erase_argument(p)
    ftype = function_type(bwd)
    bwd.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([a.type for a in block.arguments], list(ftype.results)))
    set_i64s(bwd, CT_OUTPUTS, [o for o in ct_outputs if o not in set(outputs)])


def drop_cotangents_pass(module: ir.Operation, outputs: str = "") -> None:
    """`drop_cotangents` on each backward (a public function taking cotangents that is
    not a joint `@f_vjp`, which also returns the outputs)."""
    dropped = parse_indices(outputs, "outputs")
    if not dropped:
        return
    for fn in functions(module):
        if is_public(fn) and CT_OUTPUTS in fn.attributes and NUM_OUTPUTS not in fn.attributes:
            drop_cotangents(fn, dropped)


def autodiff_pass(module: ir.Operation, wrt: str = "", joint: bool = False,
                  ct_outputs: str = "") -> None:
    inputs, outputs = parse_indices(wrt), parse_indices(ct_outputs, "ct_outputs")
    for fn in functions_to_differentiate(module):
        j = build_joint(fn, inputs, ct_outputs=outputs)
        mark_differentiated(fn)
        if joint:
            continue
        partition(j)
        j.erase()

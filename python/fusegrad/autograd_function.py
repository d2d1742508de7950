"""Run a compiled Program on tensors, through torch.autograd when gradients are needed.

`run_program(program, inputs)` is the one entry point. With grad mode on and
a floating-point input requiring grad, it calls the compiled `@f_fwd` inside
`runtime.autograd.CompiledFunction`, whose backward calls the compiled
`@f_bwd` on the values `@f_fwd` saved. Otherwise it calls the plain compiled
forward and saves nothing.

Double backward: when backward itself runs with grad mode on
(`create_graph=True`), the gradient is computed by the joint
`@f_vjp(inputs, cotangents)` Program through `run_program` again, so it is
differentiable in turn (to any order). That needs the original inputs, so
they are kept too unless `CompileOptions.double_backward` is False.
"""
from __future__ import annotations

import functools
import logging
from typing import Mapping, Sequence

import torch
import torch.autograd.forward_ad as fwAD

from .program import Program
from .runtime.autograd import CompiledFunction, fresh_seed, unaliased

log = logging.getLogger(__name__)


def with_seed(program: Program, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """`inputs` plus a fresh seed (on their device) when `program` takes one (random ops)
    and it is missing."""
    inputs = list(inputs)
    if program.seed_input is not None and len(inputs) == program.seed_input:
        inputs.append(fresh_seed(inputs[0].device if inputs else "cpu"))
    return inputs


def run_program(program: Program, inputs: Sequence[torch.Tensor], *,
                mutated: Sequence[int] = (), recorded: Sequence[int] = (),
                sizes: Mapping[str, int] | None = None) -> list[torch.Tensor]:
    """Outputs of `program` on `inputs` (a seed input, if any, is appended here).
    `sizes`: values of its sizes the inputs do not show (integer inputs that are sizes of
    their own: `SymbolicInputs.scalars`).

    `mutated`: indices of inputs the caller overwrites after the call with the
    first `len(mutated)` outputs (see `capture.Captured`); the inputs are saved by
    value, and autograd treats those outputs as constants except the `recorded`
    ones (indices into `mutated`), whose copies into the inputs it records.
    """
    inputs = with_seed(program, inputs)
    tangents = forward_tangents(inputs)
    if tangents:
        return _run_jvp(program, inputs, tangents, sizes)
    if torch.is_grad_enabled():
        wrt = tuple(i for i, x in enumerate(inputs) if x.requires_grad and x.is_floating_point())
        if wrt:
            constant = constant_outputs(mutated, recorded)
            again = (functools.partial(_joint_grads, program, wrt, constant, sizes)
                     if program.options.double_backward else None)
            return list(CompiledFunction.apply(program.training(wrt, constant), tuple(mutated),
                                               tuple(recorded), again, program.label,
                                               None if sizes is None else dict(sizes), *inputs))
    # No input requires grad here, so nothing the executable does (allocating outputs,
    # making inputs contiguous) is recorded by autograd, with or without grad mode.
    forward = program.forward()
    outputs = forward(*inputs) if sizes is None else forward(*inputs, sizes=sizes)
    # a compiled function's outputs are fresh tensors unless it hands an argument back
    if not forward.returns_arguments:
        return outputs
    return unaliased(outputs, inputs)


def forward_tangents(inputs: Sequence[torch.Tensor]) -> dict[int, torch.Tensor]:
    """The tangents of the dual tensors among `inputs` (forward-mode AD), by position;
    empty outside a `forward_ad.dual_level()`."""
    if fwAD._current_level < 0:
        return {}
    found = {}
    for i, x in enumerate(inputs):
        tangent = fwAD.unpack_dual(x).tangent if isinstance(x, torch.Tensor) else None
        if tangent is not None and x.is_floating_point():
            found[i] = tangent
    return found


def _run_jvp(program: Program, inputs: Sequence[torch.Tensor],
             tangents: dict[int, torch.Tensor],
             sizes: Mapping[str, int] | None = None) -> list[torch.Tensor]:
    """Forward mode: the compiled `@f_jvp` on the primals and the dual inputs' tangents,
    its outputs made dual again (each float output with its tangent). Run through
    `run_program`, so reverse mode still works on the primals."""
    wrt = tuple(sorted(tangents))
    primals = [fwAD.unpack_dual(x).primal if i in tangents else x for i, x in enumerate(inputs)]
    results = run_program(program.jvp(wrt), [*primals, *(tangents[i] for i in wrt)],
                          sizes=sizes)
    outputs = results[:program.num_results]
    for k, tangent in zip(program.float_outputs, results[program.num_results:]):
        outputs[k] = fwAD.make_dual(outputs[k], tangent)
    return outputs


def constant_outputs(mutated: Sequence[int], recorded: Sequence[int]) -> tuple[int, ...]:
    """The outputs autograd treats as constants (`CompiledFunction`): the new values of
    mutated inputs whose copy it does not record. No gradient ever reaches them."""
    return tuple(j for j in range(len(mutated)) if j not in recorded)


def _joint_grads(program: Program, wrt: tuple[int, ...], constant: tuple[int, ...],
                 sizes: Mapping[str, int] | None, inputs: Sequence[torch.Tensor],
                 cts: Sequence[torch.Tensor | None]) -> list[torch.Tensor]:
    """Gradients via the joint `@f_vjp`, recorded by autograd (create_graph=True). Outputs
    without a cotangent take none: eager builds no backward terms for them, so the
    gradients depend on no input through them (a second derivative gets None there)."""
    outputs = program.training(wrt, constant).ct_outputs
    given = [ct for ct in cts if ct is not None]
    joint = program.joint(wrt, None if len(given) == len(cts) and not constant else
                          [o for o, ct in zip(outputs, cts) if ct is not None])
    results = run_program(joint, [*inputs, *given], sizes=sizes)
    return results[program.num_results:]

"""Run a compiled Program on tensors, through torch.autograd when gradients are needed.

`run_program(program, inputs)` is the one entry point. With grad mode on and
a floating-point input requiring grad, it calls the compiled `@f_fwd` inside
`ProgramFunction` (a torch.autograd.Function) whose backward calls the
compiled `@f_bwd` on the values `@f_fwd` saved (held by `save_for_backward`,
so they are freed after backward and `retain_graph=True` works). Otherwise it
calls the plain compiled forward and saves nothing.

Double backward: when backward itself runs with grad mode on
(`create_graph=True`), the gradient is computed by the joint
`@f_vjp(inputs, cotangents)` Program through `run_program` again, so it is
differentiable in turn (to any order). That needs the original inputs, so
they are saved too unless `CompileOptions.double_backward` is False.
"""
from __future__ import annotations

import logging
from typing import Sequence

import torch

from .program import Program, Training

log = logging.getLogger(__name__)


def _seed() -> torch.Tensor:
    """A fresh 0-d i64 seed from torch's default generator (so torch.manual_seed governs it)."""
    return torch.randint(-2**63, 2**63 - 1, (), dtype=torch.int64)


def with_seed(program: Program, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """`inputs` plus a fresh seed when `program` takes one (random ops) and it is missing."""
    inputs = list(inputs)
    if program.seed_input is not None and len(inputs) == program.seed_input:
        inputs.append(_seed())
    return inputs


def unaliased(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Outputs never alias inputs (an executable hands back an input it returns)."""
    ptrs = {x.untyped_storage().data_ptr() for x in inputs if x.numel()}
    return [o.clone() if o.numel() and o.untyped_storage().data_ptr() in ptrs else o
            for o in outputs]


def run_program(program: Program, inputs: Sequence[torch.Tensor], *,
                mutated: Sequence[int] = ()) -> list[torch.Tensor]:
    """Outputs of `program` on `inputs` (a seed input, if any, is appended here).

    `mutated`: indices of inputs the caller overwrites after the call with the
    first `len(mutated)` outputs (see `capture.Captured`); autograd treats those
    outputs as constants, and the inputs are saved by value.
    """
    inputs = with_seed(program, inputs)
    if torch.is_grad_enabled():
        wrt = tuple(i for i, x in enumerate(inputs) if x.requires_grad and x.is_floating_point())
        if wrt:
            return list(ProgramFunction.apply(program, wrt, tuple(mutated), *inputs))
    # No input requires grad here, so nothing the executable does (allocating outputs,
    # making inputs contiguous) is recorded by autograd, with or without grad mode.
    forward = program.forward()
    outputs = forward(*inputs)
    # a compiled function's outputs are fresh tensors unless it hands an argument back
    if not forward.returns_arguments:
        return outputs
    return unaliased(outputs, inputs)


class ProgramFunction(torch.autograd.Function):
    """Compiled forward/backward of one Program as an autograd node."""

    @staticmethod
    def forward(ctx, program: Program, wrt: tuple[int, ...], mutated: tuple[int, ...],
                *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t = program.training(wrt)
        results = t.fwd(*inputs)
        outputs = unaliased(results[:t.num_outputs], inputs)
        saved = unaliased(results[t.num_outputs:], [inputs[i] for i in mutated])
        keep_inputs = program.options.double_backward
        # inputs the caller overwrites next are kept by value (the backward reads the old one)
        kept = [x.clone() if i in mutated else x for i, x in enumerate(inputs)] if keep_inputs else []
        ctx.save_for_backward(*saved, *kept)
        ctx.program, ctx.training, ctx.num_saved = program, t, len(saved)
        ctx.keep_inputs, ctx.num_inputs = keep_inputs, len(inputs)
        ctx.mark_non_differentiable(*(o for i, o in enumerate(outputs)
                                      if i < len(mutated) or not o.is_floating_point()))
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *cotangents: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        tensors = ctx.saved_tensors  # raises on a second backward without retain_graph
        t: Training = ctx.training
        cts = [cotangents[i].contiguous() for i in t.ct_outputs]
        if torch.is_grad_enabled():
            grads = _differentiable_grads(ctx, tensors[ctx.num_saved:], cts)
        else:
            grads = t.bwd(*tensors[:ctx.num_saved], *cts)
        full: list[torch.Tensor | None] = [None] * ctx.num_inputs
        for i, g in zip(t.wrt, grads):
            full[i] = g
        return (None, None, None, *full)


def _differentiable_grads(ctx, inputs: Sequence[torch.Tensor],
                          cts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Gradients via the joint `@f_vjp`, recorded by autograd (create_graph=True)."""
    program: Program = ctx.program
    if not ctx.keep_inputs:
        raise RuntimeError(f"fusegrad: backward with create_graph=True through {program.label} "
                           "needs its inputs, which were not saved: compile with "
                           "double_backward=True")
    joint = program.joint(ctx.training.wrt)
    results = run_program(joint, [*inputs, *cts])
    return results[program.num_results:]

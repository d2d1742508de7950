"""The torch.compile backend: one Dynamo graph -> a compiled callable (or eager fallback).

Per graph: capture (functional core ATen) -> import to dg -> [dg-autodiff when
training] -> dg-remat/dg-fuse when available -> compile_cpu. Dynamo calls the
backend once per graph specialisation (it guards on shapes, dtypes, grad mode
and requires_grad, and recompiles on a change), so the returned `CompiledGraph`
is specialised to the example inputs and compiles each variant it needs
(inference, training for a set of wrt inputs) once.

Anything fusegrad cannot compile (an unsupported op, a lowering failure)
produces one warning naming the op and location, and the graph runs eagerly:
never a crash, never a wrong answer.
"""
from __future__ import annotations

import logging
import warnings
from typing import Any, Callable, Sequence

import torch

from .autograd_function import run_program
from .capture import Captured, capture
from .program import CompileOptions, Program

log = logging.getLogger(__name__)


class FusegradFallbackWarning(UserWarning):
    """A graph could not be compiled and runs in eager PyTorch."""


def fallback_warning(label: str, error: BaseException) -> None:
    """Warn once (warnings + logging) that `label` runs eagerly because of `error`."""
    from .importer import UnsupportedOp

    if isinstance(error, UnsupportedOp):
        reason = str(error)
    else:
        reason = f"fusegrad could not compile {label}: {type(error).__name__}: {error}; " \
                 "this graph runs eagerly instead"
    log.warning("%s", reason)
    log.debug("fallback cause", exc_info=error)
    warnings.warn(reason, FusegradFallbackWarning, stacklevel=3)


class CompiledGraph:
    """Calls the compiled program like the original graph: lifted parameters
    prepended, mutated inputs written back, the user's output structure rebuilt.
    Falls back to `eager` (with one warning) if compiling a variant fails."""

    def __init__(self, captured: Captured, program: Program, eager: Callable[..., Any]) -> None:
        self.captured = captured
        self.program = program
        self.eager = eager
        self.failed = False

    def __call__(self, *args: torch.Tensor) -> Any:
        if self.failed:
            return self.eager(*args)
        inputs = [*self.captured.lifted, *args]
        if torch.is_grad_enabled() and any(inputs[i].requires_grad for i in self.captured.mutated):
            return self._fail(NotImplementedError(
                "an input that requires grad is mutated in place; compile without the in-place "
                "update"), args)
        try:
            outputs = run_program(self.program, inputs, mutated=self.captured.mutated)
        except Exception as e:  # building a lazily compiled variant failed: eager is still right
            return self._fail(e, args)
        n = self.captured.num_mutations
        self.captured.write_back(inputs, outputs[:n])
        return self.captured.rebuild(outputs[n:])

    def _fail(self, error: BaseException, args: Sequence[torch.Tensor]) -> Any:
        fallback_warning(self.program.label, error)
        self.failed = True
        return self.eager(*args)


def compile_graph(gm: torch.fx.GraphModule, example_inputs: Sequence[torch.Tensor],
                  options: CompileOptions) -> CompiledGraph:
    """Capture, import and compile the variant the example inputs need (raises on failure)."""
    captured = capture(gm, example_inputs)
    program = Program.from_graph(captured.gm, options)
    inputs = [*captured.lifted, *example_inputs]
    wrt = tuple(i for i, x in enumerate(inputs) if x.requires_grad and x.is_floating_point())
    if torch.is_grad_enabled() and wrt:
        program.training(wrt)
    else:
        program.forward()
    return CompiledGraph(captured, program, gm.forward)


def fusegrad_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[torch.Tensor],
                     options: dict[str, Any] | None = None, **kwargs: Any) -> Callable[..., Any]:
    """torch.compile backend (`backend="fusegrad"`).

    Options are `CompileOptions` fields, given as keywords (functools.partial)
    or as torch.compile's `options={...}` dict.
    """
    try:
        return compile_graph(gm, example_inputs, CompileOptions(**(options or {}), **kwargs))
    except Exception as e:  # any failure: eager, with the reason
        fallback_warning("a graph", e)
        return gm.forward

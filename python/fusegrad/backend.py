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
from .runtime.cpu import OutOfRangeIndex

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
        except OutOfRangeIndex:  # bad input data, raised where eager raises: not a fallback
            raise
        except Exception as e:  # building a lazily compiled variant failed: eager is still right
            return self._fail(e, args)
        n = self.captured.num_mutations
        self.captured.write_back(inputs, outputs[:n])
        return self.captured.rebuild(outputs[n:])

    def _fail(self, error: BaseException, args: Sequence[torch.Tensor]) -> Any:
        fallback_warning(self.program.label, error)
        self.failed = True
        return self.eager(*args)


def compile_graph(gm: Callable[..., Any], example_inputs: Sequence[torch.Tensor],
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
    return CompiledGraph(captured, program, getattr(gm, "forward", gm))


def _is_symbolic(x: Any) -> bool:
    return isinstance(x, torch.SymInt) or (
        isinstance(x, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in x.shape))


class ShapeSpecializedGraph:
    """A dynamic-shape Dynamo graph, compiled once per concrete signature at call time.

    dg is statically shaped: when Dynamo marks dims dynamic (it does after a
    shape change unless `dynamic=False`), each new shape (and each value of an
    integer input) gets its own `CompiledGraph`, with the integers baked in.
    """

    def __init__(self, gm: torch.fx.GraphModule, options: CompileOptions) -> None:
        self.gm = gm
        self.options = options
        self.variants: dict[tuple, Callable[..., Any]] = {}

    def __call__(self, *args: Any) -> Any:
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ("int", int(a))
                    for a in args)
        variant = self.variants.get(key)
        if variant is None:
            variant = self.variants[key] = self._compile(args)
        return variant(*[a for a in args if isinstance(a, torch.Tensor)])

    def _compile(self, args: Sequence[Any]) -> Callable[..., Any]:
        where = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

        def specialized(*tensors: torch.Tensor) -> Any:
            full = list(args)
            for i, t in zip(where, tensors):
                full[i] = t
            return self.gm(*full)
        log.info("compiling a dynamic-shape graph for %s", [
            tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args])
        try:
            return compile_graph(specialized, [args[i] for i in where], self.options)
        except Exception as e:  # this signature runs eagerly; others may still compile
            fallback_warning("a graph", e)
            return specialized


def fusegrad_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[torch.Tensor],
                     options: dict[str, Any] | None = None, **kwargs: Any) -> Callable[..., Any]:
    """torch.compile backend (`backend="fusegrad"`).

    Options are `CompileOptions` fields, given as keywords (functools.partial)
    or as torch.compile's `options={...}` dict.
    """
    try:
        opts = CompileOptions(**(options or {}), **kwargs)
        if any(_is_symbolic(x) for x in example_inputs):
            return ShapeSpecializedGraph(gm, opts)
        return compile_graph(gm, example_inputs, opts)
    except Exception as e:  # any failure: eager, with the reason
        fallback_warning("a graph", e)
        return gm.forward

"""The torch.compile backend: one Dynamo graph -> a compiled callable (or eager fallback).

Per graph: capture (functional core ATen) -> import to dg -> [dg-autodiff when
training] -> dg-remat/dg-fuse when available -> compile_cpu. Dynamo calls the
backend once per graph specialisation (it guards on shapes, dtypes, grad mode
and requires_grad, and recompiles on a change), so the returned `CompiledGraph`
is specialised to the example inputs and compiles each variant it needs
(inference, training for a set of wrt inputs) once.

An op fusegrad cannot import runs eagerly in its place, and the rest of the
graph is compiled around it (`graph_split`), with one warning naming the op
and the user's source line. Any other failure (a lowering error) runs the
whole graph eagerly, with one warning: never a crash, never a wrong answer.
A user's own mistake, an unknown option or mode, is an error instead.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import time
import warnings
from typing import Any, Callable, Sequence

import torch
from torch.utils import _pytree as pytree

from ..autograd_function import constant_outputs, forward_tangents, run_program
from . import compile_history, graph_cache
from .capture import Captured, capture, capture_symbolic
from ..devices import DeviceError, select_target
from .graph_split import (CONTROL_FLOW, USER_BACKWARD, EagerPart, complex_ops,
                          eager_higher_order_ops, op_name, origin, read_inplace_results_as_self,
                          runs_transforms, split_at)
from .importer import UnsupportedOp, describe_location
from ..program import SLOW_COMPILE_SECONDS, CompileOptions, Program
from ..runtime.cpu import OutOfRangeIndex
from .stop_gradient import has_no_grad_regions, mark_stop_gradients

log = logging.getLogger(__name__)

# values of float arguments compiled per graph (Dynamo's own recompile limit is 8):
# a float that changes at every step would otherwise compile at every step
FLOAT_VALUES_COMPILED = 8
# signatures (shapes, integer and float values) a graph compiles before it asks that
# most calls reuse one: a size that depends on the data (`x[mask]`, `nonzero`) is new at
# nearly every call and compiled at every call (0.3-1 s each, against ~1 ms eager);
# bucketed sequence lengths compile once per bucket and are reused from then on
SIGNATURES_BEFORE_REUSE_CHECK = 32


class FusegradFallbackWarning(UserWarning):
    """A graph could not be compiled and runs in eager PyTorch."""


class FusegradEagerOpWarning(FusegradFallbackWarning):
    """An op could not be compiled: it runs eagerly, the rest of its graph is compiled."""


def fallback_warning(label: str, error: BaseException) -> None:
    """Warn once (warnings + logging) that `label` runs eagerly because of `error`."""
    if isinstance(error, UnsupportedOp):
        reason = f"{error}; this graph runs eagerly instead"
    else:
        reason = f"fusegrad could not compile {label}: {type(error).__name__}: {error}; " \
                 "this graph runs eagerly instead"
    log.warning("%s", reason)
    log.debug("fallback cause", exc_info=error)
    warnings.warn(reason, FusegradFallbackWarning, stacklevel=3)


class _RecompileLimitWarning(logging.Filter):
    """Dynamo says it stopped compiling a function (its recompile limit) only in its log,
    and the function and everything it calls then run eagerly: turn that record into a
    FusegradFallbackWarning naming the function and the fix."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if "hit config." in text and "limit" in text:
            lines = [line.strip() for line in text.splitlines()]
            limit = lines[0].split("hit ", 1)[-1]  # e.g. config.recompile_limit (8)
            where = next((line.split(":", 1)[1].strip() for line in lines
                          if line.startswith("function:")), "a function")
            message = (f"Dynamo hit torch._dynamo.{limit} at {where}: it and all it calls "
                       "now run eagerly, not compiled by fusegrad; call "
                       "torch._dynamo.reset() between models, or raise the limit")
            log.warning("%s", message)
            warnings.warn(message, FusegradFallbackWarning, stacklevel=2)
        return True


def warn_at_recompile_limit() -> None:
    """Install `_RecompileLimitWarning` on Dynamo's compile logger (once)."""
    logger = logging.getLogger("torch._dynamo.convert_frame")
    if not any(isinstance(f, _RecompileLimitWarning) for f in logger.filters):
        logger.addFilter(_RecompileLimitWarning())


class CompiledGraph:
    """Calls the compiled program like the original graph: lifted parameters
    prepended, mutated inputs written back, the user's output structure rebuilt.
    Falls back to `eager` (with one warning) if compiling a variant fails."""

    def __init__(self, captured: Captured, program: Program, eager: Callable[..., Any]) -> None:
        self.captured = captured
        self.program = program
        self.eager = eager
        self.failed = False
        # a capture for every size (`capture_symbolic`): the Dynamo arguments it takes, and
        # the inputs (lifted + those) the program takes, integer sizes being bound from
        # the tensors' shapes
        symbolic = captured.symbolic
        self._where = symbolic.where if symbolic is not None else None
        self._tensors = symbolic.tensors if symbolic is not None else None
        self._scalars = symbolic.scalars if symbolic is not None else {}
        self._mutated = captured.mutated if symbolic is None else \
            tuple(symbolic.tensors.index(i) for i in captured.mutated)
        self._warned_dual = False
        # set by LazyGraph from `mark_stop_gradients`: the graph has enable_grad() regions
        # although Dynamo traced it with grad disabled (what they compute records
        # gradients, the rest is behind stop_gradient), and values computed under no_grad
        self.enables_grad = False
        self.no_grad_regions = False
        # running statistics a normalization only reads here (eval mode)
        self._read_statistics = captured.statistics - set(captured.mutated)
        # the compiled forward bound to the lifted inputs, once known to need no glue
        self._inference: Callable[..., list[torch.Tensor]] | None = None

    def __call__(self, *args: torch.Tensor) -> Any:
        if self.enables_grad and not torch.is_grad_enabled():
            with torch.enable_grad():  # the graph's own enable_grad() regions record
                return self(*args)
        dynamo_args = args  # what eager takes
        if self._where is not None:  # the Dynamo graph's arguments: numbers baked in go
            args = tuple(args[i] for i in self._where)
        dual = bool(forward_tangents(args))
        if self._inference is not None and not dual and not (
                torch.is_grad_enabled() and any(a.requires_grad for a in args)):
            return tuple(self._inference(*args))
        if self.failed:
            return self.eager(*dynamo_args)
        inputs = [*self.captured.lifted, *args]
        if dual and (self.captured.mutated or self.no_grad_regions):
            # the compiled JVP would not write tangents into updated inputs, and the
            # stop_gradient of a no_grad() block would stop tangents eager's does not
            if not self._warned_dual:
                self._warned_dual = True
                fallback_warning(self.program.label, NotImplementedError(
                    "forward-mode AD (dual tensors) through a graph that updates its inputs "
                    "in place or has no_grad() blocks"))
            return self.eager(*dynamo_args)
        if self._read_statistics and torch.is_grad_enabled():
            inputs = self._statistics_by_value(inputs)
        recorded = self.captured.recorded(inputs)
        updated = [inputs[self.captured.mutated[j]] for j in recorded]
        if any(x.is_leaf and x.requires_grad for x in updated) or any(
                j in self.captured.unrecorded for j in recorded):
            # a leaf that requires grad: eager raises its own error; under no_grad: eager
            # passes the gradient of the updated tensor through unchanged, which the graph
            # does not express
            return self._fail(NotImplementedError(
                "an input that requires grad is updated in place while grad is disabled, "
                "or is a leaf"), dynamo_args)
        try:
            outputs = run_program(
                self.program, inputs if self._tensors is None else
                [inputs[k] for k in self._tensors], mutated=self._mutated, recorded=recorded,
                sizes={name: int(inputs[k]) for name, k in self._scalars.items()}
                if self._scalars else None)
        except OutOfRangeIndex:  # bad input data, raised where eager raises: not a fallback
            raise
        except Exception as e:  # building a lazily compiled variant failed: eager is still right
            return self._fail(e, dynamo_args)
        result = self.captured.finish(inputs, outputs)
        self._bind_inference()
        return result

    def _bind_inference(self) -> None:
        """Calls that record no gradient go straight to the compiled forward when it needs
        none of `__call__`'s glue: no mutated input, no random seed, outputs a tuple of
        fresh tensors (no view of an input or of another output), no lifted parameter that
        requires grad. Saves a small model a
        third of its call overhead."""
        program, captured = self.program, self.captured
        forward = program.compiled_forward
        if (self._inference is not None or forward is None or captured.mutated
                or self._where is not None
                or captured.checks or captured.output_views or program.seed_input is not None
                or forward.returns_arguments
                or not captured.outputs_are_tensor_tuple
                or any(x.requires_grad for x in captured.lifted)):
            return
        call = getattr(forward, "call", forward)
        self._inference = functools.partial(call, *captured.lifted) if captured.lifted else call

    def _statistics_by_value(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """The read-only running statistics as copies: the backward may save them, and a
        train-mode call before it updates them in place (eager's backward then reads the
        updated ones; ours, the values it used)."""
        return [x.clone() if i in self._read_statistics else x for i, x in enumerate(inputs)]

    def _fail(self, error: BaseException, args: Sequence[torch.Tensor]) -> Any:
        fallback_warning(self.program.label, error)
        self.failed = True
        return self.eager(*args)


def compile_graph(gm: Callable[..., Any], example_inputs: Sequence[torch.Tensor],
                  options: CompileOptions) -> CompiledGraph:
    """Capture, import and compile the variant the example inputs need (raises on failure).

    Logs the compile time per stage: at INFO when it took a while, else at DEBUG."""
    start = time.perf_counter()
    key = graph_cache.graph_key(gm, example_inputs, options, for_every_size=False)
    cached = graph_cache.load(key, gm, options)
    if cached is not None:
        return compile_captured(gm, cached.captured, [*cached.captured.lifted, *example_inputs],
                                options, start, cached=cached)
    captured = capture(gm, example_inputs, checks_as_outputs=True)
    return compile_captured(gm, captured, [*captured.lifted, *example_inputs], options, start,
                            key=key)


def compile_captured(gm: Callable[..., Any], captured: Captured,
                     inputs: Sequence[torch.Tensor], options: CompileOptions,
                     start: float, *, key: str | None = None,
                     cached: graph_cache.CachedCapture | None = None,
                     imported: Program | None = None) -> CompiledGraph:
    """Import and compile `captured` (captured from `gm` since `start`) for the variant
    `inputs` (lifted + the graph's arguments) need. A capture for every size
    (`Captured.symbolic`) compiles one program for all sizes; its arguments are the
    tensors among `inputs`. The capture and its import are stored in the graph cache
    under `key`; `cached`: both from there (`captured` is its capture); `imported`: the
    capture imported already (its `seconds` hold the import's time)."""
    symbolic = captured.symbolic
    tensors = list(inputs) if symbolic is None else [inputs[k] for k in symbolic.tensors]
    captured_at = time.perf_counter()
    if cached is not None:
        options = options.with_(target=cached.target)
        program = Program.from_text(cached.module, options)
    else:
        options = options.with_(target=select_target(options.target,
                                                     _named(gm, captured, tensors)))
        program = imported or Program.from_graph(captured.gm, options)
        program.options = options
        graph_cache.store(key, gm, captured, program.text, options.target, options)
    imported_in = program.seconds.pop("import", 0.0)
    program.seconds = {"capture": captured_at - start,
                       "import": imported_in + time.perf_counter() - captured_at,
                       **program.seconds}
    mutated = captured.mutated if symbolic is None else \
        tuple(symbolic.tensors.index(i) for i in captured.mutated)
    wrt = tuple(i for i, x in enumerate(tensors) if x.requires_grad and x.is_floating_point())
    if torch.is_grad_enabled() and wrt:
        training = program.training(wrt, constant_outputs(mutated, captured.recorded(inputs)))
        if symbolic is not None:
            # a program for every size compiles its backward now, where a failure still
            # means per-shape programs: at the first backward it would be an error (the
            # forward already ran); later backwards without some outputs' gradients
            # fall back to this one with zeros if theirs do not compile
            training.bwd
    else:
        program.forward()
    total = time.perf_counter() - start
    log.log(logging.INFO if total >= SLOW_COMPILE_SECONDS else logging.DEBUG,
            "%s: compiled in %.1f s (%s)", program.label, total,
            ", ".join(f"{k} {v:.2f} s" for k, v in program.seconds.items()))
    return CompiledGraph(captured, program, getattr(gm, "forward", gm))


def _named(gm: Callable[..., Any], captured: Captured,
           inputs: Sequence[torch.Tensor]) -> list[tuple[str, torch.Tensor]]:
    """The graph's tensors with the names errors give them: the Dynamo graph's
    placeholder names (`L_x_`, `L_self_..._weight_`) where there are, else positions."""
    names = [f"parameter #{i}" for i in range(len(captured.lifted))]
    placeholders = ([n.target for n in gm.graph.nodes if n.op == "placeholder"]
                    if isinstance(gm, torch.fx.GraphModule) else [])
    user = len(inputs) - len(names)
    names += placeholders if len(placeholders) == user else [f"input #{i}" for i in range(user)]
    # outputs the graph makes on a device of their own (`zeros_like(x, device="cpu")`):
    # the compiled program returns every tensor on its target
    (out,) = [n for n in captured.gm.graph.nodes if n.op == "output"]
    made = [(f"the result of {a.target}", a.meta["val"]) for a in pytree.tree_leaves(out.args)
            if isinstance(a, torch.fx.Node) and a.op == "call_function"
            and isinstance(a.meta.get("val"), torch.Tensor)]
    return list(zip(names, inputs)) + made


def _example_values(gm: torch.fx.GraphModule) -> list[Any] | None:
    """The example values (fake tensors, symbolic sizes) of `gm`'s inputs, as Dynamo
    recorded them and `split_module` copied them to a part, or None if one is missing."""
    values = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    return None if any(v is None for v in values) else values


def _is_symbolic(x: Any) -> bool:
    return isinstance(x, torch.SymInt) or (
        isinstance(x, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in x.shape))


def _read_floats(gm: torch.fx.GraphModule) -> frozenset[int]:
    """Positions of the inputs the graph only reads with `.item()` (Dynamo's unspecialized
    floats); their `.item()` nodes are removed, and the caller passes the values."""
    floats = set()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, node in enumerate(placeholders):
        value = node.meta.get("example_value")
        if not (isinstance(value, torch.Tensor) and value.dim() == 0 and node.users) or any(
                user.op != "call_method" or user.target != "item" for user in node.users):
            continue
        for item in list(node.users):
            item.replace_all_uses_with(node)
            gm.graph.erase_node(item)
        floats.add(i)
    if floats:
        gm.recompile()
    return frozenset(floats)


# (function to capture, its example tensors) -> a callable of those tensors; raises
# UnsupportedOp for an op it cannot compile
CompileFn = Callable[[Callable[..., Any], Sequence[torch.Tensor]], Callable[..., Any]]


def _returned_inputs(gm: torch.fx.GraphModule) -> list[tuple[int, int]]:
    """(output, input) positions of the graph's outputs that are its inputs: an input
    updated in place and returned (`return a.mul_(2)` is `a` in eager). The compiled
    program returns a fresh tensor there, equal to the input it wrote back; the caller
    gets the input itself, as in eager."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    outputs = gm.graph.output_node().args[0]
    if not isinstance(outputs, (tuple, list)):
        return []
    return [(k, placeholders.index(out)) for k, out in enumerate(outputs)
            if isinstance(out, torch.fx.Node) and out.op == "placeholder"]


def _returning_inputs(gm: torch.fx.GraphModule, call: Callable[..., Any]) -> Callable[..., Any]:
    """`call`, giving back the inputs the graph returns as themselves
    (`_returned_inputs`)."""
    returned = _returned_inputs(gm)
    if not returned:
        return call

    def returning_inputs(*a: Any) -> Any:
        outputs = list(call(*a))
        for k, i in returned:
            outputs[k] = a[i]
        return tuple(outputs)
    return returning_inputs


class _NumbersBakedIn(torch.nn.Module):
    """`gm` as a function of its tensor inputs, its number inputs fixed to `args`'.
    A module holding `gm`, so that capture lifts the parameters and buffers `gm` reads
    as attributes (an optimizer's, whose step Dynamo makes dynamic in a float when its
    weight decay changes) instead of meeting them as real tensors while tracing."""

    def __init__(self, gm: torch.fx.GraphModule, args: Sequence[Any]) -> None:
        super().__init__()
        self.gm = gm
        self.where = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        self.numbers = [None if i in self.where else a for i, a in enumerate(args)]

    def forward(self, *tensors: torch.Tensor) -> Any:
        full = list(self.numbers)
        for i, t in zip(self.where, tensors):
            full[i] = t
        return torch.fx.Interpreter(self.gm).run(*full)  # keeps node provenance


class LazyGraph:
    """A Dynamo graph, compiled at its first call.

    When Dynamo marks dims dynamic (it does after a shape change unless
    `dynamic=False`), the graph is captured for every size here, inside Dynamo's
    backend call (what the capture assumes of the sizes becomes Dynamo's guards),
    and its one program compiles at the first call. Where that capture is not
    possible, each new shape (and each value of an integer input) gets its own
    `CompiledGraph`, with the integers baked in (`per_shape_reason` says why).
    An op fusegrad cannot compile runs eagerly in its place and the rest of
    the graph is compiled around it (`graph_split`); the parts are `LazyGraph`s
    too, recorded with the eager parts in `eager_parts`. A graph of symbolic
    sizes is split here, at its capture, and its parts are captured for every
    size in turn. A Python float argument
    whose value changed between calls reaches the graph as a 0-d tensor read by
    `.item()` (Dynamo's unspecialized floats), which tracing cannot follow: its
    value is baked in per signature, as integers' are, for up to
    FLOAT_VALUES_COMPILED values; further values run eagerly, with a warning. So do
    new signatures once SIGNATURES_BEFORE_REUSE_CHECK are compiled while most calls
    brought a new one.
    """

    def __init__(self, gm: torch.fx.GraphModule, compile_fn: CompileFn, dynamic: bool,
                 eager_parts: list[EagerPart] | None = None,
                 example_inputs: Sequence[Any] | None = None,
                 options: CompileOptions | None = None,
                 origin: compile_history.DynamoOrigin | None = None) -> None:
        # before any split: it drops the grad-mode switches. Dynamo guards on the grad mode,
        # so the graph always runs in the one it was traced (and this is built) in
        self.enables_grad = mark_stop_gradients(gm, torch.is_grad_enabled())
        self.no_grad_regions = has_no_grad_regions(gm)
        read_inplace_results_as_self(gm)
        self.gm = gm
        self.compile_fn = compile_fn
        self.floats = _read_floats(gm)
        self.dynamic = dynamic or bool(self.floats)
        self.float_values: set[tuple[float, ...]] = set()  # those compiled
        self.float_values_capped = False
        self.eager_parts = [] if eager_parts is None else eager_parts
        self.static_variant: Callable[..., Any] | None = None
        self.variants: dict[tuple, Callable[..., Any]] = {}
        self.calls = self.reused = 0  # dynamic calls, and those a compiled variant ran
        self.signatures_capped = False
        # one program for every size: captured here, inside Dynamo's backend call (what the
        # trace assumes of the sizes becomes Dynamo's guards), compiled at the first call
        self.options = options
        self.origin = origin  # the Dynamo graph it is, for `compile_history`
        self.per_shape_reason = ""  # why a dynamic graph compiles per shape
        self.symbolic: Captured | None = None
        self.symbolic_call: Callable[..., Any] | None = None
        # its graph cache key, and the capture from there (`graph_cache`)
        self.symbolic_key: str | None = None
        self.symbolic_cached: graph_cache.CachedCapture | None = None
        self.symbolic_program: Program | None = None  # its import, until it compiles
        # the graph split around an op that runs eagerly, parts captured for every size
        self.split: Callable[..., Any] | None = None
        if dynamic and example_inputs is not None and options is not None \
                and not options.specialize_shapes:
            self.symbolic = self._capture_symbolic(example_inputs)

    def __call__(self, *args: Any) -> Any:
        if not self.dynamic:
            if self.static_variant is None:
                self.static_variant = self._compile(args)
            return self.static_variant(*args)
        if self.split is not None:
            return self.split(*args)
        if self.floats:
            args = tuple(a.item() if i in self.floats else a for i, a in enumerate(args))
        reason = ""
        if self.symbolic is not None:
            call = self._symbolic(args)
            if not isinstance(call, str):
                return call(*args)
            reason = call
        key = tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor)
                    else (type(a).__name__, a) for a in args)
        variant = self.variants.get(key)
        self.calls += 1
        if variant is not None:
            self.reused += 1
        else:
            if len(self.variants) >= SIGNATURES_BEFORE_REUSE_CHECK and 2 * self.reused < self.calls:
                self._warn_signatures_capped(args)
                return self.gm(*args)
            values = tuple(args[i] for i in sorted(self.floats))
            if values not in self.float_values and len(self.float_values) >= FLOAT_VALUES_COMPILED:
                if not self.float_values_capped:
                    self.float_values_capped = True
                    names = [n.target for n in self.gm.graph.nodes if n.op == "placeholder"]
                    fallback_warning("a graph", RuntimeError(
                        f"its float argument(s) {[names[i] for i in sorted(self.floats)]} took "
                        f"more than {FLOAT_VALUES_COMPILED} values, each compiled with its value "
                        "baked in; new values run eagerly (pass a value that changes at every "
                        "call as a tensor to compile it once)"))
                return self.gm(*args)
            log.info("compiling a graph for the inputs %s (shapes, integer and float values)",
                     [tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args])
            variant = self.variants[key] = self._compile(args, reason)
            self.float_values.add(values)
        return variant(*args)

    def _capture_symbolic(self, example_inputs: Sequence[Any]) -> Captured | None:
        """The graph captured for every size, or None (with the reason at INFO) where it
        compiles per shape instead (`capture_for_every_size`)."""
        assert self.options is not None
        by_design = self._eager_by_design()
        if by_design is not None and not self.floats and not runs_transforms(self.gm):
            self.split = self._split(*by_design, symbolic=True)
            return None
        self.symbolic_key = graph_cache.graph_key(self.gm, example_inputs, self.options,
                                                  for_every_size=True)
        self.symbolic_cached = graph_cache.load(self.symbolic_key, self.gm, self.options)
        if self.symbolic_cached is not None:
            return self.symbolic_cached.captured
        captured = self.capture_for_every_size(example_inputs)
        if not isinstance(captured, str):
            captured = self._import_symbolic(captured)
        if isinstance(captured, str):
            log.info("a graph compiles per shape, not once for every size: %s", captured)
            self.per_shape_reason = f"not for every size: {captured}"
            return None
        return captured

    def _import_symbolic(self, captured: Captured) -> Captured | str | None:
        """`captured`, imported into `symbolic_program`; or None where an op of it has no
        mapping (it runs eagerly) and the graph is split around it here (`split`), or why
        it compiles per shape instead (an op whose mapping refuses these sizes or
        arguments compiles per shape, as it may at static sizes)."""
        start = time.perf_counter()
        try:
            program = Program.from_graph(captured.gm, self.options)
        except UnsupportedOp as e:
            node = origin(self.gm, e)
            if node is None or e.mapped:  # (a mapping that needs static sizes compiles so)
                return f"{type(e).__name__}: {e}"
            if self.floats:
                return f"{e.op_name} runs eagerly in a graph that reads a float by value"
            self.split = self._split([node], EagerPart(e.op_name, e.reason, e.where,
                                                       (node.name,)), symbolic=True)
            return None
        except Exception as e:  # noqa: BLE001 - any reason means: per shape, as before
            return f"{type(e).__name__}: {e}"
        program.seconds["import"] = time.perf_counter() - start
        self.symbolic_program = program
        return captured

    def capture_for_every_size(self, example_inputs: Sequence[Any]) -> Captured | str:
        """The graph captured for every size, or why it compiles per shape instead: parts
        run eagerly, a transform inside, or what a capture for every size does not serve
        yet (`capture_symbolic`'s CaptureError: a symbolic float returned, a view whose
        geometry dg's sizes do not express)."""
        if runs_transforms(self.gm):
            return "a torch.func transform inside the graph"
        by_design = self._eager_by_design()
        if by_design is not None:
            return f"{by_design[1].op} runs eagerly: {by_design[1].reason}"
        # the floats the graph reads by value are baked in (those Dynamo does not guard
        # are checked at each call: `_symbolic`)
        example_inputs = [x.item() if i in self.floats and isinstance(x, torch.Tensor)
                          and not isinstance(x, torch._subclasses.FakeTensor) else x
                          for i, x in enumerate(example_inputs)]
        try:
            return capture_symbolic(self.gm, example_inputs, checks_as_outputs=True)
        except Exception as e:  # noqa: BLE001 - any reason means: per shape, as before
            return f"{type(e).__name__}: {e}"

    def _symbolic(self, args: Sequence[Any]) -> Callable[..., Any] | str:
        """The program for every size (compiled at the first call), or why this call needs
        one of its own: a number baked in that Dynamo does not guard changed, an integer
        size of its own below 1, or the program did not compile (then no call uses it)."""
        captured = self.symbolic
        assert captured is not None and captured.symbolic is not None
        symbolic = captured.symbolic
        changed = [i for i in symbolic.unguarded if args[i] != symbolic.numbers[i]]
        if changed:
            return f"{self._input_names(changed)} changed from the value(s) the program " \
                   "for every size has baked in"
        # dg's sizes are positive: an integer input that is a size of its own (an offset,
        # a diagonal) below 1 gets a program with its value baked in
        lifted = len(captured.lifted)
        below = [symbolic.where[k - lifted] for k in symbolic.scalars.values()
                 if args[symbolic.where[k - lifted]] < 1]
        if below:
            return f"{self._input_names(below)} below 1, which the program for every size " \
                   "takes as a (positive) size"
        if self.symbolic_call is None:
            start = time.perf_counter()
            inputs = [*captured.lifted, *(args[i] for i in captured.symbolic.where)]
            try:
                with torch.enable_grad() if self.enables_grad else contextlib.nullcontext():
                    graph = compile_captured(self.gm, captured, inputs, self.options, start,
                                             key=self.symbolic_key, cached=self.symbolic_cached,
                                             imported=self.symbolic_program)
            except DeviceError:
                raise
            except Exception as e:  # noqa: BLE001 - per shape, as before
                log.info("a graph of symbolic sizes did not compile (%s: %s); it compiles "
                         "per shape instead", type(e).__name__, e)
                self.per_shape_reason = f"the program for every size did not compile: " \
                                        f"{type(e).__name__}: {e}"
                self.symbolic = None
                return self.per_shape_reason
            finally:
                self.symbolic_program = None
            graph.enables_grad = self.enables_grad
            graph.no_grad_regions = self.no_grad_regions
            self.symbolic_call = _returning_inputs(self.gm, graph)
            log.info("%s: compiled once for every size of %s", graph.program.label,
                     ", ".join(f"{n} (Dynamo's {d})" for n, d in captured.symbolic.symbols.items()))
            dims = compile_history.symbol_dims(self.gm)
            compile_history.record(graph.program.label, self.origin, "for every size", ", ".join(
                f"{n} = {dims.get(d, d)}" for n, d in captured.symbolic.symbols.items()), start)
        return self.symbolic_call

    def _input_names(self, positions: Sequence[int]) -> str:
        names = [n.target for n in self.gm.graph.nodes if n.op == "placeholder"]
        return ", ".join(names[i] for i in positions)

    def _warn_signatures_capped(self, args: Sequence[Any]) -> None:
        if self.signatures_capped:
            return
        self.signatures_capped = True
        seen = list(self.variants)
        names = [n.target for n in self.gm.graph.nodes if n.op == "placeholder"]
        changing = [names[i] for i in range(len(args)) if len({k[i] for k in seen}) > 1]
        fallback_warning("a graph", RuntimeError(
            f"it compiled {len(seen)} signatures of its inputs and most of its {self.calls} "
            f"calls brought a new one (changing: {changing}); new signatures run eagerly. "
            "A size that depends on the data (x[mask], nonzero) changes at every call: "
            "compute at a fixed size instead (torch.where, a masked sum) to compile once"))

    def _compile(self, args: Sequence[Any], reason: str = "") -> Callable[..., Any]:
        """A callable of all of `args` for this signature; never raises for an op it cannot
        compile (that op, or failing that the graph, runs eagerly). `reason`: why the
        program for every size does not serve this call."""
        whole = runs_transforms(self.gm)
        by_design = self._eager_by_design()
        if by_design is not None:
            return self._unsplit(by_design[1]) if whole else self._split(*by_design)
        where = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        fn = self.gm if len(where) == len(args) else _NumbersBakedIn(self.gm, args)
        start = time.perf_counter()
        try:
            tensors = [args[i] for i in where]
            # an enable_grad() region under a no_grad call: compiled for training, as it runs
            with torch.enable_grad() if self.enables_grad else contextlib.nullcontext():
                compiled = self.compile_fn(fn, tensors)
            if isinstance(compiled, CompiledGraph):
                compiled.enables_grad = self.enables_grad
                compiled.no_grad_regions = self.no_grad_regions
        except DeviceError:  # eager would fail on these tensors too, less clearly
            raise
        except UnsupportedOp as e:
            node = origin(self.gm, e)
            if node is None:
                fallback_warning("a graph", e)
                return self.gm
            part = EagerPart(e.op_name, e.reason, e.where, (node.name,))
            return self._unsplit(part) if whole else self._split([node], part)
        except Exception as e:  # eager for this signature; others may still compile
            fallback_warning("a graph", e)
            return self.gm
        compile_history.record(
            compiled.program.label if isinstance(compiled, CompiledGraph) else "eager",
            self.origin, "per shape" if self.dynamic else "static",
            compile_history.shapes(self.gm, args), start,
            (reason or self.per_shape_reason) if self.dynamic else "")
        call = compiled if len(where) == len(args) else (
            lambda *a: compiled(*[a[i] for i in where]))
        return _returning_inputs(self.gm, call)

    def _eager_by_design(self) -> tuple[list[torch.fx.Node], EagerPart] | None:
        """The nodes that run eagerly whatever their ops (the user's own backward code,
        control flow, complex numbers: `graph_split`), and the part they make; None if
        there are none."""
        for nodes, reason in ((eager_higher_order_ops(self.gm, USER_BACKWARD), USER_BACKWARD),
                              (eager_higher_order_ops(self.gm, CONTROL_FLOW), CONTROL_FLOW),
                              (complex_ops(self.gm), "complex numbers: dg has no complex dtypes")):
            if nodes:
                return nodes, EagerPart(", ".join(sorted({op_name(n) for n in nodes})), reason,
                                        describe_location(nodes[0]), tuple(n.name for n in nodes))
        return None

    def _unsplit(self, part: EagerPart) -> Callable[..., Any]:
        """The whole graph eagerly, for `part` inside a torch.func transform."""
        fallback_warning("a graph", RuntimeError(
            f"it cannot compile {part}, inside a torch.func transform (grad, vmap, jvp), "
            "where a graph is not split"))
        return self.gm

    def _split(self, nodes: Sequence[torch.fx.Node], part: EagerPart,
               symbolic: bool = False) -> Callable[..., Any]:
        """The graph with `nodes` running eagerly (`part` says why), the rest compiled;
        `symbolic`: each compiled part captured for every size now, from the example
        values Dynamo gave its inputs (a part of static sizes compiles once, statically)."""
        self.eager_parts.append(part)
        message = f"fusegrad cannot compile {part}; it runs eagerly, and the rest of " \
                  "its graph is compiled"
        log.warning("%s", message)
        warnings.warn(message, FusegradEagerOpWarning, stacklevel=3)

        def compiled_part(sub: torch.fx.GraphModule) -> LazyGraph:
            inputs = _example_values(sub) if symbolic else None
            if inputs is None:
                return LazyGraph(sub, self.compile_fn, self.dynamic, self.eager_parts,
                                 origin=self.origin)
            return LazyGraph(sub, self.compile_fn, any(_is_symbolic(x) for x in inputs),
                             self.eager_parts, example_inputs=inputs, options=self.options,
                             origin=self.origin)
        return split_at(self.gm, set(nodes), compiled_part)


# torch.compile's modes as fusegrad options: fusegrad has nothing to autotune, and
# CUDA graphs are what "reduce-overhead" (and Inductor's "max-autotune") turn on for
# every function (the default replays small ones: CompileOptions.cuda_graphs)
TORCH_COMPILE_MODES: dict[str, dict[str, Any]] = {
    "default": {}, "reduce-overhead": {"cuda_graphs": True},
    "max-autotune": {"cuda_graphs": True},
    "max-autotune-no-cudagraphs": {"cuda_graphs": False}}


def backend_options(options: dict[str, Any] | None = None, mode: str | None = None,
                    **kwargs: Any) -> CompileOptions:
    """The CompileOptions of torch.compile's `options={...}`, `mode=` and keywords.

    Raises for an unknown option or mode: a misspelt option silently running with the
    defaults would cost a user their speed or their dump without telling them."""
    if mode is not None and mode not in TORCH_COMPILE_MODES:
        raise ValueError(f"fusegrad: torch.compile mode={mode!r} is not one of "
                         f"{sorted(TORCH_COMPILE_MODES)}")
    given = {**(options or {}), **kwargs}
    fields = {f.name for f in dataclasses.fields(CompileOptions)}
    unknown = sorted(set(given) - fields)
    if unknown:
        raise TypeError(f"fusegrad: unknown option(s) {unknown}; the options are "
                        f"{sorted(fields)} (docs: fusegrad.compile)")
    if mode in ("max-autotune", "max-autotune-no-cudagraphs"):
        log.info("mode=%r: fusegrad does not autotune; compiling as usual%s", mode,
                 " with CUDA graphs on CUDA" if mode == "max-autotune" else "")
    return CompileOptions(**{**TORCH_COMPILE_MODES[mode or "default"], **given})


def fusegrad_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[torch.Tensor],
                     options: dict[str, Any] | None = None, mode: str | None = None,
                     **kwargs: Any) -> Callable[..., Any]:
    """torch.compile backend (`backend="fusegrad"`).

    Options are `CompileOptions` fields, given as keywords (functools.partial)
    or as torch.compile's `options={...}` dict; torch.compile's `mode` maps onto them
    (`TORCH_COMPILE_MODES`). An unknown option or mode raises. The graph compiles at
    its first call.
    """
    opts = backend_options(options, mode, **kwargs)
    warn_at_recompile_limit()
    return LazyGraph(gm, functools.partial(compile_graph, options=opts),
                     dynamic=any(_is_symbolic(x) for x in example_inputs),
                     example_inputs=example_inputs, options=opts,
                     origin=compile_history.dynamo_origin(gm))

"""Capture: a Dynamo FX graph or a plain function -> functional core-ATen FX graph.

The importer wants a graph without mutation, views or autograd, whose output
is a flat tuple of tensors. AOTAutograd's export (functionalization plus the
decomposition table, traced with fake tensors under no_grad) produces exactly
that and reports which inputs the program mutated; their new values become
extra graph outputs that the caller copies back after every call, so input
mutations (BatchNorm running stats, in-place ops on inputs) are never lost.
The user's output structure (nesting, None and other non-tensor leaves) is
remembered here and rebuilt around the flat tensor outputs, and so are the outputs
eager returns as views of an input or of another output (`OutputView`).
"""
from __future__ import annotations

import contextlib
import logging
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import sympy
import torch
import torch.fx.traceback as fx_traceback
from torch.utils import _pytree as pytree

from .decompositions import corrected_kernels, decompositions
from .graph_split import returns_self, runs_transforms
from .stop_gradient import GRAD_DISABLED, mark_stop_gradients

log = logging.getLogger(__name__)


class CaptureError(RuntimeError):
    """The program cannot be turned into a functional core-ATen graph."""


class _TensorLeaf:
    """Placeholder for a tensor leaf in the recorded output structure."""

    def __repr__(self) -> str:
        return "<tensor>"

    def __reduce__(self) -> str:  # unpickled as the one TENSOR_LEAF (`graph_cache`)
        return "TENSOR_LEAF"


TENSOR_LEAF = _TensorLeaf()


@dataclass(frozen=True)
class OutputView:
    """A user tensor output that eager returns as a view: of user input `base`
    (`of_input`) or of the earlier user output `base`. The program computes a copy;
    the caller gets the view, so that writing into it reaches the base as in eager (a
    returned slice of a cache buffer, `x.view(-1)`), as AOTAutograd's views do. In a
    capture for every size the geometry may be dg size expressions (`symbolic`),
    evaluated at each call's sizes."""

    output: int
    base: int
    of_input: bool
    size: tuple[Any, ...]
    stride: tuple[Any, ...]
    offset: Any  # storage offset from the base's

    @property
    def symbolic(self) -> bool:
        return not all(isinstance(n, int) for n in (*self.size, *self.stride, self.offset))

    def of(self, base: torch.Tensor, sizes: dict[str, int] | None = None) -> torch.Tensor:
        """The view of `base`; `sizes`: the values of the dg sizes its geometry uses."""
        if sizes is None:
            return base.as_strided(self.size, self.stride, base.storage_offset() + self.offset)
        from ..runtime import abi

        size, stride = ([abi.eval_dim(n, sizes) for n in dims] for dims in (self.size,
                                                                              self.stride))
        return base.as_strided(size, stride,
                               base.storage_offset() + abi.eval_dim(self.offset, sizes))


def _output_views(fn: Any, example_inputs: Sequence[torch.Tensor], *,
                  sizes: Any = None) -> tuple[OutputView, ...]:
    """The outputs of Dynamo graph `fn` that are views, read off its example values (fake
    tensors sharing a storage): of a placeholder, or of an earlier output that owns a
    fresh contiguous storage (what the compiled program returns for it). A dynamic
    graph's views have symbolic geometry: it is evaluated at this signature's sizes (the
    symbols bound by the placeholders' sizes, strides and integer values); a view whose
    geometry does not come out as integers stays a copy. `sizes` (the `SizeSymbols` of
    one capture for every size, `capture_symbolic`): the geometry is kept in dg's sizes,
    and one they cannot express raises CaptureError."""
    from torch.multiprocessing.reductions import StorageWeakRef

    graph, where = fn, None
    if isinstance(getattr(fn, "gm", None), torch.fx.GraphModule):  # numbers baked in
        graph, where = fn.gm, fn.where
    if not isinstance(graph, torch.fx.GraphModule):
        return ()
    nodes = list(graph.graph.nodes)
    placeholders = [n.meta.get("example_value") for n in nodes if n.op == "placeholder"]
    (out,) = [n for n in nodes if n.op == "output"]
    results = [a.meta.get("example_value") if isinstance(a, torch.fx.Node) else a
               for a in pytree.tree_leaves(out.args)]
    if not all(isinstance(t, torch.Tensor) for t in results):
        return ()
    args: list[Any] = list(example_inputs) if where is None else list(fn.numbers)
    for i, x in zip(where or (), example_inputs):
        args[i] = x
    concrete = _in_sizes(sizes) if sizes is not None else _concrete_sizes(placeholders, args)
    user_position = {i: k for k, i in enumerate(where if where is not None else range(len(args)))}

    def storage(t: torch.Tensor) -> Any:
        return StorageWeakRef(t.untyped_storage())

    inputs = {}  # storage -> the placeholder owning it
    for i, t in reversed(list(enumerate(placeholders))):
        if isinstance(t, torch.Tensor):
            inputs[storage(t)] = i
    views, fresh = [], {}  # storage -> the output owning it
    for k, t in enumerate(results):
        key = storage(t)
        if key in inputs:
            i = inputs[key]
            base, of_input = user_position[i], True
            offset = concrete(t.storage_offset() - placeholders[i].storage_offset())
        elif key in fresh:
            base, of_input, offset = fresh[key], False, concrete(t.storage_offset())
        else:
            if t.storage_offset() == 0 and t.is_contiguous() and \
                    t.untyped_storage().nbytes() == t.numel() * t.element_size():
                fresh[key] = k
            continue
        size, stride = [concrete(n) for n in t.shape], [concrete(n) for n in t.stride()]
        if None not in (offset, *size, *stride):
            views.append(OutputView(k, base, of_input, tuple(size), tuple(stride), offset))
        elif sizes is not None:
            raise CaptureError(
                f"output {k} is a view of {'input' if of_input else 'output'} {base} with "
                f"geometry (size {tuple(t.shape)}, stride {tuple(t.stride())}) that dg's "
                "sizes do not express; capture it per signature (capture())")
    return tuple(views)


def _in_sizes(sizes: Any) -> Callable[[Any], Any]:
    """A size of a symbolic capture's example values in dg's sizes (`SizeSymbols.dim`),
    None where they cannot express it."""
    from .symbolic import NotExpressible

    def dim(n: Any) -> Any:
        try:
            return sizes.dim(n)
        except NotExpressible:
            return None
    return dim


def _concrete_sizes(placeholders: Sequence[Any], args: Sequence[Any]) -> Callable[[Any], int | None]:
    """Evaluates a size of a dynamic graph's example values at `args`: each placeholder
    dim, stride and integer that is a plain symbol binds it to the argument's value."""
    import sympy
    bindings = {}

    def bind(symbolic: Any, value: Any) -> None:
        if isinstance(symbolic, torch.SymInt) and isinstance(symbolic.node.expr, sympy.Symbol):
            bindings[symbolic.node.expr] = sympy.Integer(int(value))
    for example, arg in zip(placeholders, args):
        if isinstance(example, torch.Tensor) and isinstance(arg, torch.Tensor):
            for symbolic, value in zip((*example.shape, *example.stride(), example.storage_offset()),
                                       (*arg.shape, *arg.stride(), arg.storage_offset())):
                bind(symbolic, value)
        elif isinstance(arg, int):
            bind(example, arg)

    def concrete(n: Any) -> int | None:
        if not isinstance(n, torch.SymInt):
            return int(n)
        value = n.node.expr.xreplace(bindings)
        return int(value) if value.is_Integer else None
    return concrete


@dataclass(frozen=True)
class SizeOutput:
    """An integer output of a graph captured for every size (a split graph's part
    returns the sizes the next part takes): a size expression in dg's sizes, its value
    computed from each call's inputs (`SymbolicInputs.size_values`)."""

    size: Any  # abi.Dim


def _constant_or_size(leaf: Any, sizes: Any) -> Any:
    """An output leaf of a capture for every size as `Captured.out_template` keeps it: a
    symbolic integer as its SizeOutput, another symbolic number as its constant value."""
    from .symbolic import SYM_TYPES, NotExpressible, raw_expr

    if not isinstance(leaf, SYM_TYPES):
        return leaf
    value = raw_expr(leaf)
    if not value.is_number:  # a SymInt (capture_symbolic raised for the others)
        try:
            return SizeOutput(sizes.dim(leaf))
        except NotExpressible as e:
            raise CaptureError(f"the graph returns the integer {leaf}, which dg's sizes do "
                               f"not express: {e}") from None
    return (bool if isinstance(leaf, torch.SymBool) else float
            if isinstance(leaf, torch.SymFloat) else int)(value)


@dataclass(frozen=True)
class SymbolicInputs:
    """How the inputs of a graph captured for every size (`capture_symbolic`) reach its
    dg function, whose dims are dg's sizes `s0`, `s1`, ...

    `Captured.gm` takes `(*lifted, *[dynamo_args[i] for i in where])`: the Dynamo
    graph's placeholders but the numbers baked in (`numbers`). Its inputs at positions
    `tensors` (into lifted + user inputs) are the dg function's arguments, in order; the
    integer inputs (`integers`) are not: each is a size (a dg expression, bound from the
    tensors' shapes when the function is called), a constant, or None where the graph does
    not read it."""

    where: tuple[int, ...]  # the Dynamo graph's placeholders the captured graph takes
    numbers: dict[int, Any]  # Dynamo placeholder position -> the number baked in
    unguarded: frozenset[int]  # of `numbers`: values Dynamo's guards do not pin
    tensors: tuple[int, ...]  # positions (lifted + user) of the dg function's arguments
    integers: dict[int, Any]  # positions (lifted + user) of integer inputs -> their size
    symbols: dict[str, str]  # dg's size name -> Dynamo's symbol
    hints: dict[str, int]  # dg's size name -> its value when Dynamo traced
    guards_added: tuple[str, ...] = ()  # guards the capture's trace added to Dynamo's
    # dg's sizes that are integer inputs of their own (no tensor's size: a position
    # offset) -> their position (lifted + user); each call passes their values as `sizes`
    scalars: dict[str, int] = field(default_factory=dict)
    # the dg shapes of the tensor inputs (`tensors`)
    shapes: tuple[tuple[Any, ...], ...] = ()

    def size_values(self, inputs: Sequence[Any]) -> dict[str, int]:
        """The values of dg's sizes in a call with `inputs` (lifted + user)."""
        from ..runtime import abi

        return abi.bind_sizes(self.shapes, [tuple(inputs[k].shape) for k in self.tensors],
                              known={name: int(inputs[k]) for name, k in self.scalars.items()})


@dataclass
class Captured:
    """A functional graph plus what is needed to call it like the original.

    `gm(*lifted, *user_inputs)` returns `(new values of mutated inputs...,
    user tensor outputs..., conditions of runtime assertions...)`; `mutated[i]` is
    the position, in the full input list (lifted + user), of the input that
    mutation output `i` updates; `checks[i]` is the message of assertion `i`
    (`capture(..., checks_as_outputs=True)`).
    """

    gm: torch.fx.GraphModule
    lifted: tuple[torch.Tensor, ...]  # parameters/buffers of a module-valued fn, in graph order
    mutated: tuple[int, ...]
    out_spec: pytree.TreeSpec
    out_template: tuple[Any, ...]  # user output leaves: TENSOR_LEAF or the constant value
    checks: tuple[str, ...] = ()
    # mutations (indices into `mutated`) the program made with grad disabled
    unrecorded: frozenset[int] = frozenset()
    # mutations eager records even of an input that does not require grad (`buf.add_(y)`,
    # `buf[i] = y` with y requiring grad): the input then carries y's history
    grad_mutations: frozenset[int] = frozenset()
    output_views: tuple[OutputView, ...] = ()
    # positions (lifted + user) of normalizations' running statistics (`_running_statistics`)
    statistics: frozenset[int] = frozenset()
    # can a gradient flow through the program: does some output require grad (Dynamo's
    # example values; True where unknown)
    differentiable: bool = True
    # a capture for every size (`capture_symbolic`): how its inputs reach the dg function
    symbolic: SymbolicInputs | None = None

    def __post_init__(self) -> None:
        # a tuple of tensors (what Dynamo graphs return) needs no pytree work per call
        flat = tuple(range(len(self.out_template)))
        self._tensor_tuple = (all(leaf is TENSOR_LEAF for leaf in self.out_template)
                              and pytree.tree_structure(flat) == self.out_spec)
        # what needs each call's size values (a capture for every size's)
        self._size_outputs = any(isinstance(leaf, SizeOutput) for leaf in self.out_template)
        self._symbolic_views = any(view.symbolic for view in self.output_views)

    @property
    def outputs_are_tensor_tuple(self) -> bool:
        """Is the user's output a plain tuple of tensors (`rebuild` is `tuple`)?"""
        return self._tensor_tuple

    @property
    def num_mutations(self) -> int:
        return len(self.mutated)

    def finish(self, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor]) -> Any:
        """The user's outputs from the graph's: its assertions checked first (each raises
        as eager's `_assert_async` does, asynchronously on a GPU), then the input
        mutations written back."""
        if self.checks:
            conditions = outputs[len(outputs) - len(self.checks):]
            for condition, message in zip(conditions, self.checks):
                torch._assert_async(condition, message)
            outputs = outputs[:len(outputs) - len(self.checks)]
        n = self.num_mutations
        self.write_back(inputs, outputs[:n])
        outputs = outputs[n:]
        if self.output_views:
            outputs = list(outputs)
            users = inputs[len(self.lifted):]
            sizes = self.symbolic.size_values(inputs) if self._symbolic_views else None
            for view in self.output_views:
                outputs[view.output] = view.of(users[view.base] if view.of_input
                                               else outputs[view.base], sizes)
        return self.rebuild(outputs, inputs)

    def rebuild(self, tensors: Sequence[torch.Tensor],
                inputs: Sequence[Any] | None = None) -> Any:
        """The user's output structure around the user tensor outputs; `inputs` (lifted
        + user) give the values of integer outputs of symbolic size (`SizeOutput`)."""
        if self._tensor_tuple:
            return tuple(tensors)
        it = iter(tensors)
        leaves = [next(it) if leaf is TENSOR_LEAF else leaf for leaf in self.out_template]
        if self._size_outputs:
            from ..runtime import abi

            assert self.symbolic is not None and inputs is not None
            sizes = self.symbolic.size_values(inputs)
            leaves = [abi.eval_dim(leaf.size, sizes) if isinstance(leaf, SizeOutput) else leaf
                      for leaf in leaves]
        return pytree.tree_unflatten(leaves, self.out_spec)

    def recorded(self, inputs: Sequence[torch.Tensor]) -> list[int]:
        """The mutations autograd records, as eager's in-place ops would be: of an input
        that requires grad, with grad enabled (indices into `mutated`)."""
        if not torch.is_grad_enabled():
            return []
        # with no gradient flowing through the program, a mutation it made with grad
        # disabled (a compiled EMA update of parameters) is written back as eager's was
        return [j for j, i in enumerate(self.mutated)
                if (inputs[i].requires_grad or j in self.grad_mutations)
                and (self.differentiable or j not in self.unrecorded)]

    def write_back(self, inputs: Sequence[torch.Tensor], new_values: Sequence[torch.Tensor]) -> None:
        """Apply the program's input mutations: copy new values into the inputs. A
        recorded one gives the input the new value's history (its gradient flows to
        what the program computed it from)."""
        if not self.mutated:
            return
        recorded = self.recorded(inputs)
        for j, (index, value) in enumerate(zip(self.mutated, new_values)):
            with torch.set_grad_enabled(j in recorded):
                # a normalization's kernel bumps no version of its running statistics
                (inputs[index].data if index in self.statistics else inputs[index]).copy_(value)


class _FlatOutputs(torch.nn.Module):
    """Calls `fn` and returns only its tensor leaves, recording the structure."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn
        self.out_spec: pytree.TreeSpec | None = None
        self.out_template: tuple[Any, ...] = ()

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if isinstance(self.fn, torch.fx.GraphModule):
            # node by node, so each traced op inherits its node's user stack trace
            out = torch.fx.Interpreter(self.fn).run(*args)
        else:
            out = self.fn(*args)
        leaves, self.out_spec = pytree.tree_flatten(out)
        self.out_template = tuple(TENSOR_LEAF if isinstance(x, torch.Tensor) else x for x in leaves)
        return tuple(x for x in leaves if isinstance(x, torch.Tensor))


def _decomposable_forms(example_inputs: Sequence[torch.Tensor]) -> Any:
    """On CUDA, some composite ops dispatch to library kernels that have no decomposition:
    scaled_dot_product_attention to fused attention (efficient, flash, cuDNN), grid_sample
    to `cudnn_grid_sampler` while cuDNN is enabled. Attention that a fused kernel computes
    as dg.attention does is kept whole (`cuda_attention.FusedAttention`: the compiled
    program runs that kernel); otherwise tracing under the math attention backend and
    with cuDNN disabled records their decomposable forms (matmuls and a softmax,
    `grid_sampler_2d`), which every target compiles and fuses. Convolutions trace as
    `aten.convolution` either way and still run on cuDNN. (On the CPU these ops
    decompose as they are.)"""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from .cuda_attention import FusedAttention
    stack = contextlib.ExitStack()
    if any(x.device.type == "cuda" for x in example_inputs):
        stack.enter_context(FusedAttention())
        stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
        stack.enter_context(torch.backends.cudnn.flags(enabled=False))
    return stack


def capture(fn: Callable[..., Any], example_inputs: Sequence[torch.Tensor], *,
            checks_as_outputs: bool = False) -> Captured:
    """Trace `fn(*example_inputs)` to a functional core-ATen graph (see `Captured`).

    `fn` may be a Dynamo GraphModule, an nn.Module or a function of tensors.
    Only shapes and dtypes of the inputs matter (tracing uses fake tensors).
    `checks_as_outputs`: runtime assertions become trailing outputs that
    `Captured.finish` checks (else they stay in the graph, which the importer
    rejects).
    """
    from torch._functorch.aot_autograd import aot_export_module

    for i, x in enumerate(example_inputs):
        if not isinstance(x, torch.Tensor):
            raise CaptureError(f"input {i} is a {type(x).__name__}, not a tensor; fusegrad "
                               f"compiles functions of tensors (pass other values by closure)")
    if isinstance(fn, torch.fx.GraphModule):
        mark_stop_gradients(fn)
    wrapper = _FlatOutputs(fn)
    traced_inputs = list(example_inputs)
    if isinstance(fn, torch.fx.GraphModule) and runs_transforms(fn):
        # torch.func levels inside run autograd of their own while tracing; inputs that
        # require grad made AOTAutograd's export trace a joint graph too (and assert:
        # a hessian of an input requiring grad). fusegrad differentiates what it traces.
        traced_inputs = [x.detach() for x in traced_inputs]
    elif not isinstance(fn, torch.fx.GraphModule):
        # a function (or module) may read tensors it closes over: they trace as constants,
        # which `_lift_closed_over` makes inputs (Dynamo graphs have them as inputs already)
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        traced_inputs = [mode.from_tensor(x) for x in traced_inputs]
    try:
        with torch.no_grad(), fx_traceback.preserve_node_meta(), \
                _decomposable_forms(example_inputs), corrected_kernels():
            gm, sig = aot_export_module(wrapper, traced_inputs, trace_joint=False,
                                        decompositions=decompositions())
    except Exception as e:  # tracing failures come in many types; report them as one
        raise CaptureError(f"tracing failed: {type(e).__name__}: {e}") from e
    if sig.input_tokens or sig.output_tokens:
        raise _side_effect_error(gm)
    state = dict(wrapper.named_parameters(remove_duplicate=False))
    state.update(wrapper.named_buffers(remove_duplicate=False))
    lifted_names = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
    closed_over = _lift_closed_over(gm, len(lifted_names)) \
        if not isinstance(fn, torch.fx.GraphModule) else ()
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    lifted = (*(state[lifted_names[p]] for p in placeholders[:len(lifted_names)]), *closed_over)
    by_fqn = {fqn: placeholders.index(p) for p, fqn in lifted_names.items()}
    mutations = {**sig.buffers_to_mutate, **sig.parameters_to_mutate}
    mutated = []
    for out_name in _output_names(gm)[:len(mutations) + len(sig.user_inputs_to_mutate)]:
        if out_name in sig.user_inputs_to_mutate:
            mutated.append(placeholders.index(sig.user_inputs_to_mutate[out_name]))
        else:
            mutated.append(by_fqn[mutations[out_name]])
    if isinstance(fn, torch.fx.GraphModule):
        _inherit_stack_traces(gm, fn)
    unrecorded = _unrecorded(gm, fn, len(mutated))
    lifted_fqns = [lifted_names[p] for p in placeholders[:len(lifted_names)]]
    dynamo_inputs = _DynamoInputs(fn, lifted_fqns)
    grad_mutations = _grad_mutations(dynamo_inputs, mutated)
    statistics = _running_statistics(dynamo_inputs, len(lifted) + len(example_inputs))
    checks = _checks_as_outputs(gm) if checks_as_outputs else ()
    log.debug("captured graph: %d lifted, %d user inputs, %d mutated inputs, %d checks",
              len(lifted), len(example_inputs), len(mutated), len(checks))
    return Captured(gm, lifted, tuple(mutated), wrapper.out_spec, wrapper.out_template, checks,
                    unrecorded, grad_mutations, _output_views(fn, example_inputs), statistics,
                    _differentiable(fn))


class _NumbersAsItems(torch.fx.Interpreter):
    """Runs a Dynamo graph with some inputs given as numbers: `.item()` of a number is the
    number (Dynamo reads an unspecialized float input as a 0-d tensor's item)."""

    def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
        if target == "item" and isinstance(args[0], (bool, int, float)):
            return args[0]
        return super().call_method(target, args, kwargs)


class _SymbolicGraph(torch.nn.Module):
    """Dynamo graph `gm` as a function of its placeholders at `where`, the others fixed to
    `numbers` (position -> value). A module holding `gm`, as `_NumbersBakedIn` in the
    backend, so that capture lifts what `gm` reads as attributes."""

    def __init__(self, gm: torch.fx.GraphModule, where: Sequence[int],
                 numbers: dict[int, Any], count: int) -> None:
        super().__init__()
        self.gm = gm
        self.where = list(where)
        self.numbers = [numbers.get(i) for i in range(count)]

    def forward(self, *args: Any) -> Any:
        full = list(self.numbers)
        for i, a in zip(self.where, args):
            full[i] = a
        return _NumbersAsItems(self.gm).run(*full)  # node by node: keeps node provenance


def _number_input(node: torch.fx.Node, given: Any) -> tuple[Any, bool] | None:
    """(value, pinned by Dynamo's guards) of a Dynamo placeholder the graph reads as a
    number, or None where it is an ordinary input: a 0-d tensor the caller passes as a
    number (the backend reads unspecialized floats so), a 0-d tensor read only by
    `.item()` (its value is the item's when a guard pins it, else the caller's tensor's),
    a placeholder whose example value is a plain number. An integer input (a SymInt
    example value) stays an input whatever the caller passes: it is a size; but dg's
    sizes are positive, so one that was below 1 when Dynamo traced (a past length of 0)
    is baked in, unpinned (a call with another value needs a program of its own)."""
    from .symbolic import SYM_TYPES, raw_expr
    value = node.meta.get("example_value")
    if isinstance(value, (bool, int, float)):
        return value, True
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        if isinstance(value.node.expr, sympy.Symbol) and hint is not None and int(hint) < 1:
            return int(hint), False
        return None
    if not isinstance(value, torch.Tensor):
        return None
    if isinstance(given, (bool, int, float)) and value.dim() == 0:
        return given, False
    if not (value.dim() == 0 and node.users and all(
            u.op == "call_method" and u.target == "item" for u in node.users)):
        return None
    item = next(iter(node.users)).meta.get("example_value")
    expr = raw_expr(item) if isinstance(item, SYM_TYPES) else item
    if isinstance(expr, (bool, int, float)) or getattr(expr, "is_number", False):
        return (float(expr) if value.is_floating_point() else int(expr)), True
    if isinstance(given, torch.Tensor) and not isinstance(
            given, torch._subclasses.fake_tensor.FakeTensor):
        return given.item(), False
    raise CaptureError(f"input '{node.target}' is a number Dynamo reads with .item() and "
                       "does not pin by a guard: pass its value (the real tensor, or the "
                       "number) in example_inputs")


def capture_symbolic(gm: torch.fx.GraphModule, example_inputs: Sequence[Any] | None = None,
                     *, checks_as_outputs: bool = False) -> Captured:
    """Trace Dynamo graph `gm` once for every size: with its own fake example values
    (`node.meta["example_value"]`, SymInt sizes under Dynamo's FakeTensorMode and
    ShapeEnv), through the decompositions `capture` uses, so that the ATen graph's
    `node.meta["val"]` have symbolic shapes. `import_graph(captured.gm)` then makes a dg
    function whose `?` dims are Dynamo's sizes renamed `s0`, `s1`, ... (in order of first
    appearance in the tensor inputs' shapes), with the size hints as the module's
    `dg.size_hints`.

    `example_inputs`: what Dynamo handed the backend, or the arguments of a call, or None.
    Only numbers are read from it: a 0-d tensor input the graph reads only with `.item()`
    (Dynamo's unspecialized floats) is baked in, its value from Dynamo's guard where one
    pins it, else from the real tensor given; so is a Python number given for a 0-d
    tensor input (the backend passes such floats as numbers, their `.item()` nodes
    removed). An int given for an integer input is not: that input stays a size.

    The caller (`Captured.symbolic` says where everything goes):
    - calls `captured.gm` / the dg function with the inputs `(*captured.lifted,
      *[args[i] for i in symbolic.where])` (`inputs`);
    - passes the dg function only the tensors, `[inputs[k] for k in symbolic.tensors]`
      (then a seed, where the function has `dg.seed_input`): integer inputs are not
      arguments, since each one the graph reads is a size the tensors' shapes bind
      (`symbolic.integers`);
    - checks at each call that the numbers in `symbolic.unguarded` still have their
      baked-in values (Dynamo does not guard them), or captures again;
    - captures inside the backend call, before Dynamo installs its guards: a guard the
      trace adds (`symbolic.guards_added`, a size a decomposition specialized) is then
      Dynamo's too; later, the caller must check those itself.
    `mutated`, `statistics`, `output_views` etc. index lifted + user inputs as for
    `capture`; `finish` serves as there.

    Raises CaptureError for what a capture for every size cannot serve yet: a number
    input the graph reads that dg cannot take as a size (a symbolic float or bool), an
    output that is a view of geometry dg's sizes cannot express, a symbolic float or
    bool returned. A symbolic integer returned is a `SizeOutput`; a view returned keeps
    its geometry in dg's sizes (`OutputView`). An integer input that is no tensor's
    size (a position offset), or that gives a size the tensors' shapes show only within
    a product, is a size of its own (`symbolic.scalars`), passed at each call.
    """
    from torch._functorch.aot_autograd import aot_export_module
    from torch._guards import detect_fake_mode

    from .symbolic import SYM_TYPES, NotExpressible, SizeSymbols, raw_expr

    if not isinstance(gm, torch.fx.GraphModule):
        raise CaptureError("capture_symbolic takes a Dynamo graph (a GraphModule whose "
                           "placeholders have example values)")
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if example_inputs is not None and len(example_inputs) != len(placeholders):
        raise CaptureError(f"{len(example_inputs)} example inputs for a graph of "
                           f"{len(placeholders)} inputs")
    values = [n.meta.get("example_value") for n in placeholders]
    fake_mode = detect_fake_mode([v for v in values if isinstance(v, torch.Tensor)])
    if fake_mode is None and example_inputs is not None:
        fake_mode = detect_fake_mode(example_inputs)
    if fake_mode is None or fake_mode.shape_env is None:
        raise CaptureError("the graph's example values are not fake tensors of a shape "
                           "environment (Dynamo's); capture() traces a graph per signature")
    mark_stop_gradients(gm)
    numbers, unguarded, where = {}, set(), []
    for i, (node, value) in enumerate(zip(placeholders, values)):
        given = example_inputs[i] if example_inputs is not None else None
        number = _number_input(node, given)
        if number is not None:
            numbers[i] = number[0]
            if not number[1]:
                unguarded.add(i)
        elif isinstance(value, (torch.Tensor, torch.SymInt)):
            where.append(i)
        else:
            raise CaptureError(f"input '{node.target}' is a {type(value).__name__}; a capture "
                               "for every size takes tensors and integers")
    wrapper = _FlatOutputs(_SymbolicGraph(gm, where, numbers, len(placeholders)))
    traced_inputs = [values[i] for i in where]
    if runs_transforms(gm):  # as in capture(): fusegrad differentiates what it traces
        traced_inputs = [x.detach() if isinstance(x, torch.Tensor) else x
                         for x in traced_inputs]
    shape_env = fake_mode.shape_env
    guards_before = len(shape_env.guards)
    try:
        with torch.no_grad(), fx_traceback.preserve_node_meta(), fake_mode, \
                _decomposable_forms([x for x in traced_inputs if isinstance(x, torch.Tensor)]), \
                corrected_kernels():
            traced, sig = aot_export_module(wrapper, traced_inputs, trace_joint=False,
                                            decompositions=decompositions())
    except Exception as e:  # tracing failures come in many types; report them as one
        raise CaptureError(f"tracing failed: {type(e).__name__}: {e}") from e
    if sig.input_tokens or sig.output_tokens:
        raise _side_effect_error(traced)
    for leaf in wrapper.out_template:
        if isinstance(leaf, (torch.SymFloat, torch.SymBool)) and not raw_expr(leaf).is_number:
            raise CaptureError(f"the graph returns the symbolic {type(leaf).__name__} {leaf}, "
                               "which a capture for every size does not return yet")

    state = dict(wrapper.named_parameters(remove_duplicate=False))
    state.update(wrapper.named_buffers(remove_duplicate=False))
    lifted_names = {**sig.inputs_to_parameters, **sig.inputs_to_buffers}
    aten_placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    names = [n.name for n in aten_placeholders]
    lifted = tuple(state[lifted_names[p]] for p in names[:len(lifted_names)])
    by_fqn = {fqn: names.index(p) for p, fqn in lifted_names.items()}
    mutations = {**sig.buffers_to_mutate, **sig.parameters_to_mutate}
    mutated = []
    for out_name in _output_names(traced)[:len(mutations) + len(sig.user_inputs_to_mutate)]:
        if out_name in sig.user_inputs_to_mutate:
            mutated.append(names.index(sig.user_inputs_to_mutate[out_name]))
        else:
            mutated.append(by_fqn[mutations[out_name]])
    _inherit_stack_traces(traced, gm)
    unrecorded = _unrecorded(traced, gm, len(mutated))
    source = wrapper.fn
    dynamo_inputs = _DynamoInputs(source, [lifted_names[p] for p in names[:len(lifted_names)]])
    grad_mutations = _grad_mutations(dynamo_inputs, mutated)
    statistics = _running_statistics(dynamo_inputs, len(lifted) + len(where))
    checks = _checks_as_outputs(traced) if checks_as_outputs else ()

    vals = [n.meta.get("val") for n in aten_placeholders]
    sizes = SizeSymbols(vals)
    views = _output_views(source, traced_inputs, sizes=sizes)
    wrapper.out_template = tuple(_constant_or_size(x, sizes) for x in wrapper.out_template)
    integers: dict[int, Any] = {}
    for k, (node, val) in enumerate(zip(aten_placeholders, vals)):
        if isinstance(val, torch.Tensor):
            continue
        try:
            integers[k] = sizes.dim(val)
        except NotExpressible as e:
            if node.users:
                raise CaptureError(f"number input {k} ({val}) is read by the graph but is "
                                   f"not a size: {e}; a capture for every size does not "
                                   "take it yet")
            integers[k] = None
    symbolic = SymbolicInputs(
        where=tuple(where), numbers=numbers, unguarded=frozenset(unguarded),
        tensors=tuple(k for k, v in enumerate(vals) if isinstance(v, torch.Tensor)),
        integers=integers, symbols=sizes.names, hints=sizes.hints(),
        guards_added=tuple(str(g.expr) for g in shape_env.guards[guards_before:]),
        scalars=sizes.scalars,
        shapes=tuple(tuple(sizes.dim(d) for d in v.shape) for v in vals
                     if isinstance(v, torch.Tensor)))
    log.debug("captured graph for every size: %d lifted, %d user inputs (%d integers), sizes "
              "%s, %d mutated inputs, %d checks", len(lifted), len(where), len(integers),
              symbolic.symbols, len(mutated), len(checks))
    return Captured(traced, lifted, tuple(mutated), wrapper.out_spec, wrapper.out_template,
                    checks, unrecorded, grad_mutations, views, statistics,
                    _differentiable(gm), symbolic)


def _side_effect_error(gm: torch.fx.GraphModule) -> Exception:
    """The error for a trace that threads effect tokens: `UnsupportedOp` at the first
    effectful op (torch.linalg.inv/solve/cholesky check their results for singular
    inputs that way), so that its user-level op runs eagerly (`graph_split`) and the
    rest compiles; the whole graph ran eagerly before."""
    from .importer import UnsupportedOp, describe_location
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.higher_order.with_effects:
            return UnsupportedOp(str(node.args[1]), "a side effect (raising on a singular "
                                 "or invalid input), which dg does not express",
                                 describe_location(node), node)
    return CaptureError("the program has side-effecting ops (effect tokens); fusegrad "
                        "compiles pure tensor programs")


def read_from_outside(fn: Callable[..., Any]) -> list[tuple[Any, str | None, str, Any]]:
    """What `fn` names from outside: its closure cells and the globals its code reads, as
    (where: the cell or the globals dict, key: None for a cell or the global's name, the
    variable's name, its value). fusegrad's transforms key their traces on these, and
    export saves the modules and tensors among them."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    found: list[tuple[Any, str | None, str, Any]] = []
    for cell, name in zip(getattr(fn, "__closure__", None) or (), code.co_freevars):
        try:
            found.append((cell, None, name, cell.cell_contents))
        except ValueError:  # not assigned yet
            pass
    found += [(fn.__globals__, name, name, fn.__globals__[name]) for name in code.co_names
              if name in fn.__globals__]
    return found


def _lift_closed_over(gm: torch.fx.GraphModule, position: int) -> tuple[torch.Tensor, ...]:
    """The tensors the traced function read from outside (closed over, globals, a
    submodule's weights), which tracing recorded as constants, made placeholders at
    `position` (after the lifted parameters): each call passes them, so the program
    sees them updated in place (an optimizer's step) as eager does, and they stay out of
    the IR. Literals the function creates (`torch.tensor([...])`, read through
    `lift_fresh_copy`) stay constants."""
    constants = [n for n in gm.graph.nodes if n.op == "get_attr"
                 and isinstance(getattr(gm, n.target), torch.Tensor)
                 and not all(u.target is torch.ops.aten.lift_fresh_copy.default for u in n.users)]
    if not constants:
        return ()
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tensors = []
    lifted: dict[str, torch.fx.Node] = {}  # one placeholder per constant, read once or more
    for node in constants:
        if node.target in lifted:
            node.replace_all_uses_with(lifted[node.target])
            gm.graph.erase_node(node)
            continue
        anchor = placeholders[position] if position < len(placeholders) else None
        with (gm.graph.inserting_before(anchor) if anchor is not None
              else gm.graph.inserting_after(placeholders[-1]) if placeholders
              else gm.graph.inserting_before(next(iter(gm.graph.nodes)))):
            placeholder = gm.graph.placeholder(f"closed_over_{len(tensors)}")
        placeholder.meta.update(node.meta)
        node.replace_all_uses_with(placeholder)
        lifted[node.target] = placeholder
        tensors.append(getattr(gm, node.target))
        gm.graph.erase_node(node)
        delattr(gm, node.target)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        position += 1
    gm.recompile()
    return tuple(tensors)


class _DynamoInputs:
    """The Dynamo graph `source`'s nodes for positions in the captured graph's inputs
    (lifted parameters, then user inputs)."""

    def __init__(self, source: Any, lifted: Sequence[str]) -> None:
        self.graph, self.where, self.lifted = source, None, list(lifted)
        if isinstance(getattr(source, "gm", None), torch.fx.GraphModule):  # numbers baked in
            self.graph, self.where = source.gm, source.where
            self.lifted = [n.removeprefix("gm.") for n in lifted]
        if isinstance(self.graph, torch.fx.GraphModule):
            nodes = self.graph.graph.nodes
            self.placeholders = [n for n in nodes if n.op == "placeholder"]
            self.attributes = {n.target: n for n in nodes if n.op == "get_attr"}

    @property
    def found(self) -> bool:
        return isinstance(self.graph, torch.fx.GraphModule)

    def node_of(self, position: int) -> torch.fx.Node | None:
        if position < len(self.lifted):
            return self.attributes.get(self.lifted[position])
        user = position - len(self.lifted)
        return self.placeholders[self.where[user] if self.where is not None else user]


def _grad_mutations(inputs: _DynamoInputs, mutated: Sequence[int]) -> frozenset[int]:
    """The mutations (indices into `mutated`, positions in lifted + user inputs) that the
    Dynamo graph of `inputs` makes with an in-place op whose result requires grad in
    Dynamo's example values: eager records those whether or not the input required grad.
    (BatchNorm's running statistics, updated inside its op, are not among them.)"""
    if not inputs.found:
        return frozenset()

    def requires_grad(node: Any) -> bool:
        value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
        return isinstance(value, torch.Tensor) and value.requires_grad
    recording = set()
    for node in inputs.graph.graph.nodes:
        if node.op == "call_function" and node.target is operator.setitem:
            if requires_grad(node.args[2]):
                recording.add(node.args[0])
        elif returns_self(node) and requires_grad(node):
            recording.add(node.args[0])
    if not recording:
        return frozenset()
    return frozenset(j for j, position in enumerate(mutated)
                     if inputs.node_of(position) in recording)


# normalizations that take running statistics, which their kernels update in place in
# training without their schemas saying so: eager bumps no version counter for those writes
_RUNNING_STATISTICS_READERS = (torch.nn.functional.batch_norm, torch.batch_norm,
                               torch.nn.functional.instance_norm, torch.instance_norm)


def _running_statistics(inputs: _DynamoInputs, count: int) -> frozenset[int]:
    """The positions (of `count` lifted + user inputs) of tensors the Dynamo graph
    of `inputs` passes to a normalization as running statistics."""
    if not inputs.found:
        return frozenset()
    read = {a for node in inputs.graph.graph.nodes if node.op == "call_function"
            and node.target in _RUNNING_STATISTICS_READERS
            for a in (*node.args[1:], *node.kwargs.values()) if isinstance(a, torch.fx.Node)}
    return frozenset(i for i in range(count) if inputs.node_of(i) in read)


def _differentiable(source: Any) -> bool:
    """Does some output of the Dynamo graph `source` require grad (True where unknown)?"""
    if not isinstance(source, torch.fx.GraphModule):
        return True
    (out,) = [n for n in source.graph.nodes if n.op == "output"]
    values = [a.meta.get("example_value") for a in pytree.tree_leaves(out.args)
              if isinstance(a, torch.fx.Node)]
    return any(v is None or (isinstance(v, torch.Tensor) and v.requires_grad) for v in values)


def _unrecorded(gm: torch.fx.GraphModule, source: Any, count: int) -> frozenset[int]:
    """The first `count` outputs (mutations) whose value comes from a node of the Dynamo
    graph `source` that ran with grad disabled (`mark_stop_gradients` marks them)."""
    if not isinstance(source, torch.fx.GraphModule):
        return frozenset()
    disabled = {n.name for n in source.graph.nodes if n.meta.get(GRAD_DISABLED)}
    if not disabled:
        return frozenset()
    nodes = {n.name: n for n in gm.graph.nodes}
    found = set()
    for j, name in enumerate(_output_names(gm)[:count]):
        pending = list(nodes[name].meta.get("from_node") or ()) if name in nodes else []
        while pending:
            origin = pending.pop(0)
            if origin.name in disabled:
                found.add(j)
                break
            pending.extend(origin.from_node or ())
    return frozenset(found)


_ASSERTIONS = {torch.ops.aten._assert_async.msg: None,
               torch.ops.aten._assert_async.default:
                   "Expected Tensor with single nonzero value, but got zero"}


def _checks_as_outputs(gm: torch.fx.GraphModule) -> tuple[str, ...]:
    """Move each runtime assertion's condition (one_hot's class range, say) to the end
    of the outputs and return their messages. Compiled code cannot raise, and dropping
    an assertion would turn bad input into silently wrong numbers."""
    output = gm.graph.output_node()
    conditions, messages = [], []
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _ASSERTIONS:
            conditions.append(node.args[0])
            messages.append(node.args[1] if len(node.args) > 1 else _ASSERTIONS[node.target])
            gm.graph.erase_node(node)
    if conditions:
        output.args = (tuple(output.args[0]) + tuple(conditions),)
        gm.recompile()
    return tuple(messages)


def _output_names(gm: torch.fx.GraphModule) -> list[str]:
    (outs,) = gm.graph.output_node().args
    return [o.name if isinstance(o, torch.fx.Node) else "" for o in outs]


def _inherit_stack_traces(gm: torch.fx.GraphModule, source: torch.fx.GraphModule) -> None:
    """Give each traced node the user stack trace of the source node it came from."""
    traces = {n.name: n.meta["stack_trace"] for n in source.graph.nodes if n.meta.get("stack_trace")}
    for node in gm.graph.nodes:
        pending = list(node.meta.get("from_node") or ())
        while pending:
            origin = pending.pop(0)
            if origin.name in traces:
                node.meta["stack_trace"] = traces[origin.name]
                break
            pending.extend(origin.from_node or ())

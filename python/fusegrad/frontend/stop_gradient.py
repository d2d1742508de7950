"""`fusegrad::stop_gradient`: how a detach or a `torch.no_grad()` block reaches dg.

fusegrad traces under `no_grad` and differentiates the graph itself, so it
must see where gradients stop. In the traced ATen graph, `x.detach()` is only
an `aten.alias` (indistinguishable from other aliases) and Dynamo keeps a
`no_grad()` block as `_set_grad_enabled` calls, which the tracer rejects.
Before tracing, `mark_stop_gradients` rewrites a Dynamo graph: the uses of
`detach` calls and of the tensors computed with grad disabled go through this
custom op, which survives tracing and the importer maps to `dg.stop_gradient`
(except uses that update them in place, or views of them: `_stop_after`), and
the switches become `fusegrad::set_grad_enabled`, which switches in eager and is
gone from the traced graph.

`torch.func.grad` (and vjp, jacrev, hessian) inside the graph differentiates
with autograd at its own level: Dynamo keeps the level's bounds
(`_grad_increment_nesting` ... `_grad_decrement_nesting`) but not the
`enable_grad()` the transform runs under, as grad was on when it traced. Traced
under `no_grad`, the inner `autograd.grad` found nothing to differentiate and
returned zeros (a silent wrong answer); the level now runs with grad enabled, so
the tracer records the inner backward as ordinary ops.
"""
from __future__ import annotations

import operator

import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils import _pytree as pytree

from . import custom_ops  # noqa: F401  (defines torch.ops.fusegrad.*)
from .graph_split import returns_self

_DETACH = {torch.detach, torch.Tensor.detach, "detach"}
_STOP = torch.ops.fusegrad.stop_gradient.default
# node meta of what a Dynamo graph computes with grad disabled: an in-place update of an
# input there is not recorded by autograd (capture.Captured.write_back)
GRAD_DISABLED = "fusegrad_grad_disabled"


def _is_tensor(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("example_value"), torch.Tensor)


def enter_grad_level() -> bool:
    """Grad mode on for a `torch.func` grad level (as the transform runs it); the mode
    before, for `exit_grad_level`."""
    before = torch.is_grad_enabled()
    torch._C._set_grad_enabled(True)
    return before


def exit_grad_level(before: bool) -> None:
    torch._C._set_grad_enabled(before)


def mark_stop_gradients(gm: torch.fx.GraphModule, enabled: bool = True) -> bool:
    """Route detaches and values computed under `no_grad` through `stop_gradient`, turn
    the grad-mode switches into `set_grad_enabled`, which tracing drops, and run
    `torch.func` grad levels with grad enabled (in place; running it again changes nothing).

    `enabled`: the grad mode the graph starts in (Dynamo's, when it traced it). Returns
    whether a graph that starts with grad disabled computes something with grad enabled
    (an `enable_grad()` block: an energy model's forward under `no_grad`)."""
    graph = gm.graph
    if not enabled and not any(_enables_grad(node) for node in graph.nodes):
        enabled = True  # no_grad throughout: nothing records, and forward-mode AD still flows
    levels, stopped = [], []
    initially, enables = enabled, False
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            enabled = bool(node.args[0])
            enables = enables or enabled
            node.target = torch.ops.fusegrad.set_grad_enabled.default
            continue
        name = getattr(node.target, "__name__", None) if node.op == "call_function" else None
        if name == "_grad_increment_nesting":
            enter = node.next
            if enter.target is not enter_grad_level:
                with graph.inserting_after(node):
                    enter = graph.call_function(enter_grad_level)
            levels.append((enabled, enter))
            enables = enables or not enabled
            enabled = True
            continue
        if name == "_grad_decrement_nesting" and levels:
            enabled, enter = levels.pop()
            if node.next.target is not exit_grad_level:
                with graph.inserting_after(node):
                    graph.call_function(exit_grad_level, (enter,))
            continue
        if not enabled and node.op != "placeholder":
            node.meta[GRAD_DISABLED] = True
        if node.op in ("placeholder", "output") or node.target is _STOP or not node.users:
            continue
        detach = node.op in ("call_function", "call_method") and node.target in _DETACH
        if detach or not enabled and _is_tensor(node):
            stopped.append(node)
    for node in stopped:
        _stop_after(graph, node)
    graph.lint()
    gm.recompile()
    return enables and not initially


def _enables_grad(node: torch.fx.Node) -> bool:
    """Does `node` turn grad mode on (an enable_grad() block, a torch.func grad level)?"""
    if node.op != "call_function":
        return False
    if node.target is torch._C._set_grad_enabled:
        return bool(node.args[0])
    return getattr(node.target, "__name__", None) == "_grad_increment_nesting"


def has_no_grad_regions(gm: torch.fx.GraphModule) -> bool:
    """Did `mark_stop_gradients` find values computed with grad disabled? Their
    stop_gradient also stops forward-mode tangents, which eager's no_grad does not."""
    return any(node.meta.get(GRAD_DISABLED) for node in gm.graph.nodes)


def _stop_after(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """Route the uses of `node` through stop_gradient, except those that write into it
    (`v.add_(x)`, `v[i] = x`) or, with grad disabled, take a view of it or update it in
    place: they go on aliasing `node`, so an update under `no_grad` or of a detached
    tensor reaches the tensor (a stop_gradient is a copy: the update was lost)."""
    def stops(user: torch.fx.Node) -> bool:
        if user.target is _STOP or _writes_into(user, node):
            return False
        return not (user.meta.get(GRAD_DISABLED) and _aliases(user, node))
    users = [u for u in node.users if stops(u)]
    if not users:
        return
    with graph.inserting_after(node):
        stop = graph.call_function(_STOP, (node,))
    stop.meta = dict(node.meta)
    for user in users:
        user.replace_input_with(node, stop)


def _writes_into(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    """Does `user` update `node` in place (an in-place op on it, or `node[i] = x`)?"""
    return bool(user.args) and user.args[0] is node and (
        user.target is operator.setitem or returns_self(user))


def _aliases(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    """Does a tensor `user` computes share `node`'s storage (Dynamo's example values)?"""
    def storage(value: object) -> int | None:
        return (StorageWeakRef(value.untyped_storage()).cdata
                if isinstance(value, torch.Tensor) else None)
    mine = storage(node.meta.get("example_value"))
    return mine is not None and any(
        storage(v) == mine for v in pytree.tree_leaves(user.meta.get("example_value")))

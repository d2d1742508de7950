"""`fusegrad::stop_gradient`: how a detach or a `torch.no_grad()` block reaches dg.

fusegrad traces under `no_grad` and differentiates the graph itself, so it
must see where gradients stop. In the traced ATen graph, `x.detach()` is only
an `aten.alias` (indistinguishable from other aliases) and Dynamo keeps a
`no_grad()` block as `_set_grad_enabled` calls, which the tracer rejects.
Before tracing, `mark_stop_gradients` rewrites a Dynamo graph: `detach` calls
and the tensors computed with grad disabled go through this custom op, which
survives tracing and the importer maps to `dg.stop_gradient`, and the switches
become `fusegrad::set_grad_enabled`, which switches in eager and is gone from
the traced graph.

`torch.func.grad` (and vjp, jacrev, hessian) inside the graph differentiates
with autograd at its own level: Dynamo keeps the level's bounds
(`_grad_increment_nesting` ... `_grad_decrement_nesting`) but not the
`enable_grad()` the transform runs under, as grad was on when it traced. Traced
under `no_grad`, the inner `autograd.grad` found nothing to differentiate and
returned zeros (a silent wrong answer); the level now runs with grad enabled, so
the tracer records the inner backward as ordinary ops.
"""
from __future__ import annotations

import torch
import torch.fx


@torch.library.custom_op("fusegrad::stop_gradient", mutates_args=())
def stop_gradient(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone()


@stop_gradient.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("fusegrad::set_grad_enabled", mutates_args=())
def set_grad_enabled(enabled: bool) -> None:
    """A grad-mode switch the tracer passes over (a graph run eagerly, after a failed
    compile, still runs its `no_grad()` blocks without grad)."""
    torch._C._set_grad_enabled(enabled)


@set_grad_enabled.register_fake
def _(enabled: bool) -> None:
    return None


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


def mark_stop_gradients(gm: torch.fx.GraphModule) -> None:
    """Route detaches and values computed under `no_grad` through `stop_gradient`, turn
    the grad-mode switches into `set_grad_enabled`, which tracing drops, and run
    `torch.func` grad levels with grad enabled (in place; running it again changes nothing)."""
    graph = gm.graph
    enabled, levels = True, []
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            enabled = bool(node.args[0])
            node.target = torch.ops.fusegrad.set_grad_enabled.default
            continue
        name = getattr(node.target, "__name__", None) if node.op == "call_function" else None
        if name == "_grad_increment_nesting":
            enter = node.next
            if enter.target is not enter_grad_level:
                with graph.inserting_after(node):
                    enter = graph.call_function(enter_grad_level)
            levels.append((enabled, enter))
            enabled = True
            continue
        if name == "_grad_decrement_nesting" and levels:
            enabled, enter = levels.pop()
            if node.next.target is not exit_grad_level:
                with graph.inserting_after(node):
                    graph.call_function(exit_grad_level, (enter,))
            continue
        if not enabled:
            node.meta[GRAD_DISABLED] = True
        detach = node.op in ("call_function", "call_method") and node.target in _DETACH
        if detach and levels:
            # the level's autograd must see the detach (a custom op on a tensor requiring
            # grad there has no autograd rule functorch accepts); dg sees stop_gradient
            if not any(u.target is _STOP for u in node.users):
                _stop_after(graph, node)
        elif detach:
            node.target, node.op = _STOP, "call_function"
            node.args, node.kwargs = node.args[:1], {}
        elif not enabled and node.op not in ("placeholder", "output") and _is_tensor(node) \
                and node.users:
            _stop_after(graph, node)
    graph.lint()
    gm.recompile()


def _stop_after(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    """Route every use of `node` through stop_gradient."""
    with graph.inserting_after(node):
        stopped = graph.call_function(_STOP, (node,))
    stopped.meta = dict(node.meta)
    node.replace_all_uses_with(stopped, delete_user_cb=lambda user: user is not stopped)

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
# node meta of what a Dynamo graph computes with grad disabled: an in-place update of an
# input there is not recorded by autograd (capture.Captured.write_back)
GRAD_DISABLED = "fusegrad_grad_disabled"


def _is_tensor(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("example_value"), torch.Tensor)


def mark_stop_gradients(gm: torch.fx.GraphModule) -> None:
    """Route detaches and values computed under `no_grad` through `stop_gradient`, and
    turn the grad-mode switches into `set_grad_enabled`, which tracing drops (in place)."""
    graph = gm.graph
    enabled = True
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is torch._C._set_grad_enabled:
            enabled = bool(node.args[0])
            node.target = torch.ops.fusegrad.set_grad_enabled.default
            continue
        if not enabled:
            node.meta[GRAD_DISABLED] = True
        detach = node.op in ("call_function", "call_method") and node.target in _DETACH
        if detach:
            node.target, node.op = torch.ops.fusegrad.stop_gradient.default, "call_function"
            node.args, node.kwargs = node.args[:1], {}
        elif not enabled and node.op not in ("placeholder", "output") and _is_tensor(node) \
                and node.users:
            with graph.inserting_after(node):
                stopped = graph.call_function(torch.ops.fusegrad.stop_gradient.default, (node,))
            stopped.meta = dict(node.meta)
            node.replace_all_uses_with(stopped, delete_user_cb=lambda user: user is not stopped)
    graph.lint()
    gm.recompile()

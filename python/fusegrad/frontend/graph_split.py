"""Graph splitting: an op fusegrad cannot compile runs eagerly in its place.

When importing a Dynamo graph raises `UnsupportedOp` at an ATen node, the
Dynamo node it was traced from (FX's `from_node` provenance, kept through
capture) is marked eager, and the graph is cut into consecutive parts with
`torch.fx.passes.split_module`: compiled, eager, compiled, ... Each compiled
part is compiled on its first call (and may split again at its own
unsupported op). Gradients flow through the eager parts by ordinary
autograd, since each compiled part is its own `autograd.Function`.
"""
from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

from .importer import UnsupportedOp

log = logging.getLogger(__name__)

_COMPUTE = ("call_function", "call_method", "call_module")


# what enters a level, as torch._C._functorch and torch._functorch.predispatch name it
_TRANSFORM_LEVELS = {"_grad_increment_nesting", "_vmap_increment_nesting",
                     "_jvp_increment_nesting", "_func_increment_nesting", "_enter_dual_level"}


def runs_transforms(gm: torch.fx.GraphModule) -> bool:
    """Whether `gm` enters a torch.func transform's level (grad, vmap, jvp). Such a graph
    is not split: a part cut from inside a level would run outside it (a grad's
    inner backward found nothing to differentiate and gave zeros)."""
    return any(n.op == "call_function" and getattr(n.target, "__name__", None) in _TRANSFORM_LEVELS
               for n in gm.graph.nodes)


@dataclass(frozen=True)
class EagerPart:
    """A piece of a graph that runs in eager PyTorch, and why."""

    op: str  # the ATen op fusegrad could not compile
    reason: str
    where: str  # the user's source line (or the FX node)
    nodes: tuple[str, ...]  # the Dynamo graph's nodes that run eagerly

    def __str__(self) -> str:
        return f"'{self.op}' at {self.where} ({self.reason})"


def origin(gm: torch.fx.GraphModule, error: UnsupportedOp) -> torch.fx.Node | None:
    """The node of `gm` (a graph that was captured) the unsupported ATen node came from."""
    if error.node is None:
        return None
    nodes = {n.name: n for n in gm.graph.nodes if n.op in _COMPUTE}
    pending = list(error.node.meta.get("from_node") or ())
    while pending:
        source = pending.pop(0)
        if source.name in nodes:
            return nodes[source.name]
        pending.extend(source.from_node or ())
    return None


_INPLACE_OPERATORS = (operator.iadd, operator.isub, operator.imul, operator.itruediv,
                      operator.ifloordiv, operator.imod, operator.ipow, operator.iand,
                      operator.ior, operator.ixor, operator.ilshift, operator.irshift)


def returns_self(node: torch.fx.Node) -> bool:
    """Whether the node is an in-place op on a tensor, which returns that tensor."""
    if not (node.args and isinstance(node.args[0], torch.fx.Node)
            and isinstance(node.args[0].meta.get("example_value"), torch.Tensor)):
        return False
    if node.op == "call_method":  # a tensor method: `mul_`, `copy_`, `masked_fill_`
        return node.target.endswith("_") and not node.target.startswith("_")
    if node.op != "call_function":
        return False
    if node.target in _INPLACE_OPERATORS or node.kwargs.get("inplace") is True:
        return True
    # torch's in-place functions (`torch.relu_`), not `operator.and_` and the like
    name = getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.startswith("_") and (
        getattr(torch, name, None) is node.target or getattr(torch.Tensor, name, None) is node.target)


def read_inplace_results_as_self(gm: torch.fx.GraphModule) -> None:
    """Make later uses of an in-place op's result (`b = a.mul_(2)`, then `b.add_(1)`) read
    its input `a`, the same tensor in eager. A compiled part returns fresh tensors: split
    between the two, the second op mutated a copy, and `a` silently lost the update (the
    `exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)` of a compiled Adam step)."""
    changed = False
    for node in gm.graph.nodes:
        if node.users and returns_self(node):
            node.replace_all_uses_with(node.args[0])
            changed = True
    if changed:
        gm.recompile()


def complex_ops(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The nodes of a Dynamo graph that make or read complex tensors (FFTs and what
    follows them): dg has no complex dtypes, and these run eagerly while the real-valued
    rest of the graph compiles, rather than the whole graph running eagerly."""
    def is_complex(value: object) -> bool:
        return any(isinstance(v, torch.Tensor) and v.is_complex()
                   for v in torch.utils._pytree.tree_leaves(value))

    def made_complex(node: object) -> bool:
        return isinstance(node, torch.fx.Node) and is_complex(node.meta.get("example_value"))
    return [n for n in gm.graph.nodes if n.op in _COMPUTE and (
        made_complex(n) or any(made_complex(a) for a in n.all_input_nodes))]


USER_BACKWARD = "the user's own backward code"
CONTROL_FLOW = "data-dependent control flow: dg has no branches or loops"

# Dynamo's higher-order ops that run eagerly (by name: Dynamo defines some, such as
# register_hook, when it first traces one): how messages name them, and why
_EAGER_HIGHER_ORDER = {
    "autograd_function_apply": ("torch.autograd.Function", USER_BACKWARD),
    "register_hook": ("Tensor.register_hook", USER_BACKWARD),
    "cond": ("torch.cond", CONTROL_FLOW),
    "while_loop": ("torch.while_loop", CONTROL_FLOW),
    "scan": ("torch.scan", CONTROL_FLOW),
    "map_impl": ("torch.map", CONTROL_FLOW),
}


def _eager_higher_order(node: torch.fx.Node) -> tuple[str, str]:
    """(name, reason) of an op in _EAGER_HIGHER_ORDER, else empty strings."""
    if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
        return _EAGER_HIGHER_ORDER.get(node.target.name(), ("", ""))
    return "", ""


def eager_higher_order_ops(gm: torch.fx.GraphModule, reason: str) -> list[torch.fx.Node]:
    """The nodes of a Dynamo graph that run eagerly for `reason`. USER_BACKWARD: a
    `torch.autograd.Function` (a gradient reversal, a straight-through estimator) and a
    hook on an intermediate tensor give autograd the user's backward code; fusegrad
    differentiates what it traces, so compiled, a Function's gradient was silently its
    forward's own derivative (and a hook failed to trace). CONTROL_FLOW: `torch.cond`
    and loops, whose branches tracing cannot inline."""
    return [n for n in gm.graph.nodes if _eager_higher_order(n)[1] == reason]


def op_name(node: torch.fx.Node) -> str:
    """How a Dynamo node's op reads in a message: `fftn`, `real`, `mul`."""
    if node.op == "call_function" and node.target is getattr and len(node.args) > 1:
        return str(node.args[1])
    name, _ = _eager_higher_order(node)
    if name:
        return name
    return getattr(node.target, "__name__", str(node.target))


def _with_getitems(eager: set[torch.fx.Node]) -> set[torch.fx.Node]:
    """An eager op returning a tuple keeps the getitems that unpack it: parts
    exchange tensors, not tuples."""
    closed = set(eager)
    for node in eager:
        closed.update(u for u in node.users if u.op == "call_function" and u.target is operator.getitem)
    return closed


def split_at(gm: torch.fx.GraphModule, eager: set[torch.fx.Node],
             compile_part: Callable[[torch.fx.GraphModule], Callable]) -> torch.fx.GraphModule:
    """`gm` cut into consecutive parts; the parts not in `eager` become `compile_part(part)`."""
    eager = _with_getitems(eager)
    part: dict[torch.fx.Node, int] = {}
    index, current = -1, None
    for node in gm.graph.nodes:
        if node.op not in _COMPUTE:
            continue
        if (node in eager) != current:
            index, current = index + 1, node in eager
        part[node] = index
    split = split_module(gm, gm, lambda node: part[node], keep_original_order=True)
    compiled = {f"submod_{part[n]}" for n in part if n not in eager}
    for name in compiled:
        setattr(split, name, _Part(compile_part(getattr(split, name))))
    log.info("graph split into %d compiled and %d eager part(s)", len(compiled),
             index + 1 - len(compiled))
    return split


class _Part(torch.nn.Module):
    """A compiled part as a submodule of the split graph (which calls it by name)."""

    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)

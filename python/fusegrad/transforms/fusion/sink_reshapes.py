"""dg-sink-reshapes: apply a pointwise op before a reshape of its operand, not after.

`f(reshape(a), reshape(b), ...)` equals `reshape(f(a, b, ...))` for a pointwise `f`
whose reshaped operands all come from one shape, where a splat `full` or a
`broadcast_in_dim` operand is rebuilt in that shape instead. A reshape ends a fusion
region (regions hold one iteration space), so a pointwise op that reads a region's
result through a reshape ran as a kernel of its own: HF models compute the loss's
gradient of the logits on [tokens, vocabulary], view it as [batch, tokens, vocabulary]
and round it to bf16 there (the gradient of the loss's `logits.float()`), so at GPT-2's
size a second kernel read the 1.6 GB f32 gradient to write its bf16 copy. Sunk, the
rounding joins the gradient's region, which writes bf16 directly.

The converse of dg-hoist-reshapes, for the other side of a region: it moves a reshape
only where a reshaped operand's producer is an op that fuses (not an argument, a
contraction, a splat, a broadcast or a reshape, the operands next to which hoisting
puts pointwise ops), so the two rewrites never undo each other.
"""
from __future__ import annotations

import logging
from typing import Optional

from mlir import ir

from ...dialects.builder import erase_if_unused, recreate, spec
from ...dialects.core import is_pointwise
from ...dialects.types import tensor_type
from ...passes import rewrite_bodies, rewrite_ops
from .hoist_reshapes import BOUNDARIES, broadcast_dims, reshape_groups, reshaped

log = logging.getLogger(__name__)


def _producer(v: ir.Value) -> Optional[ir.Operation]:
    return None if isinstance(v.owner, ir.Block) else v.owner.operation


def _source_shape(f: ir.Operation) -> Optional[tuple]:
    """The one shape `f`'s reshaped operands come from, where every other operand is a
    splat or a broadcast and some reshaped operand's producer fuses; else None."""
    shapes, fuses = set(), False
    for a in f.operands:
        op = _producer(a)
        if op is None:
            return None
        if op.name == "dg.reshape":
            source = _producer(op.operands[0])
            shapes.add(tuple(spec(op.operands[0]).shape))
            fuses |= source is not None and source.name not in \
                BOUNDARIES + ("dg.full", "dg.broadcast_in_dim", "dg.reshape")
        elif op.name not in ("dg.full", "dg.broadcast_in_dim"):
            return None
    return shapes.pop() if fuses and len(shapes) == 1 else None


def _sink(f: ir.Operation) -> bool:
    """Rewrite pointwise `f` to compute in its reshaped operands' source shape; False if
    it cannot."""
    shape = _source_shape(f)
    if shape is None:
        return False
    groups = reshape_groups(tuple(spec(f.results[0]).shape), shape)
    if groups is None:
        return False
    producers = [_producer(a) for a in f.operands]
    if any(broadcast_dims(p, groups) is None for p in producers
           if p.name == "dg.broadcast_in_dim"):
        return False
    element = ir.RankedTensorType(f.results[0].type).element_type
    with ir.InsertionPoint(f):
        made: dict = {}
        for a in f.operands:
            if a not in made:
                made[a] = reshaped(a, shape, groups, f.location)
        new = recreate(f, [made[a] for a in f.operands], [tensor_type(shape, element)])
        back = ir.Operation.create("dg.reshape", results=[f.results[0].type],
                                   operands=[new.results[0]], loc=f.location)
    f.results[0].replace_all_uses_with(back.results[0])
    f.erase()
    for a in made:  # each operand once: `x * x` reads one reshape twice
        erase_if_unused(_producer(a))
    return True


def sink_reshapes(block: ir.Block) -> int:
    """Rewrite the pointwise ops of `block` that read reshapes (to a fixed point: a sunk
    op's pointwise reader may sink next); returns how many moved."""
    return rewrite_ops(block, lambda op: is_pointwise(op) and any(
        (p := _producer(a)) is not None and p.name == "dg.reshape" for a in op.operands)
        and _sink(op))


def sink_reshapes_pass(module: ir.Operation) -> None:
    rewrite_bodies(module, sink_reshapes, log,
                   "dg-sink-reshapes: @%s: %d pointwise ops moved above reshapes")

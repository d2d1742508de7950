"""dg-sink-to-uses: each op computed just before its first use, so temporaries live short.

Autodiff emits a backward's recomputations (dg-remat's) and the ops on saved values
first, then the gradients layer by layer from the loss back, so a deep model's backward
computed every layer's recomputed activations at its start and kept them until that
layer's turn: in HF GPT-2 12x768's backward, 65 values of 4 MiB or more (608 MiB in
all) came more than 50 ops before their first use. The workspace planner packs
temporaries by live range (`dg-plan-workspace`), so these all lived at once.

First, an op whose results only the function returns (a weight's gradient, which dg-fuse
had left after the whole backward), with the views only such ops read (the transpose
of its operand, which a matmul reads in place), moves up to just after its last input:
its results live in the outputs through the call anyway, and its inputs (a layer's
activations) die at once. Then each dg op and fusion region (all side-effect free)
moves down to just before the first op of its block that uses it, taking the ops in
reverse order so that users are in place first. An op stays where it is when moving it
would keep more bytes alive than it frees: its inputs whose last use it is would live
until its new place, so it moves only when its results are at least as large (a sum of
a big tensor something else reads too stays next to it). The function's arguments live
through the call anyway, and an input only this op uses follows it down (its producer
is taken next), so neither counts. With both, that backward's workspace went from 498
to 178 MiB.
"""
from __future__ import annotations

import logging
from typing import Optional

from mlir import ir

from ..dialects.region_ops import fusion_inputs, is_fusion
from ..dialects.types import TensorSpec, size_hints
from ..passes import rewrite_bodies

log = logging.getLogger(__name__)


# ops that cost no pass of their own under an output's computation (a matmul reads a
# transposed operand in place)
_VIEWS = ("dg.reshape", "dg.transpose", "dg.slice")


def _movable(op: ir.Operation) -> bool:
    return op.name.startswith("dg.") or is_fusion(op)


def _inputs(op: ir.Operation) -> list[ir.Value]:
    """What `op` reads from outside: a fusion region's body reads values from above."""
    return fusion_inputs(op) if is_fusion(op) else list(op.operands)


def _top(op: ir.Operation, block: ir.Block) -> Optional[ir.Operation]:
    """The ancestor of `op` (or `op`) in `block`."""
    while op.block != block:
        parent = op.parent
        if parent is None or parent.name in ("builtin.module", "func.func"):
            return None
        op = parent.operation
    return op


def _bytes(v: ir.Value, hints: dict[str, int]) -> int:
    try:
        return TensorSpec.from_mlir(v.type).hinted(hints).nbytes
    except TypeError:  # not a tensor
        return 0


def _first(ops: list[ir.Operation]) -> ir.Operation:
    found = ops[0]
    for op in ops[1:]:
        if op.is_before_in_block(found):
            found = op
    return found


def sink_to_uses(block: ir.Block) -> int:
    return _hoist_outputs(block) + _sink(block)


def _hoist_outputs(block: ir.Block) -> int:
    """Outputs and the views only they read, each just after its last input."""
    ops = [o.operation for o in block.operations]
    ret = ops[-1]
    bound: set = set()  # outputs, and the views only they read
    for op in reversed(ops[:-1]):
        users = {_top(u.owner.operation, block) for r in op.results for u in r.uses}
        if _movable(op) and users and (users == {ret} or (
                op.name in _VIEWS and all(u in bound for u in users))):
            bound.add(op)
    position = {op: k for k, op in enumerate(ops)}
    moved = 0
    for op in ops:
        if op not in bound:
            continue
        defined = [_top(v.owner.operation, block) for v in _inputs(op)
                   if not isinstance(v.owner, ir.Block)]
        if any(d is None for d in defined):
            continue
        if not defined:
            if block.operations[0] != op:
                op.move_before(block.operations[0])
        else:
            last = defined[0]
            for d in defined[1:]:
                if last.is_before_in_block(d):
                    last = d
            op.move_after(last)
            moved += position[op] > position[last] + 1
    return moved


def _sink(block: ir.Block) -> int:
    """Each op just before its first use, where that keeps no more bytes alive."""
    hints = size_hints(block.owner.operation)
    ops = [o.operation for o in block.operations]
    position = {op: k for k, op in enumerate(ops)}  # before any move: for the count only
    moved = 0
    for op in reversed(ops):
        if not _movable(op) or not op.results:
            continue
        users = [_top(u.owner.operation, block) for r in op.results for u in r.uses]
        if not users or any(u is None for u in users):
            continue
        first = _first(users)
        # a result the function returns lives in its output through the call anyway
        freed = sum(_bytes(r, hints) for r in op.results
                    if not any(u.owner.operation.name == "func.return" for u in r.uses))
        if not freed or _kept(op, first, block, hints) > freed:
            continue
        op.move_before(first)
        moved += position[first] > position[op] + 1
    return moved


def _kept(op: ir.Operation, to: ir.Operation, block: ir.Block, hints: dict[str, int]) -> int:
    """Bytes that moving `op` down to `to` keeps alive longer: its inputs whose last use
    it is, defined in `block` (its arguments live through the call anyway), those of an
    input's producer instead where that producer has one result, which only the op
    reading it uses (it follows that op down, taken next)."""
    kept, work = 0, [op]
    while work:
        reader = work.pop()
        for v in set(_inputs(reader)):
            if isinstance(v.owner, ir.Block):
                continue
            producer = v.owner.operation
            users = [_top(u.owner.operation, block) for u in v.uses]
            if _movable(producer) and len(producer.results) == 1 and \
                    all(u == reader for u in users):
                work.append(producer)
            elif all(u is not None and (u == reader or u.is_before_in_block(to))
                     for u in users):
                kept += _bytes(v, hints)
    return kept


def sink_to_uses_pass(module: ir.Operation) -> None:
    rewrite_bodies(module, sink_to_uses, log, "dg-sink-to-uses: @%s: %d ops moved to their uses")

"""dg-hoist-reshapes: reshape a pointwise op's operands, not its result.

`reshape(f(a, b, ...))` equals `f(reshape(a), reshape(b), ...)` for a pointwise `f`,
where a splat `full` or a `broadcast_in_dim` operand is rebuilt in the new shape
instead. A reshape is free as a view of a buffer, but it ends a fusion region
(regions hold one iteration space): GPT-2's MLP computes `x @ W + b` on
1024 x 1024, views it as 8 x 128 x 1024 and applies GELU there, so the bias add was
a kernel of its own that wrote 4 MiB for the GELU kernel to read back. Hoisted up
to the matmul, the reshape views the matmul's result and the bias add joins the
GELU's region.

Only reshapes of a pointwise op nothing else reads are rewritten (the op is moved,
never duplicated), whose operands are contraction results, arguments, splats,
broadcasts, reshapes of contraction results (the two reshapes compose: attention's
key gradient is scaled between a view as heads and a view as key groups) or
reshapes that the hoisted one undoes (HF models add the logits' 3-D
cotangent to the loss's 2-D gradient between two reshapes): moved away from the ops
it fuses with in its own shape (a layer norm's affine part, next to its statistics),
a pointwise op split regions instead. A broadcast operand is rebuilt only when each
dim it keeps sits in a group of the reshape that maps one dim to one dim of the same
size.
"""
from __future__ import annotations

import logging
import math
from typing import Optional

from mlir import ir

from ...dialects.builder import erase_if_unused, recreate, spec
from ...dialects.core import attrs_of, equal, holds, is_pointwise
from ...dialects.types import DEFAULT_SIZE_HINT, tensor_type
from ...runtime import abi
from ...passes import rewrite_bodies, rewrite_ops


log = logging.getLogger(__name__)


def reshape_groups(src: tuple, dst: tuple) -> Optional[list[tuple[list[int], list[int]]]]:
    """The reshape's groups: (source dims, destination dims) with equal products, in
    order; size-1 dims join the group before them (or the first). None if the shapes
    do not split that way. Symbolic sizes are ordered at a size hint to form the groups,
    and each group's products must then be provably equal."""
    at_hint = [[d if isinstance(d, int) else abi.eval_dim(
        d, {str(x): DEFAULT_SIZE_HINT for x in d.free_symbols}) for d in shape]
        for shape in (src, dst)]
    hs, hd = at_hint
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        gs, gd, ps, pd = [], [], 1, 1
        while True:
            if ps <= pd and i < len(src) and (not gs or ps < pd or hs[i] == 1):
                ps *= hs[i]
                gs.append(i)
                i += 1
            elif j < len(dst) and (not gd or pd < ps or hd[j] == 1):
                pd *= hd[j]
                gd.append(j)
                j += 1
            else:
                break
        if ps != pd or holds(equal(math.prod(src[k] for k in gs),
                                   math.prod(dst[k] for k in gd))) is not True:
            return None
        groups.append((gs, gd))
    return groups


def broadcast_dims(op: ir.Operation, groups) -> Optional[list[int]]:
    """The dims of broadcast `op` re-expressed after the reshape, or None."""
    dims = list(attrs_of(op)["dims"])
    src, full = spec(op.operands[0]).shape, spec(op.results[0]).shape
    one_to_one = {gs[0]: gd[0] for gs, gd in groups
                  if len(gs) == 1 and len(gd) == 1}
    out = []
    for k, d in enumerate(dims):
        if src[k] != full[d] or d not in one_to_one:
            return None
        out.append(one_to_one[d])
    return out if out == sorted(out) else None


def reshaped(v: ir.Value, shape: tuple[int, ...], groups, loc: ir.Location) -> ir.Value:
    """`reshape(v)` to `shape`, emitted at the insertion point (rebuilding a splat or a
    broadcast in the new shape; a broadcast must pass `broadcast_dims`)."""
    t = tensor_type(shape, ir.RankedTensorType(v.type).element_type)
    op = None if isinstance(v.owner, ir.Block) else v.owner.operation
    if op is not None and op.name == "dg.full":
        return recreate(op, [], [t]).results[0]
    if op is not None and op.name == "dg.broadcast_in_dim":
        new = recreate(op, op.operands, [t])
        new.attributes["dims"] = ir.DenseI64ArrayAttr.get(broadcast_dims(op, groups))
        return new.results[0]
    if op is not None and op.name == "dg.reshape":  # reshape(reshape(x)) = reshape(x)
        v = op.operands[0]
    if v.type == t:
        return v
    return ir.Operation.create("dg.reshape", results=[t], operands=[v], loc=loc).results[0]


# ops whose result a reshape views for free, next to which a pointwise op belongs in the
# reshaped shape (the bias of `x @ W + b`)
BOUNDARIES = ("dg.matmul", "dg.conv2d")


def _at_boundary(v: ir.Value, shape: tuple[int, ...]) -> bool:
    """Is `v` a splat, a broadcast, a contraction's result, an argument, or a reshape
    from `shape` (which the hoisted reshape undoes)?"""
    if isinstance(v.owner, ir.Block):
        return True
    op = v.owner.operation
    if op.name == "dg.reshape":  # undone, or a view of a contraction's result (composed)
        source = op.operands[0]
        return tuple(spec(source).shape) == shape or isinstance(source.owner, ir.Block) or \
            source.owner.operation.name in BOUNDARIES
    return op.name in ("dg.full", "dg.broadcast_in_dim") + BOUNDARIES


def _hoistable(reshape: ir.Operation) -> bool:
    x = reshape.operands[0]
    if isinstance(x.owner, ir.Block) or len(list(x.uses)) != 1:
        return False
    f = x.owner.operation
    shape = tuple(spec(reshape.results[0]).shape)
    return is_pointwise(f) and all(_at_boundary(a, shape) for a in f.operands)


def _hoist(reshape: ir.Operation) -> bool:
    """Reshape the operands of the pointwise op `reshape` reads instead; False if it cannot."""
    f = reshape.operands[0].owner.operation
    shape = tuple(spec(reshape.results[0]).shape)
    groups = reshape_groups(tuple(spec(f.results[0]).shape), shape)
    if groups is None:
        return False
    producers = [a.owner.operation for a in f.operands if not isinstance(a.owner, ir.Block)]
    if any(broadcast_dims(p, groups) is None for p in producers
           if p.name == "dg.broadcast_in_dim"):
        return False
    with ir.InsertionPoint(f):
        made: dict = {}  # an operand read twice (x * x) is reshaped once
        for a in f.operands:
            if a not in made:
                made[a] = reshaped(a, shape, groups, reshape.location)
        new = recreate(f, [made[a] for a in f.operands], [tensor_type(
            shape, ir.RankedTensorType(f.results[0].type).element_type)])
    reshape.results[0].replace_all_uses_with(new.results[0])
    reshape.erase()
    erase_if_unused(f)
    return True


def hoist_reshapes(block: ir.Block) -> int:
    """Rewrite the reshapes of `block` (to a fixed point); returns how many moved."""
    # a rewrite erases only ops before the reshape (the pointwise op and producers it
    # leaves unread) and makes new reshapes there, for the next round
    return rewrite_ops(block, lambda op: op.name == "dg.reshape" and _hoistable(op)
                       and _hoist(op))


def hoist_reshapes_pass(module: ir.Operation) -> None:
    rewrite_bodies(module, hoist_reshapes, log,
                   "dg-hoist-reshapes: @%s: %d reshapes moved above pointwise ops")

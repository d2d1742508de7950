"""dg-transpose-matmul-results: a matmul read only transposed computes the transpose.

`transpose(A @ B) = B^T @ A^T` (last two dims). When every reader of a matmul
takes it through a transpose of its last two dims, the matmul is rewritten to
produce that layout directly; operand transposes cancel against transposes
already there or become BLAS transpose flags (`dg-matmul-to-blas`). Left as
it was, the transpose would be read column-wise by whatever kernel it fuses
into: a tied embedding's gradient (GPT-2, BERT) added the LM head's
transposed 256x2048 weight gradient that way, the largest of GPT-2's
backward kernels.
"""
from __future__ import annotations

import logging

from mlir import ir

from ...dialects.builder import Builder, erase_dead, erase_if_unused, recreate
from ...dialects.core import attrs_of, is_pointwise
from ...dialects.types import TensorSpec, tensor_type
from ...passes import rewrite_bodies
from .hoist_reshapes import hoist_reshapes


log = logging.getLogger(__name__)


def swaps_last_two(op: ir.Operation) -> bool:
    """Is `op` a dg.transpose of the last two dims only?"""
    if op.name != "dg.transpose":
        return False
    perm = list(attrs_of(op)["perm"])
    n = len(perm)
    return n >= 2 and perm == [*range(n - 2), n - 1, n - 2]


def transposed(b: Builder, v: ir.Value) -> ir.Value:
    """`v` with its last two dims swapped (undoing a transpose that swapped them)."""
    if not isinstance(v.owner, ir.Block) and swaps_last_two(v.owner.operation):
        return v.owner.operation.operands[0]
    n = ir.RankedTensorType(v.type).rank
    return b.transpose(v, perm=[*range(n - 2), n - 1, n - 2])


def transpose_matmul_results(block: ir.Block) -> int:
    """Rewrite the matmuls of `block` read only transposed; returns how many."""
    rewritten = 0
    for op in [o.operation for o in block.operations if o.operation.name == "dg.matmul"]:
        readers = [u.owner.operation for u in op.results[0].uses]
        if not readers or not all(swaps_last_two(r) for r in readers):
            continue
        lhs, rhs = op.operands
        with ir.InsertionPoint(op):
            b = Builder(op.location)
            product = b.matmul(transposed(b, rhs), transposed(b, lhs))
        for r in readers:
            r.results[0].replace_all_uses_with(product)
            r.erase()
        erase_if_unused(op)
        rewritten += 1
    return rewritten


def _swapped(t: ir.Type) -> ir.Type:
    """Tensor type `t` with its last two dims swapped."""
    shape = list(TensorSpec.from_mlir(t).shape)
    shape[-2:] = shape[-1], shape[-2]
    return tensor_type(shape, ir.RankedTensorType(t).element_type)


def _keeps_last_two(op: ir.Operation) -> bool:
    """Is `op` a dg.reshape that only regroups the leading dims (so it commutes with a
    transpose of the last two)?"""
    if op.name != "dg.reshape":
        return False
    src, dst = (TensorSpec.from_mlir(v.type).shape for v in (op.operands[0], op.results[0]))
    return len(src) >= 2 and len(dst) >= 2 and src[-2:] == dst[-2:]


def is_splat(v: ir.Value) -> bool:
    """Is `v` a `dg.full`?"""
    return not isinstance(v.owner, ir.Block) and v.owner.operation.name == "dg.full"


def _gemm_operand(v: ir.Value) -> bool:
    """Does a matmul reading `v` transposed take it through gemm's transpose flag (as
    `fuse._gemm_flag_transpose` keeps such transposes out of regions)?"""
    s = TensorSpec.from_mlir(v.type)
    return len(s.shape) <= 3 and s.dtype in ("f32", "f64")


def _path_down(t: ir.Operation) -> list[ir.Operation] | None:
    """The single-reader chain of leading-dim reshapes and pointwise ops (other operands
    splats) from transpose `t` down to a matmul that reads it through its transpose flag
    (excluded) or a transpose that undoes `t` (included); None if there is none."""
    path, cur = [], t.results[0]
    while True:
        uses = list(cur.uses)
        if len(uses) != 1:
            return None
        u = uses[0].owner.operation
        if u.name == "dg.matmul":
            return path if path and _gemm_operand(cur) else None
        if swaps_last_two(u):
            return path + [u]
        if not (_keeps_last_two(u) or (is_pointwise(u) and all(
                o == cur or is_splat(o) for o in u.operands))):
            return None
        path.append(u)
        cur = u.results[0]


def _path_up(t: ir.Operation) -> list[ir.Operation] | None:
    """The single-reader chain above transpose `t` (leading-dim reshapes, pointwise ops
    with one operand that is not a splat) up to a matmul only `t` reads through it, top
    first; None if there is none."""
    path, cur = [], t.operands[0]
    while not isinstance(cur.owner, ir.Block) and len(list(cur.uses)) == 1:
        o = cur.owner.operation
        if o.name == "dg.matmul":
            return path[::-1] if path and _gemm_operand(cur) else None
        tensors = {v for v in o.operands if not is_splat(v)}
        if not (_keeps_last_two(o) or (is_pointwise(o) and len(tensors) == 1)):
            return None
        path.append(o)
        cur = tensors.pop() if is_pointwise(o) else o.operands[0]
    return None


def _rebuild_swapped(b: Builder, op: ir.Operation, chain: ir.Value, x: ir.Value) -> ir.Value:
    """`op` (a path op reading `chain`) recomputed on `x`, the transpose of `chain`."""
    if op.name == "dg.reshape":
        return b.reshape(x, shape=list(TensorSpec.from_mlir(_swapped(op.results[0].type)).shape))
    operands = [x if o == chain else
                recreate(o.owner.operation, [], [_swapped(o.type)]).results[0]
                for o in op.operands]
    return recreate(op, operands, [_swapped(op.results[0].type)]).results[0]


def move_transposes_to_matmuls(block: ir.Block) -> int:
    """Move transposes of the last two dims through pointwise ops (with splat operands)
    and leading-dim reshapes until a matmul or another transpose absorbs them; returns
    how many moved. Attention computes `q @ (k^T * s)`: the scaled key was written
    transposed, read column-wise, and the backward's `(dS^T q) * s` transposed back;
    moved, the pointwise op runs in the layout it reads and gemm takes the transposes
    through its flags (or `transpose_matmul_results` swaps the product)."""
    moved = 0
    # the transposes there were at the start only (a moved one would move back); what a
    # move leaves unread is erased at the end (a cancelled transpose is on the list)
    for t in [o.operation for o in block.operations if swaps_last_two(o.operation)]:
        if not list(t.results[0].uses):
            continue
        down = _path_down(t)
        if down is not None:
            x, chain = t.operands[0], t.results[0]
            for op in down:
                with ir.InsertionPoint(op):
                    b = Builder(op.location)
                    if swaps_last_two(op):
                        op.results[0].replace_all_uses_with(x)
                        break
                    x, chain = _rebuild_swapped(b, op, chain, x), op.results[0]
            else:
                with ir.InsertionPoint(down[-1]):
                    y = transposed(Builder(t.location), x)
                down[-1].results[0].replace_all_uses_with(y)
            moved += 1
            continue
        up = _path_up(t)
        if up is not None:
            with ir.InsertionPoint(t):
                b = Builder(t.location)
                chain = up[0].operands[0] if up[0].name == "dg.reshape" else \
                    next(v for v in up[0].operands if not is_splat(v))
                x = transposed(b, chain)
                for op in up:
                    chain_in = chain
                    chain = op.results[0]
                    x = _rebuild_swapped(b, op, chain_in, x)
            t.results[0].replace_all_uses_with(x)
            moved += 1
    if moved:
        erase_dead(block)
    return moved


def move_transposes_to_matmuls_pass(module: ir.Operation) -> None:
    rewrite_bodies(module, move_transposes_to_matmuls, log,
                   "dg-transposes-to-matmuls: @%s: %d transposes moved")


def _transpose_results_then_hoist(block: ir.Block) -> int:
    """A product now transposed can leave pointwise ops between it and a reshape: hoist
    that reshape too (dg-hoist-reshapes' rewrite), in the functions that changed."""
    moved = transpose_matmul_results(block)
    if moved:
        hoist_reshapes(block)
    return moved


def transpose_matmul_results_pass(module: ir.Operation) -> None:
    rewrite_bodies(module, _transpose_results_then_hoist, log,
                   "dg-transpose-matmul-results: @%s: %d matmuls")

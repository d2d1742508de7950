"""What IRDL cannot check: shape relations, dims in range, dtype agreement."""
from __future__ import annotations

from typing import Iterator

from mlir import ir

from .core import ShapeError, attrs_of, lookup
from .region_ops import FUSION_TERMINATOR
from .types import TensorSpec


class VerifyError(ValueError):
    """A dg op failed verification; `location` is the op's location."""

    def __init__(self, message: str, location: ir.Location) -> None:
        super().__init__(message)
        self.location = location


def _specs(values) -> list[TensorSpec]:
    return [TensorSpec.from_mlir(v.type) for v in values]


def verify_op(op: ir.Operation) -> None:
    """Raise VerifyError if `op` (a dg op) breaks its shape rule."""
    d = lookup(op.name)
    try:
        attrs = attrs_of(op)
        missing = [a for a in d.attrs if a not in attrs]
        if missing:
            raise ShapeError(f"missing attribute(s) {missing}")
        results = _specs(op.results)
        expected = d.shape(_specs(op.operands), attrs, results, op=d.name)
        if expected != results:
            raise ShapeError("result type(s) " + ", ".join(map(str, results)) +
                             " do not match the inferred " + ", ".join(map(str, expected)))
        if d.has_region:
            _verify_fusion_body(op)
    except (ShapeError, TypeError) as e:
        msg = str(e)
        prefix = f"'{d.full_name}' op "
        raise VerifyError(msg if msg.startswith(prefix) or msg.startswith(d.full_name)
                          else prefix + msg, op.location) from None


def _verify_fusion_body(op: ir.Operation) -> None:
    blocks = list(op.regions[0].blocks)
    if len(blocks) != 1:
        raise ShapeError(f"body must have exactly one block, has {len(blocks)}")
    block = blocks[0]
    if _specs(block.arguments) != _specs(op.operands):
        raise ShapeError("body block arguments must match the operand types")
    ops = list(block.operations)
    if not ops or ops[-1].operation.name != FUSION_TERMINATOR:
        raise ShapeError(f"body must end in {FUSION_TERMINATOR}")
    if _specs(ops[-1].operands) != _specs(op.results):
        raise ShapeError("yielded types must match the result types")
    for inner in ops[:-1]:
        if not inner.operation.name.startswith("dg."):
            raise ShapeError(f"body may contain only dg ops, found '{inner.operation.name}'")


def dg_ops(root: ir.Operation) -> Iterator[ir.Operation]:
    """Every dg op nested under `root`, in pre-order."""
    found: list[ir.Operation] = []

    def visit(op):
        if op.name.startswith("dg."):
            found.append(op)
        return ir.WalkResult.ADVANCE
    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return iter(found)


def verify(root: ir.Operation) -> None:
    """Verify every dg op under `root`; raises the first VerifyError."""
    for op in dg_ops(root):
        verify_op(op)

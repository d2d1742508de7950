"""What IRDL cannot check: shape relations, dims in range, dtype agreement.

Messages follow MLIR's verifier style, `'dg.add' op operand #1 has shape ...`,
so they read like upstream diagnostics and `--verify-diagnostics` tests can
match them. `dg-verify` is the pass form (`verify_pass`).
"""
from __future__ import annotations

import re
from typing import Iterator, Sequence

from mlir import ir

from .core import OpDef, ShapeError, attrs_of, lookup
from .region_ops import FUSION_ATTR, is_fusion
from .types import TensorSpec
from ..passes import PassError


class VerifyError(ValueError):
    """A dg op failed verification; `location` is the op's location."""

    def __init__(self, message: str, location: ir.Location) -> None:
        super().__init__(message)
        self.location = location


def _specs(values: Sequence[ir.Value], what: str) -> list[TensorSpec]:
    specs = []
    for i, v in enumerate(values):
        try:
            specs.append(TensorSpec.from_mlir(v.type))
        except TypeError as e:
            raise ShapeError(f"{what} #{i}: {e}") from None
    return specs


def _mlir_style(d: OpDef, message: str) -> str:
    """`dg.add: operand ...` / `dg.full needs ...` -> `'dg.add' op operand ...`."""
    prefix = f"'{d.full_name}' op "
    if message.startswith(prefix):
        return message
    stripped = re.sub(rf"^{re.escape(d.full_name)}:?\s+", "", message)
    return prefix + stripped


def verify_op(op: ir.Operation) -> None:
    """Raise VerifyError if `op` (a dg op) breaks its shape rule."""
    d = lookup(op.name)
    try:
        operands = _specs(op.operands, "operand")
        results = _specs(op.results, "result")
        try:
            attrs = attrs_of(op)
        except ValueError as e:  # e.g. array<i32: ...> where array<i64: ...> is required
            raise ShapeError(f"has an attribute of the wrong kind: {e}") from None
        missing = [a for a in d.attrs if a not in attrs]
        if missing:
            raise ShapeError("requires attribute(s) " + ", ".join(f"'{a}'" for a in missing))
        expected = d.shape(operands, attrs, results, op=d.name)
        if expected != results:
            raise ShapeError("result type(s) " + ", ".join(map(str, results)) +
                             " do not match the inferred " + ", ".join(map(str, expected)))
    except (ShapeError, TypeError) as e:
        raise VerifyError(_mlir_style(d, str(e)), op.location) from None


def verify_fusion(op: ir.Operation) -> None:
    """A fusion region (region_ops) holds one block of dg ops; scf verifies the rest."""
    blocks = list(op.regions[0].blocks)
    if len(blocks) != 1:
        raise VerifyError(f"'{FUSION_ATTR}' region must have exactly one block, has {len(blocks)}",
                          op.location)
    for inner in list(blocks[0].operations)[:-1]:
        if not inner.operation.name.startswith("dg."):
            raise VerifyError(f"'{FUSION_ATTR}' region may contain only dg ops, found "
                              f"'{inner.operation.name}'", inner.location)
    try:
        _specs(op.results, "result")
    except ShapeError as e:
        raise VerifyError(f"'{FUSION_ATTR}' region {e}", op.location) from None


def dg_ops(root: ir.Operation) -> Iterator[ir.Operation]:
    """Every dg op and fusion region nested under `root`, in pre-order."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("dg.") or is_fusion(op):
            found.append(op)
        return ir.WalkResult.ADVANCE
    root.walk(visit, ir.WalkOrder.PRE_ORDER)
    return iter(found)


def verify(root: ir.Operation) -> None:
    """Verify every dg op under `root`; raises the first VerifyError."""
    for op in dg_ops(root):
        if is_fusion(op):
            verify_fusion(op)
        else:
            verify_op(op)


def verify_pass(module: ir.Operation) -> None:
    try:
        verify(module)
    except VerifyError as e:
        raise PassError(str(e), e.location) from None

"""dg.fusion: a region whose body becomes one kernel.

The body's block arguments stand for the operands; it ends in the region
terminator `FUSION_TERMINATOR` yielding the results. IRDL-defined ops cannot
carry MLIR's terminator trait, so the terminator is the parent-agnostic
upstream `gpu.yield` rather than a `dg.yield`.
"""
from __future__ import annotations

from .core import Kind, ShapeError, define, lowering, shape_rule

FUSION_TERMINATOR = "gpu.yield"

define("fusion", ("*ins",), ("*outs",), kind=Kind.REGION, has_region=True,
       summary="fused kernel: block args = operands, terminator yields the results")


@shape_rule("fusion")
def _fusion_shape(ins, attrs, hint, *, op):
    if hint is None:
        raise ShapeError("dg.fusion needs its result types")
    return list(hint)


# ---------------------------------------------------------------- lowering (dg-lower-to-linalg)
@lowering("fusion")
def _lower_fusion(op, operands, *, op_name, attrs, out):
    """One reduction generic and/or one parallel generic per output shape (passes/fusion_lowering)."""
    from ..passes.fusion_lowering import lower_region
    return lower_region(op, operands)


# (end of lowering rules)


# ---------------------------------------------------------------- autodiff (vjp, jvp)

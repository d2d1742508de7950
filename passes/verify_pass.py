"""dg-verify: shape/dtype/dim checks that IRDL cannot express."""
from __future__ import annotations

from mlir import ir

from ..dialects.verify import VerifyError, verify
from .registry import PassError, register_pass


@register_pass("dg-verify", "check dg shape, dim and dtype rules")
def verify_pass(module: ir.Operation) -> None:
    try:
        verify(module)
    except VerifyError as e:
        raise PassError(str(e), e.location) from None

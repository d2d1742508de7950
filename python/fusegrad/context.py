"""The one place that creates MLIR contexts: upstream dialects plus dg."""
from __future__ import annotations

import functools

from mlir import ir
from mlir.dialects import irdl

from .dialects.irdl import dialect_irdl


@functools.lru_cache(maxsize=1)
def _dialect_text() -> str:
    return dialect_irdl()


def make_context() -> ir.Context:
    """A fresh context with every upstream dialect and the dg dialect loaded."""
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = False
    with ctx, ir.Location.unknown():
        irdl.load_dialects(ir.Module.parse(_dialect_text()))
    return ctx

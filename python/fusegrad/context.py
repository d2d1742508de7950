"""The one place that creates MLIR contexts: upstream dialects plus dg."""
from __future__ import annotations

import functools
import sys
import types

from mlir import ir
from mlir.dialects import irdl

from .dialects.irdl import dialect_irdl

# The bindings build a Python view of an op (`value.owner`, walking a block) after
# importing its dialect's module, `mlir.dialects.<namespace>`, and remember only
# imports that succeed. dg (IRDL) has no such module, so every view of a dg op
# retried a failing import through the whole import machinery: 70% of dg-fuse's
# time on a BERT training graph (3.2 s -> 0.84 s with this empty module).
sys.modules.setdefault("mlir.dialects.dg", types.ModuleType("mlir.dialects.dg"))


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

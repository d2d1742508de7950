"""dg-drop-stop-gradients: after differentiation, dg.stop_gradient is the identity.

It marks where differentiation stops (a detach, a `torch.no_grad()` block); once the
autodiff passes have run, nothing reads that mark. Left in place, one whose neighbours
fuse elsewhere would be a copy kernel of its own, so the fusion pipeline drops them first.
"""
from __future__ import annotations

from mlir import ir

from ...passes import functions


def drop_stop_gradients(module: ir.Operation) -> None:
    for fn in functions(module):
        for op in [o.operation for o in fn.regions[0].blocks[0].operations]:
            if op.name == "dg.stop_gradient":
                op.results[0].replace_all_uses_with(op.operands[0])
                op.erase()

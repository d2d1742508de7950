"""dg-drop-stop-gradients: after differentiation, the ops that only direct it are identities.

`dg.stop_gradient` marks where differentiation stops (a detach, a `torch.no_grad()`
block) and `dg.evenly_read` how a max's or median's gradient is shared (dialect.md);
once the autodiff passes have run, nothing reads those marks. Left in place, one whose
neighbours fuse elsewhere would be a copy kernel of its own, so the fusion pipeline
drops them first.
"""
from __future__ import annotations

from mlir import ir

from ...passes import functions

# op -> the operand it is, once differentiated
IDENTITY_OPERAND = {"dg.stop_gradient": 0, "dg.evenly_read": 1}


def drop_stop_gradients(module: ir.Operation) -> None:
    for fn in functions(module):
        for op in [o.operation for o in fn.regions[0].blocks[0].operations]:
            if op.name in IDENTITY_OPERAND:
                op.results[0].replace_all_uses_with(op.operands[IDENTITY_OPERAND[op.name]])
                op.erase()

"""dg-gpu-library-stubs: the functions outlined for the plan's attention steps lose their bodies.

The launch plan runs a call of a function outlined by dg-outline-attention as one
`attention` or `attention_grad` step (PyTorch's fused SDPA kernel), and never the
function. Its body, the op's decomposition, would otherwise become kernels nothing
launches (26 for one attention and its gradient), each assembled by ptxas and loaded
as a module. After bufferization the function takes its inputs and out-params as
buffers and returns nothing, so its body can be a bare `return`.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from ...passes import PassError
from ..common.outline import ATTENTION_CALL


def library_stubs(module: ir.Operation) -> None:
    for fn in module.regions[0].blocks[0].operations:
        fn = fn.operation
        if fn.name != "func.func" or ATTENTION_CALL not in fn.attributes:
            continue
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        if ftype.results:
            raise PassError("dg-gpu-library-stubs: an outlined attention still returns "
                            "values; run the pass after dg-gpu-bufferize", fn.location)
        block = fn.regions[0].blocks[0]
        for op in reversed(list(block.operations)):
            op.erase()
        with ir.InsertionPoint(block), fn.location:
            func.ReturnOp([])

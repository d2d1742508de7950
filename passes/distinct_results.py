"""dg-distinct-result-buffers: every returned buffer gets its own allocation.

`buffer-results-to-out-params` crashes (MLIR 22) when a function returns one
memref twice, which happens after CSE merges equal results or when a forward
returns a value that it also saves for the backward. This pass runs after
bufferization: each repeated return operand becomes a fresh copy.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import memref

from .registry import register_pass


def _distinct_returns(fn: ir.Operation) -> None:
    ret = fn.regions[0].blocks[0].operations[len(fn.regions[0].blocks[0].operations) - 1]
    seen: set = set()
    for i, v in enumerate(list(ret.operands)):
        if v in seen and isinstance(v.type, ir.MemRefType):
            with ir.InsertionPoint(ret), ret.location:
                copy = memref.AllocOp(v.type, [], []).result
                memref.CopyOp(v, copy)
            ret.operands[i] = copy
        seen.add(v)


@register_pass("dg-distinct-result-buffers",
               "copy memrefs returned more than once so each result has its own buffer")
def distinct_result_buffers(module: ir.Operation) -> None:
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and op.regions[0].blocks:
            _distinct_returns(op)

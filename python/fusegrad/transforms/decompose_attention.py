"""dg-decompose-attention: dg.attention and dg.attention_grad become their decomposition.

Run before dg-remat and dg-fuse, so the decomposition's softmax fuses with its
neighbours and remat sees its parts, for the ops a target's library kernels do not
take. The CPU keeps every op and calls PyTorch's flash kernels
(codegen/cpu/library/attention_to_torch.py). CUDA (`keep-library=1`) keeps the ops that
PyTorch's fused SDPA kernels run (f16/bf16/f32, `attention.KERNEL_DTYPES`, at any
sizes: `outline.outline_ops` passes destinations for results of run-time size) and
decomposes the rest: f64, which eager runs in the math form too.
"""
from __future__ import annotations

from mlir import ir

from ..dialects.attention import KERNEL_DTYPES, OPS, decomposition
from ..dialects.builder import Builder
from ..dialects.core import attrs_of


def _library(op: ir.Operation) -> bool:
    """Does the CUDA launch plan run `op` as a library step?"""
    return str(op.operands[1].type.element_type) in KERNEL_DTYPES["cuda"]


def decompose_attention(module: ir.Operation, keep_library: bool = False) -> None:
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in OPS and not (keep_library and _library(op)):
            ops.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    for op in ops:
        with ir.InsertionPoint(op), op.location:
            values = decomposition(op.name[3:], attrs_of(op))(Builder(op.location), *op.operands)
        for old, new in zip(op.results, values):
            old.replace_all_uses_with(new)
        op.erase()

"""dg-decompose-attention: dg.attention and dg.attention_grad become their decomposition.

A target without a fused attention kernel (CUDA) runs this before dg-remat and dg-fuse,
so the decomposition's softmax fuses with its neighbours and remat sees its parts. The
CPU keeps the ops and calls PyTorch's flash kernels (codegen/cpu/library/attention_to_torch.py).
"""
from __future__ import annotations

from mlir import ir

from ..dialects.attention import decomposition
from ..dialects.builder import Builder
from ..dialects.core import attrs_of

OPS = ("dg.attention", "dg.attention_grad")


def decompose_attention(module: ir.Operation) -> None:
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in OPS:
            ops.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    for op in ops:
        with ir.InsertionPoint(op), op.location:
            values = decomposition(op.name[3:], attrs_of(op))(Builder(op.location), *op.operands)
        for old, new in zip(op.results, values):
            old.replace_all_uses_with(new)
        op.erase()

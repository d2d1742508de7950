"""dg-strided-copy-to-linalg: turn memref.copy between non-identity layouts into linalg.copy.

Finalize-memref-to-llvm lowers copies of contiguous memrefs to `llvm.memcpy`
but strided ones (subviews from tensor.insert_slice/extract_slice, pad,
concatenate, conv padding) to a call to `memrefCopy` from MLIR's
c_runner_utils library, which the installed bindings do not ship. As a
`linalg.copy` they become plain loops with convert-linalg-to-loops.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import linalg


def _identity(t: ir.Type) -> bool:
    m = ir.MemRefType(t)
    return m.affine_map == ir.AffineMap.get_identity(m.rank)


def _rewrite(op: ir.Operation) -> None:
    for region in op.regions:
        for block in region.blocks:
            for inner in list(block.operations):
                inner = inner.operation
                if inner.name == "memref.copy":
                    src, dst = inner.operands
                    if not (_identity(src.type) and _identity(dst.type)):
                        with ir.InsertionPoint(inner), inner.location:
                            linalg.copy(src, outs=[dst])
                        inner.erase()
                else:
                    _rewrite(inner)


def strided_copy_to_linalg(module: ir.Operation) -> None:
    _rewrite(module)

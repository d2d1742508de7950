"""dg-half-loads-as-i16: loads and stores of 16-bit floats (bf16, f16, and vectors of
them) move i16 bits, bitcast to the float type in registers.

LLVM's SLP vectorizer merges a short strided run of scalar bf16 loads (a 9 x 9
transpose) into one masked load of an odd-length vector (`<75 x bfloat>`), which
the X86 backend with AVX512-BF16 cannot legalize: it asserts and aborts the
process. The same run of i16 loads legalizes. Bitcasts between i16 and a 16-bit
float cost nothing, and every computation on these types already runs in f32.
"""
from __future__ import annotations

from mlir import ir

from .registry import register_pass


def _as_bits(t: ir.Type) -> ir.Type | None:
    """The i16 counterpart of a bf16/f16 scalar or vector type, else None."""
    i16 = ir.IntegerType.get_signless(16)
    if isinstance(t, (ir.BF16Type, ir.F16Type)):
        return i16
    if isinstance(t, ir.VectorType) and isinstance(t.element_type, (ir.BF16Type, ir.F16Type)):
        return ir.VectorType.get(t.shape, i16)
    return None


@register_pass("dg-half-loads-as-i16",
               "llvm.load/llvm.store of bf16/f16 (scalars and vectors) move i16 bits, "
               "bitcast in registers (x86 cannot legalize masked loads of odd bf16 vectors)")
def half_loads_as_i16(module: ir.Operation) -> None:
    loads, stores = [], []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.load" and _as_bits(op.results[0].type) is not None:
            loads.append(op)
        elif op.name == "llvm.store" and _as_bits(op.operands[0].type) is not None:
            stores.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op in loads:
        value = op.results[0]
        with ir.InsertionPoint(op), op.location:
            bits = ir.Operation.create("llvm.load", results=[_as_bits(value.type)],
                                       operands=list(op.operands),
                                       attributes={a: op.attributes[a] for a in op.attributes})
            cast = ir.Operation.create("llvm.bitcast", results=[value.type],
                                       operands=[bits.results[0]])
        value.replace_all_uses_with(cast.results[0])
        op.erase()
    for op in stores:
        value = op.operands[0]
        with ir.InsertionPoint(op), op.location:
            cast = ir.Operation.create("llvm.bitcast", results=[_as_bits(value.type)],
                                       operands=[value])
        op.operands[0] = cast.results[0]

"""dg-widen-bool-memrefs: store booleans as bytes (i1 memrefs -> i8 memrefs).

MLIR 22's memref-to-LLVM lowering asserts (aborting the process) on loads and
stores of sub-byte element types, and torch.bool is one byte per element
anyway. This pass runs on loops over memrefs (after convert-linalg-to-loops):
every memref value with i1 elements gets i8 elements, loads truncate to i1
and stores zero-extend, i1 globals get i8 initial values, function types
follow. Values stay 0/1, so the memory layout is exactly torch.bool's.
"""
from __future__ import annotations

import numpy as np
from mlir import ir
from mlir.dialects import arith


def _is_bool_memref(t: ir.Type) -> bool:
    return isinstance(t, ir.MemRefType) and t.element_type == ir.IntegerType.get_signless(1)


def _widen(t: ir.Type) -> ir.Type:
    if not _is_bool_memref(t):
        return t
    m = ir.MemRefType(t)
    return ir.MemRefType.get(m.shape, ir.IntegerType.get_signless(8), m.layout, m.memory_space)


def _widen_global(op: ir.Operation) -> None:
    t = ir.TypeAttr(op.attributes["type"]).value
    if not _is_bool_memref(t):
        return
    wide = ir.MemRefType(_widen(t))
    op.attributes["type"] = ir.TypeAttr.get(wide)
    if "initial_value" in op.attributes:
        init = op.attributes["initial_value"]
        if isinstance(init, ir.DenseElementsAttr):
            ttype = ir.RankedTensorType.get(wide.shape, wide.element_type)
            values = np.array(ir.DenseElementsAttr(init)).astype(np.int8).reshape(wide.shape)
            op.attributes["initial_value"] = ir.DenseElementsAttr.get(
                np.ascontiguousarray(values), type=ttype)


def _widen_func_type(op: ir.Operation) -> None:
    ft = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
    new = ir.FunctionType.get([_widen(t) for t in ft.inputs], [_widen(t) for t in ft.results])
    op.attributes["function_type"] = ir.TypeAttr.get(new)


def _visit(op: ir.Operation) -> None:
    name = op.name
    if name == "memref.global":
        _widen_global(op)
        return
    if name == "func.func":
        _widen_func_type(op)
    for region in op.regions:
        for block in region.blocks:
            for arg in block.arguments:
                if _is_bool_memref(arg.type):
                    arg.set_type(_widen(arg.type))
            for inner in list(block.operations):
                _visit(inner.operation)
    for r in op.results:
        if _is_bool_memref(r.type):
            r.set_type(_widen(r.type))
    i1, i8 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(8)
    if name == "memref.load" and ir.MemRefType(op.operands[0].type).element_type == i8 \
            and op.results[0].type == i1:
        res = op.results[0]
        res.set_type(i8)
        with ir.InsertionPoint.after(op), op.location:
            narrow = arith.TruncIOp(i1, res)
        res.replace_all_uses_except(narrow.result, narrow.operation)
    elif name == "memref.store" and ir.MemRefType(op.operands[1].type).element_type == i8 \
            and op.operands[0].type == i1:
        with ir.InsertionPoint(op), op.location:
            op.operands[0] = arith.ExtUIOp(i8, op.operands[0]).result


def widen_bool_memrefs(module: ir.Operation) -> None:
    _visit(module)

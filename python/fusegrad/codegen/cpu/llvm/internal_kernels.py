"""dg-internal-kernels: private LLVM function definitions (outlined kernels, their
thread and parallel launchers, helpers) get internal linkage, and so does each
entry `@f` that has a C interface `@_mlir_ciface_f`, the only symbol the runtime
calls.

func.func's `private` visibility survives convert-func-to-llvm only as an
attribute; the functions stay external. The MLIR ExecutionEngine then builds a
packed `_mlir_<name>` wrapper for every external definition, into which LLVM
inlines the kernel: each kernel was optimized and compiled twice, and LLVM
could not drop copies no one calls. With internal linkage there are no such
wrappers: LLVM optimization plus code generation of a BERT training graph
(2 layers, hidden 256) went from 16.3 to 10.5 s, and its step got no slower.

An entry's own wrapper `_mlir_f` was worse: it unpacks every exploded memref
descriptor of the entry (about a thousand values for a training graph's backward)
from an array and passes them on, one basic block of loads and stack stores on
which instruction selection's store merging is quadratic. Internal entries take
BERT's LLVM code generation from 5.8 to 2.0 s.
"""
from __future__ import annotations

from mlir import ir


def internal_kernels(module: ir.Operation) -> None:
    internal = ir.Attribute.parse("#llvm.linkage<internal>")
    definitions = [op.operation for op in module.regions[0].blocks[0].operations
                   if op.operation.name == "llvm.func" and op.operation.regions[0].blocks]
    names = {ir.StringAttr(op.attributes["sym_name"]).value for op in definitions}
    for op in definitions:
        private = "sym_visibility" in op.attributes and \
            ir.StringAttr(op.attributes["sym_visibility"]).value == "private"
        wrapped = "_mlir_ciface_" + ir.StringAttr(op.attributes["sym_name"]).value in names
        if private or wrapped:
            op.attributes["linkage"] = internal

"""dg-packed-entries: the packed wrapper of each C-interface entry, in the LLVM dialect.

The runtime calls an entry `_mlir_ciface_f` through `_mlir__mlir_ciface_f(void **args)`:
`args[i]` points at argument i's value (for a memref, the pointer to its descriptor), and
a result, if any, is stored where `args[n]` points. One pointer crosses ctypes whatever
the entry's arity (a training graph's backward takes hundreds of memrefs). The MLIR
ExecutionEngine adds these wrappers itself; code compiled by LLVM's command-line tools
(`codegen/cpu/llvm/native_code.py`) needs them in the module, with the same names and ABI, so a
library built either way loads the same (`runtime.cpu_library`).
"""
from __future__ import annotations

from mlir import ir


PREFIX = "_mlir_ciface_"


def _function_type(op: ir.Operation) -> tuple[list[ir.Type], ir.Type | None]:
    """(argument types, result type or None) of a defined llvm.func."""
    block = op.regions[0].blocks[0]
    ret = next(o.operation for b in op.regions[0].blocks for o in b.operations
               if o.operation.name == "llvm.return")
    return [a.type for a in block.arguments], (ret.operands[0].type if len(ret.operands) else None)


def _wrap(op: ir.Operation) -> str:
    name = ir.StringAttr(op.attributes["sym_name"]).value
    args, result = _function_type(op)
    signature = f"({', '.join(str(t) for t in args)})" + (f" -> {result}" if result else "")
    lines = [f"llvm.func @{name}{signature}",  # a declaration, for parsing on its own
             f"llvm.func @_mlir_{name}(%packed: !llvm.ptr) {{"]
    values = []
    for i, t in enumerate(args):
        lines += [f"  %s{i} = llvm.getelementptr %packed[{i}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr",
                  f"  %p{i} = llvm.load %s{i} : !llvm.ptr -> !llvm.ptr",
                  f"  %a{i} = llvm.load %p{i} : !llvm.ptr -> {t}"]
        values.append(f"%a{i}")
    call = f"llvm.call @{name}({', '.join(values)}) : ({', '.join(str(t) for t in args)})"
    if result is None:
        lines.append(f"  {call} -> ()")
    else:
        n = len(args)
        lines += [f"  %r = {call} -> {result}",
                  f"  %sr = llvm.getelementptr %packed[{n}] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr",
                  "  %pr = llvm.load %sr : !llvm.ptr -> !llvm.ptr",
                  f"  llvm.store %r, %pr : {result}, !llvm.ptr"]
    lines += ["  llvm.return", "}"]
    return "\n".join(lines)


def add_packed_entries(module: ir.Operation) -> list[ir.Operation]:
    """Add the packed wrapper of each defined `_mlir_ciface_f` that has none; returns them."""
    body = module.regions[0].blocks[0]
    names = set()
    entries = []
    for op in body.operations:
        op = op.operation
        if op.name != "llvm.func":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        names.add(name)
        if name.startswith(PREFIX) and op.regions[0].blocks:
            entries.append(op)
    wrappers = [_wrap(op) for op in entries
                if "_mlir_" + ir.StringAttr(op.attributes["sym_name"]).value not in names]
    if not wrappers:
        return []
    parsed = ir.Module.parse("\n".join(wrappers), module.context)
    added = []
    for op in list(parsed.body.operations):
        if op.operation.regions[0].blocks:  # the wrapper, not the entry's declaration
            body.append(op.operation)
            added.append(op.operation)
    return added


def packed_entries(module: ir.Operation) -> None:
    add_packed_entries(module)

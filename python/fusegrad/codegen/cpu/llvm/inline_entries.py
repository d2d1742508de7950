"""dg-inline-entries: each entry `@f` becomes the body of its C interface `@_mlir_ciface_f`.

convert-func-to-llvm makes the C interface a wrapper that loads every memref
descriptor and calls `@f` with all their fields: a training graph's backward takes
hundreds of memrefs, so that is one call of thousands of arguments (GPT-2 124M's
backward: 422 memrefs, about 2,000 values). LLVM's instruction selection is quadratic
in the stack stores of such a call: 2.0 s of `llc` for that one wrapper, more than
all the backward's kernels together. LLVM's inliner removes the call only where
`llvm-split` (`native_code`) leaves the internal entry in its wrapper's part, after
`opt` has propagated the call's thousands of values. Moved here, the wrapper's loads
feed the entry's uses directly (GPT-2 124M's backward: 0.1 s less of LLVM's code
generation on two cores); the runtime still calls the wrapper (through its packed
`_mlir__mlir_ciface_f`).
"""
from __future__ import annotations

from mlir import ir

from .packed_entries import PREFIX


def _callee(op: ir.Operation) -> str | None:
    if op.name != "llvm.call" or "callee" not in op.attributes:
        return None
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value


def _inline(call: ir.Operation, callee: ir.Operation) -> None:
    """Replace `call`, in the single-block body of its caller, by the blocks of `callee`."""
    caller_block = call.block
    region = caller_block.region
    after = caller_block.create_after(*[r.type for r in call.results])
    moving = []
    seen = False
    for op in caller_block.operations:
        if seen:
            moving.append(op.operation)
        seen = seen or op.operation == call
    for op in moving:
        after.append(op)
    for result, value in zip(call.results, after.arguments):
        result.replace_all_uses_with(value)
    blocks = list(callee.regions[0].blocks)
    first = blocks[0]
    for argument, operand in zip(first.arguments, call.operands):
        argument.replace_all_uses_with(operand)
    for i in reversed(range(len(first.arguments))):
        first.erase_argument(i)
    for block in blocks:
        block.append_to(region)
    # append_to put them after `after`; block order matters only for the entry block
    with ir.InsertionPoint(call), call.location:
        ir.Operation.create("llvm.br", successors=[first])
    call.erase()
    for block in blocks:
        terminator = list(block.operations)[-1].operation
        if terminator.name == "llvm.return":
            with ir.InsertionPoint(terminator), terminator.location:
                ir.Operation.create("llvm.br", operands=list(terminator.operands),
                                    successors=[after])
            terminator.erase()


def inline_entries(module: ir.Operation) -> None:
    body = module.regions[0].blocks[0]
    functions = {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
                 for op in body.operations if op.operation.name == "llvm.func"}
    for name, interface in functions.items():
        entry_name = name[len(PREFIX):]
        entry = functions.get(entry_name) if name.startswith(PREFIX) else None
        if entry is None or not entry.regions[0].blocks or \
                len(interface.regions[0].blocks) != 1:
            continue
        calls = [op.operation for op in interface.regions[0].blocks[0].operations
                 if _callee(op.operation) == entry_name]
        if len(calls) == 1:  # (a wrapper calling its entry twice is left as it is)
            _inline(calls[0], entry)
            entry.erase()

"""dg-prune-kernel-params: kernels lose the parameters they never read.

convert-func-to-llvm passes each memref as its exploded descriptor (allocated and
aligned pointers, offset, sizes and strides: 3 + 2 * rank values) and rebuilds the
descriptor inside the callee. A kernel over static shapes reads only the aligned
pointers: its offsets and strides are constants of its memref types. Once
`canonicalize` has folded the rebuilt descriptors away, the other parameters have no
use; each is removed from the kernel, from its `__parallel` launcher's declaration
and from every call. Before this, a launcher (dg-gomp-launchers) stored every
parameter into the struct it hands the threads and every thread loaded them all
back: HF GPT-2's training graph had kernels of 326 parameters, and launchers made
3.7 MB of its 5.1 MB of LLVM IR.

Runs on the LLVM dialect, before dg-gomp-launchers. Only private definitions that
nothing but direct calls refers to are changed.
"""
from __future__ import annotations

from collections import defaultdict

from mlir import ir

from ..kernels import PARALLEL_SUFFIX


def _name(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _references(module: ir.Operation) -> tuple[dict[str, list[ir.Operation]], set[str]]:
    """Direct calls by callee, and the symbols referred to otherwise (addressof)."""
    calls: dict[str, list[ir.Operation]] = defaultdict(list)
    taken: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.call" and "callee" in op.attributes:
            calls[ir.FlatSymbolRefAttr(op.attributes["callee"]).value].append(op)
        elif op.name == "llvm.mlir.addressof":
            taken.add(ir.FlatSymbolRefAttr(op.attributes["global_name"]).value)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return calls, taken


def _plain_void(fn: ir.Operation) -> bool:
    """Returns nothing and takes no varargs: its calls have no results to keep and its
    parameters are its block arguments."""
    text = str(ir.TypeAttr(fn.attributes["function_type"]).value)
    return text.startswith("!llvm.func<void (") and "..." not in text


def _set_params(fn: ir.Operation, types: list[str], dropped: list[int]) -> None:
    """Give `fn` (returning nothing) the parameter `types`, the ones at `dropped` gone
    from its argument attributes too."""
    fn.attributes["function_type"] = ir.TypeAttr.get(
        ir.Type.parse(f"!llvm.func<void ({', '.join(types)})>"))
    if "arg_attrs" in fn.attributes:
        attrs = ir.ArrayAttr(fn.attributes["arg_attrs"])
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [attrs[i] for i in range(len(attrs)) if i not in dropped])


def _drop_operands(call: ir.Operation, dropped: set[int]) -> ir.Operation:
    """Replace `call` by the same call without operands `dropped`; returns the new call."""
    operands = [v for i, v in enumerate(call.operands) if i not in dropped]
    attributes = {name: call.attributes[name] for name in call.attributes}
    attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([len(operands), 0])
    with ir.InsertionPoint(call):
        new = ir.Operation.create("llvm.call", operands=operands, attributes=attributes,
                                  loc=call.location)
    call.erase()
    return new


def _prune(name: str, functions: dict[str, ir.Operation],
           calls: dict[str, list[ir.Operation]], taken: set[str]) -> bool:
    """Remove the unread parameters of `name` if it may be changed; True if any were."""
    fn = functions[name]
    private = "sym_visibility" in fn.attributes and \
        ir.StringAttr(fn.attributes["sym_visibility"]).value == "private"
    if not private or not fn.regions[0].blocks or name in taken or not _plain_void(fn):
        return False
    launcher_name = name + PARALLEL_SUFFIX
    launcher = functions.get(launcher_name)
    if launcher is not None and (launcher.regions[0].blocks or launcher_name in taken):
        return False
    block = fn.regions[0].blocks[0]
    first = 2 if launcher is not None else 0  # (lo, hi) come from the threads
    dropped = [i for i, a in enumerate(block.arguments)
               if i >= first and not any(True for _ in a.uses)]
    if not dropped:
        return False
    for i in reversed(dropped):
        block.erase_argument(i)
    types = [str(a.type) for a in block.arguments]
    _set_params(fn, types, dropped)
    calls[name] = [_drop_operands(c, set(dropped)) for c in calls.get(name, [])]
    if launcher is not None:  # its parameters: (rows, the kernel's after lo, hi)
        shifted = [i - 1 for i in dropped]
        _set_params(launcher, ["i64"] + types[2:], shifted)
        calls[launcher_name] = [_drop_operands(c, set(shifted))
                                for c in calls.get(launcher_name, [])]
    return True


def prune_kernel_params(module: ir.Operation) -> None:
    functions = {_name(op.operation): op.operation
                 for op in module.regions[0].blocks[0].operations
                 if op.operation.name == "llvm.func"}
    calls, taken = _references(module)
    pending = set(functions)
    while pending:  # a caller's parameter may have fed only the parameters pruned from its callee
        changed = {n for n in pending if _prune(n, functions, calls, taken)}
        pending = _callers(changed, calls)


def _callers(names: set[str], calls: dict[str, list[ir.Operation]]) -> set[str]:
    """The functions holding a call of `names`."""
    out = set()
    for n in names:
        for call in calls.get(n, []) + calls.get(n + PARALLEL_SUFFIX, []):
            parent = call.parent
            while parent.name != "llvm.func":
                parent = parent.parent
            out.add(_name(parent))
    return out

"""dg-outline-entry-loops: the loops left in an entry function after dg-cpu-kernels
(partial results combined after a row kernel, small reductions run inline, linalg
ops lowered to loops in place) move into private `noinline` functions of their own.

An entry is a long straight-line sequence of kernel calls over many memref
descriptors. A few dozen small loops inside it made LLVM's loop passes (the
vectorizer, strength reduction) work on that whole function again and again:
BERT's training backward cost 0.6 s of optimization and 0.6 s of code generation
alone. Outlined, each loop is optimized in a function the size of the loop, and
the entry has no loop left; a call per loop costs nothing next to it.
"""
from __future__ import annotations

import collections

from mlir import ir
from mlir.dialects import func

from .kernels import mark_kernel
from ..common.memrefs import dynamic_offset, passed_as
from ...dialects.core import is_public
from ...passes import functions


_LOOPS = ("scf.for", "scf.parallel", "scf.while")


def _operands_from_above(op: ir.Operation) -> list:
    """The values used in `op` (or ops nested in it) that are defined outside it, in order
    of first use (breadth first)."""
    inside: set = set(op.results)
    used: dict = {}
    todo = collections.deque([op])
    while todo:
        o = todo.popleft()
        used.update(dict.fromkeys(o.operands))
        for region in o.regions:
            for block in region.blocks:
                inside.update(block.arguments)
                for nested in block.operations:
                    inside.update(nested.operation.results)
                    todo.append(nested.operation)
    return [v for v in used if v not in inside]


def _only_loaded_or_stored(loop: ir.Operation, values: list) -> set:
    """Those of `values` that `loop` (and what it nests) only loads from and stores to."""
    others: set = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name not in ("memref.load", "memref.store"):
            others.update(op.operands)
        elif op.name == "memref.store":
            others.add(op.operands[0])  # the stored value
        return ir.WalkResult.ADVANCE
    loop.walk(visit)
    return {v for v in values if isinstance(v.type, ir.MemRefType) and v not in others}


def _outline(fn: ir.Operation, loop: ir.Operation, name: str) -> None:
    """Move `loop` into a new private function `name`, called where the loop was."""
    outer = _operands_from_above(loop)
    constants = [v for v in outer if not isinstance(v.owner, ir.Block)
                 and v.owner.operation.name == "arith.constant"]
    args = [v for v in outer if v not in constants]
    results = [r.type for r in loop.results]  # a loop carrying a reduction returns it
    # slices only loaded and stored are taken at any offset (dynamic_offset): the same
    # loop over other slices is then the same function
    loaded = _only_loaded_or_stored(loop, args)
    params = [dynamic_offset(v.type) if v in loaded else v.type for v in args]
    with ir.InsertionPoint(fn), loop.location:
        callee = func.FuncOp(name, ir.FunctionType.get(params, results), visibility="private")
    # as a kernel: LLVM vectorizes it without runtime alias checks (and their second
    # copy of every loop)
    mark_kernel(callee.operation, args, 0)
    with loop.location:
        block = callee.add_entry_block()
    with ir.InsertionPoint(loop), loop.location:
        call = func.CallOp(results, ir.FlatSymbolRefAttr.get(name), passed_as(args, params))
    for old, new in zip(loop.results, call.results):
        old.replace_all_uses_with(new)
    with ir.InsertionPoint(block), loop.location:
        replacements = [(v, v.owner.operation.clone().results[0]) for v in constants]
        ret = func.ReturnOp(list(loop.results))
    loop.move_before(ret)
    replacements += list(zip(args, block.arguments))
    # rewrite the loop's operands, not each value's uses: a buffer has uses all over the
    # entry (MobileViT: 10^5 use checks for 139 loops)
    inner = dict(replacements)

    def rewrite(op: ir.Operation) -> ir.WalkResult:
        for i, x in enumerate(op.operands):
            new = inner.get(x)
            if new is not None:
                op.operands[i] = new
        return ir.WalkResult.ADVANCE
    loop.walk(rewrite)


def outline_entry_loops(module: ir.Operation) -> None:
    names = {ir.StringAttr(op.operation.attributes["sym_name"]).value
             for op in module.regions[0].blocks[0].operations
             if "sym_name" in op.operation.attributes}
    for fn in list(functions(module)):
        if not is_public(fn):
            continue
        base = ir.StringAttr(fn.attributes["sym_name"]).value
        count = 0
        for op in list(fn.regions[0].blocks[0].operations):
            if op.operation.name not in _LOOPS:
                continue
            while f"{base}_loop{count}" in names:
                count += 1
            name = f"{base}_loop{count}"
            names.add(name)
            _outline(fn, op.operation, name)

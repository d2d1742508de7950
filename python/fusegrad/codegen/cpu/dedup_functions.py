"""dg-dedup-functions: private functions with identical bodies become one.

dg-cpu-kernels and dg-outline-entry-loops outline one function per kernel and
per loop, and the layers of a model repeat: the forward kernels of every
transformer layer, the partial-result combines after every bias gradient. LLVM
does not merge equal functions at O2, so each copy was optimized and compiled
again (BERT, 2 layers: 47 of 285 functions were copies). Functions are equal
when their printed forms, without names and locations, are; calls of a copy
call the first function of its kind instead, and a kernel's `__parallel`
launcher declaration follows its kernel.
"""
from __future__ import annotations

from mlir import ir

from .kernels import PARALLEL_SUFFIX
from ...dialects.core import is_public


def _body_key(fn: ir.Operation, name: str) -> str:
    text = fn.get_asm(enable_debug_info=False, assume_verified=True, use_local_scope=True)
    return text.replace(f"@{name}(", "@_(", 1)


def dedup_functions(module: ir.Operation) -> None:
    body = module.regions[0].blocks[0]
    symbols = {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
               for op in body.operations if "sym_name" in op.operation.attributes}
    # only functions that share a signature can be equal: print just those
    by_type: dict[str, list[str]] = {}
    for name, fn in symbols.items():
        if fn.name == "func.func" and fn.regions[0].blocks and not is_public(fn):
            by_type.setdefault(str(fn.attributes["function_type"]), []).append(name)
    first: dict[str, str] = {}
    renamed: dict[str, str] = {}
    for names in by_type.values():
        for name in names if len(names) > 1 else ():
            key = _body_key(symbols[name], name)
            if key in first:
                renamed[name] = first[key]
            else:
                first[key] = name
    if not renamed:
        return
    # kernels, launchers and outlined loops are called from the top level of the
    # functions that use them (dg-cpu-kernels, dg-outline-entry-loops): each call is
    # renamed where it is, not the whole module once per copy (a 6-layer GPT-2: 1.0 ->
    # 0.1 s), nor each caller once per copy (a GRU over 64 steps: 4.5 s, its entry
    # calling a thousand copies)
    moved: dict[str, str] = {}  # launchers that now serve their kept kernel
    for copy, kept in list(renamed.items()):
        launcher = copy + PARALLEL_SUFFIX
        if launcher in symbols:
            if kept + PARALLEL_SUFFIX in symbols:
                renamed[launcher] = kept + PARALLEL_SUFFIX
            else:  # the kept kernel runs on one thread here: its launcher is the copy's
                ir.SymbolTable.set_symbol_name(symbols[launcher], kept + PARALLEL_SUFFIX)
                symbols[kept + PARALLEL_SUFFIX] = symbols.pop(launcher)
                moved[launcher] = kept + PARALLEL_SUFFIX
    uses = {**renamed, **moved}
    for fn in symbols.values():
        if fn.name != "func.func" or not fn.regions[0].blocks:
            continue
        for op in _calls(fn.regions[0].blocks[0]):
            callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
            if callee in uses:
                op.attributes["callee"] = ir.FlatSymbolRefAttr.get(uses[callee])
    for copy in renamed:
        symbols[copy].erase()


def _calls(block: ir.Block):
    """The calls at the top level of `block`, and in the branches of its `scf.if`s (a
    kernel of run-time sizes chooses between its launcher and itself there)."""
    for op in block.operations:
        op = op.operation
        if op.name == "func.call":
            yield op
        elif op.name == "scf.if":
            for region in op.regions:
                for inner in region.blocks:
                    yield from _calls(inner)

"""Splitting a lowered (LLVM dialect) module into parts that compile to object files
in parallel and link into one shared library.

LLVM optimizes and generates code for one module on one thread, and most of a
large graph's compile is that (BERT's training graph: 4 of 7 s). The kernels are
independent functions, so `plan_parts` deals them out to parts of about equal
size; `keep_part` then makes a module hold one part: the other parts'
definitions become declarations, and its own definitions that other parts call
become external, hidden symbols. Part 0 holds the entries (`@_mlir_ciface_f`
and `@f`) and the mutable globals; a function that two parts both need and
neither exports (a shared helper) is kept, internal, in both.

Run as a script (`python llvm_split.py MODULE PART OBJECT`), this file compiles
one part of a module in a process of its own: it imports MLIR and nothing of
fusegrad or torch, so it starts in a fraction of a second.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field

from mlir import ir

# a top-level op of a printed module: two spaces of indent, then the op name
_TOP = re.compile(r"^  (llvm\.func|llvm\.mlir\.global)\b(.*)$", re.M)
_SYMBOL = re.compile(r"@([A-Za-z_][\w$.]*)")
_CIFACE = "_mlir_ciface_"


@dataclass
class Part:
    """What one part defines: `keep`, and of those, `export` (called from other parts)."""

    keep: set[str] = field(default_factory=set)
    export: set[str] = field(default_factory=set)
    size: int = 0

    def to_json(self) -> dict:
        return {"keep": sorted(self.keep), "export": sorted(self.export)}

    @staticmethod
    def from_json(data: dict) -> "Part":
        return Part(set(data["keep"]), set(data["export"]))


@dataclass
class _Symbol:
    name: str
    op: str
    definition: bool
    external: bool   # external linkage
    constant: bool   # an internal constant global: copied into every part that reads it
    size: int
    refs: set[str]


def _symbols(text: str) -> dict[str, _Symbol] | None:
    """The top-level functions and globals of a printed LLVM-dialect module (None when
    the text is not in the form this reads)."""
    text = text[:text.rfind("\n}")]  # the module's closing brace
    starts = [(m.start(), m.group(1), m.group(2)) for m in _TOP.finditer(text)]
    symbols: dict[str, _Symbol] = {}
    for k, (start, op, head) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(text)
        span = text[start:end]
        found = _SYMBOL.search(head)
        if found is None:
            return None
        name = found.group(1)
        words = head[:found.start()].split()
        multiline = span.rstrip().count("\n") > 0
        if op == "llvm.func":
            definition = multiline
        else:  # a global declaration has neither a value nor an initializer region
            definition = multiline or not head[found.end():].startswith("()")
        external = not ({"internal", "private", "linkonce", "linkonce_odr"} & set(words))
        constant = op == "llvm.mlir.global" and "constant" in words and not external
        refs = set(_SYMBOL.findall(span)) - {name}
        symbols[name] = _Symbol(name, op, definition, external, constant, len(span), refs)
    return symbols


def plan_parts(text: str, parts: int) -> list[Part] | None:
    """Deal the definitions of the printed module `text` out to at most `parts` parts of
    about equal text size. None when the module does not split (one part, or a form this
    does not read)."""
    symbols = _symbols(text)
    if symbols is None or parts < 2:
        return None
    functions = {n: s for n, s in symbols.items() if s.op == "llvm.func" and s.definition}
    entries = {n for n, s in functions.items() if s.external}
    entries |= {n[len(_CIFACE):] for n in entries if n.startswith(_CIFACE)} & set(functions)
    part0 = Part(keep=set(entries))
    part0.keep |= {n for n, s in symbols.items()
                   if s.op == "llvm.mlir.global" and s.definition and not s.constant}

    def closure(root: str) -> set[str]:
        seen, todo = {root}, [root]
        while todo:
            for r in symbols[todo.pop()].refs:
                if r in functions and r not in seen and r not in entries:
                    seen.add(r)
                    todo.append(r)
        return seen

    roots = sorted({r for e in entries for r in symbols[e].refs
                    if r in functions and r not in entries})
    units = sorted(((closure(r), r) for r in roots),
                   key=lambda u: -sum(functions[n].size for n in u[0]))
    plan = [part0] + [Part() for _ in range(parts - 1)]
    part0.size = sum(functions[n].size for n in entries)
    for members, root in units:  # largest first, into the smallest part
        part = min(plan, key=lambda p: p.size)
        part.keep |= members
        part.size += sum(functions[n].size for n in members)
        if part is not part0:
            part.export.add(root)
    plan = [p for p in plan if p.keep]
    if len(plan) < 2:
        return None
    for p in plan:  # constant globals travel with the functions that read them
        p.keep |= {r for n in list(p.keep) for r in symbols[n].refs
                   if r in symbols and symbols[r].constant}
    return plan


def keep_part(module: ir.Module, part: Part) -> None:
    """Make `module` (LLVM dialect) define only `part`: other function and mutable
    global definitions become external declarations; exported definitions become
    external, hidden symbols."""
    external = ir.Attribute.parse("#llvm.linkage<external>")
    hidden = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 1)
    for op in list(module.body.operations):
        op = op.operation
        if op.name not in ("llvm.func", "llvm.mlir.global"):
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if name in part.export:
            op.attributes["linkage"] = external
            op.attributes["visibility_"] = hidden
            if "sym_visibility" in op.attributes:
                del op.attributes["sym_visibility"]
            continue
        if name in part.keep or (op.name == "llvm.func" and not op.regions[0].blocks):
            continue
        if op.name == "llvm.mlir.global" and "constant" in op.attributes:
            continue  # an internal constant no kept function reads: LLVM drops it
        _declare(op, external)


def _declare(op: ir.Operation, external: ir.Attribute) -> None:
    """Replace the definition `op` by an external declaration of the same symbol."""
    drop = {"linkage", "sym_visibility", "visibility_", "value", "arg_attrs", "passthrough",
            "dso_local"}
    attrs = {a.name: a.attr for a in (op.attributes[i] for i in range(len(op.attributes)))
             if a.name not in drop}
    attrs["linkage"] = external
    with ir.InsertionPoint(op), op.location:
        ir.Operation.create(op.name, attributes=attrs, regions=1)
    op.erase()


def compile_part(module: ir.Module, part: Part, object_file: str, opt_level: int = 2) -> None:
    """Compile the part `part` of `module` (modified in place) to the position-independent
    object file `object_file`. The code is never run here: every symbol the part only
    declares is bound to a placeholder address so that the JIT links."""
    import ctypes
    from mlir.execution_engine import ExecutionEngine

    keep_part(module, part)
    declared, defined = [], []
    for op in module.body.operations:
        op = op.operation
        if op.name == "llvm.func" or op.name == "llvm.mlir.global":
            name = ir.StringAttr(op.attributes["sym_name"]).value
            is_decl = not op.regions[0].blocks if op.name == "llvm.func" else \
                ("value" not in op.attributes and not op.regions[0].blocks)
            (declared if is_decl else defined).append((name, op))
    engine = ExecutionEngine(module, opt_level=opt_level, enable_object_dump=True,
                             enable_pic=True)
    placeholder = ctypes.cast(ctypes.CDLL(None).abort, ctypes.c_void_p)
    for name, _ in declared:
        engine.raw_register_runtime(name, placeholder)
    exported = [n for n, op in defined if op.name == "llvm.func"
                and ir.Attribute(op.attributes["linkage"]) == ir.Attribute.parse(
                    "#llvm.linkage<external>")]
    if not exported:
        raise ValueError(f"part defines no external function: {sorted(part.keep)[:5]}")
    engine.raw_lookup(exported[0])  # compiles the whole module
    engine.dump_to_object_file(object_file)


def main(argv: list[str]) -> int:
    """`llvm_split.py MODULE PART_JSON OBJECT`: compile one part of a printed module."""
    module_file, part_json, object_file = argv
    with open(part_json) as f:
        part = Part.from_json(json.load(f))
    with ir.Context() as ctx:
        ctx.allow_unregistered_dialects = False
        with open(module_file) as f:
            module = ir.Module.parse(f.read())
        compile_part(module, part, object_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

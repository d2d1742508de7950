"""dg-gpu-dedup-kernels: outlined kernel modules with identical bodies become one.

`gpu-kernel-outlining` makes one `gpu.module` per launch, and a model's layers repeat:
GPT-2 124M's training step outlined 671 modules holding 98 distinct kernels, and each
module was lowered through NVVM and assembled by ptxas again (12 s of MLIR and 7 s of
ptxas for one chip, on 2 cores). Modules are equal when their printed forms, without
their names and locations, are; launches of a copy launch the first module of its kind,
and the copies are erased before NVVM. The launch plan then loads one module for all
of them.
"""
from __future__ import annotations

import logging
from typing import Iterator

from mlir import ir

log = logging.getLogger(__name__)


def _key(module: ir.Operation, name: str) -> str:
    text = module.get_asm(enable_debug_info=False, assume_verified=True, use_local_scope=True)
    return text.replace(f"@{name} ", "@_ ", 1)


def _launches(op: ir.Operation) -> Iterator[ir.Operation]:
    """Every `gpu.launch_func` nested in `op` (launches of run-time sizes sit in `scf.if`s
    and loops)."""
    for region in op.regions:
        for block in region.blocks:
            for child in block.operations:
                child = child.operation
                if child.name == "gpu.launch_func":
                    yield child
                elif child.regions:
                    yield from _launches(child)


def dedup_kernels(module: ir.Operation) -> None:
    body = module.regions[0].blocks[0]
    first: dict[str, str] = {}
    copies: dict[str, ir.Operation] = {}
    kept_as: dict[str, str] = {}
    for op in body.operations:
        op = op.operation
        if op.name != "gpu.module":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        key = _key(op, name)
        if key in first:
            copies[name], kept_as[name] = op, first[key]
        else:
            first[key] = name
    if not copies:
        return
    for op in body.operations:
        op = op.operation
        if op.name == "gpu.module":
            continue
        for launch in _launches(op):
            ref = [ir.StringAttr(a).value if isinstance(a, ir.Attribute) else a
                   for a in ir.SymbolRefAttr(launch.attributes["kernel"]).value]
            if ref[0] in kept_as:
                launch.attributes["kernel"] = ir.SymbolRefAttr.get([kept_as[ref[0]], *ref[1:]])
    for op in copies.values():
        op.erase()
    log.debug("dg-gpu-dedup-kernels: %d of %d kernel modules were copies",
              len(copies), len(copies) + len(first))

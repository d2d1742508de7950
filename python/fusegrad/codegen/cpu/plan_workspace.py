"""dg-plan-workspace: an entry's temporaries share one workspace, packed by liveness.

Bufferization's deallocation frees every temporary at the end of its function,
so all of a backward's temporaries are live at once (137 MiB in a small LLaMA's
backward), and each is a fresh `malloc`: with glibc's defaults, large blocks
are mmapped, so every call page-faults them in again. Eager PyTorch frees an
intermediate after its last use; a compiler knows every buffer's lifetime
ahead of time and can do better than a general allocator.

This pass gives each public entry function one trailing argument, its
workspace (`memref<N x i8>`), and turns each statically shaped `memref.alloc`
at the top level of the entry into a `memref.view` of the workspace at a
fixed offset. Offsets come from the buffers' live ranges (first to last
top-level op that touches the buffer or anything derived from it): buffers
live at the same time never overlap; greedy by size, largest first, each at
the lowest offset that fits (TFLite's arena planner). The runtime passes one
buffer per thread, kept between calls (`runtime.cpu`), so steady-state calls
neither allocate nor fault. The module attribute `WORKSPACES_ATTR` maps each
such entry to its workspace size in bytes.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from mlir import ir
from mlir.dialects import arith, memref

from ...dialects.types import TensorSpec, dtype_of
from ...dialects.core import is_public
from ..common.memrefs import contiguous_memref, touching_ops


log = logging.getLogger(__name__)

WORKSPACES_ATTR = "dg.workspaces"
ALIGNMENT = 64  # bytes: what bufferization asks of allocs, a cache line, an AVX-512 vector


@dataclass
class _Buffer:
    alloc: ir.Operation
    deallocs: list[ir.Operation]
    start: int  # first and last top-level op that touch it
    end: int
    size: int  # bytes, rounded up to ALIGNMENT
    offset: int = -1


def _buffer(alloc: ir.Operation, position: dict) -> Optional[_Buffer]:
    """The live range of a top-level alloc; None when it cannot be planned (dynamic or
    strided type, escapes through a return, freed elsewhere or more than once)."""
    t = ir.MemRefType(alloc.results[0].type)
    if not contiguous_memref(t) or alloc.operands:
        return None
    try:
        size = TensorSpec(tuple(t.shape), dtype_of(t.element_type)).nbytes
    except TypeError:  # an element type dg has no dtype for
        return None
    touching = touching_ops(alloc.results[0], alloc.block)
    if touching is None or len(touching[1]) != 1 or not touching[0]:
        return None
    ops, deallocs = touching
    touched = [position[op] for op in ops]
    size = -(-size // ALIGNMENT) * ALIGNMENT
    return _Buffer(alloc, deallocs, min(touched), max(touched), size)


def pack(buffers: list[_Buffer]) -> int:
    """Assign offsets so that buffers with overlapping live ranges never overlap in
    memory; returns the workspace size."""
    placed: list[_Buffer] = []
    for b in sorted(buffers, key=lambda b: (-b.size, b.start)):
        offset = 0
        for other in sorted((p for p in placed if p.start <= b.end and b.start <= p.end),
                            key=lambda p: p.offset):
            if other.offset - offset >= b.size:
                break
            offset = max(offset, other.offset + other.size)
        b.offset = offset
        placed.append(b)
    return max((b.offset + b.size for b in placed), default=0)


def _plan(fn: ir.Operation) -> int:
    """Move `fn`'s temporaries into a workspace argument; returns its size in bytes."""
    block = fn.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    position = {op: k for k, op in enumerate(ops)}
    buffers = [b for op in ops if op.name == "memref.alloc"
               for b in [_buffer(op, position)] if b is not None]
    if not buffers:
        return 0
    total = pack(buffers)
    i8 = ir.IntegerType.get_signless(8)
    workspace_type = ir.MemRefType.get([total], i8)
    workspace = block.add_argument(workspace_type, fn.location)
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    fn.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get([*ftype.inputs, workspace_type], ftype.results))
    for b in buffers:
        with ir.InsertionPoint(b.alloc), b.alloc.location:
            offset = arith.ConstantOp(ir.IndexType.get(), b.offset).result
            view = memref.ViewOp(b.alloc.results[0].type, workspace, offset, []).result
        b.alloc.results[0].replace_all_uses_with(view)
        for d in b.deallocs:
            d.erase()
        b.alloc.erase()
    log.debug("@%s: %d temporaries, %d bytes allocated, workspace %d bytes",
              ir.StringAttr(fn.attributes["sym_name"]).value, len(buffers),
              sum(b.size for b in buffers), total)
    return total


def plan_workspace(module: ir.Operation) -> None:
    sizes = {}
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and op.regions[0].blocks and is_public(op):
            size = _plan(op)
            if size:
                sizes[ir.StringAttr(op.attributes["sym_name"]).value] = size
    if sizes:
        i64 = ir.IntegerType.get_signless(64)
        module.attributes[WORKSPACES_ATTR] = ir.DictAttr.get(
            {name: ir.IntegerAttr.get(i64, size) for name, size in sizes.items()})


def workspaces(module: ir.Operation) -> dict[str, int]:
    """Entry -> workspace bytes, as recorded by dg-plan-workspace."""
    if WORKSPACES_ATTR not in module.attributes:
        return {}
    attrs = ir.DictAttr(module.attributes[WORKSPACES_ATTR])
    return {attrs[k].name: ir.IntegerAttr(attrs[k].attr).value for k in range(len(attrs))}

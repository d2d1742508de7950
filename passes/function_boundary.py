"""Buffers at function boundaries: arguments are read-only, results are distinct.

- dg-readonly-arguments (before bufferization): function arguments are the
  caller's tensors, but one-shot-bufferize treats them as writable and would
  update them in place (scatter_add, insert_slice into an argument).
- dg-distinct-result-buffers (after bufferization): `buffer-results-to-out-params`
  crashes (MLIR 22) when a function returns one memref twice, which happens
  after CSE merges equal results or when a forward returns a value it also
  saves for the backward; each repeated return operand becomes a fresh copy.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterator

from mlir import ir
from mlir.dialects import memref

from ..dialects.core import is_public  # noqa: F401  (the passes' import of it)
from .registry import register_pass


def functions(module: ir.Operation) -> Iterator[ir.Operation]:
    """The func.func ops of `module` that have a body."""
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and op.regions[0].blocks:
            yield op


def rewrite_bodies(module: ir.Operation, rewrite: Callable[[ir.Block], int],
                   log: logging.Logger, message: str) -> None:
    """Run `rewrite` (a pass's rewrite of one function body, returning how many changes it
    made) on each function; `message` % (function, count) is logged where it made some."""
    for fn in functions(module):
        n = rewrite(fn.regions[0].blocks[0])
        if n:
            log.debug(message, ir.StringAttr(fn.attributes["sym_name"]).value, n)


@register_pass("dg-readonly-arguments",
               "mark function arguments bufferization.writable=false (never updated in place)")
def readonly_arguments(module: ir.Operation) -> None:
    read_only = ir.DictAttr.get({"bufferization.writable": ir.BoolAttr.get(False)})
    for fn in functions(module):
        args = fn.regions[0].blocks[0].arguments
        if any(isinstance(a.type, ir.RankedTensorType) for a in args):
            fn.attributes["arg_attrs"] = ir.ArrayAttr.get(
                [read_only if isinstance(a.type, ir.RankedTensorType) else ir.DictAttr.get()
                 for a in args])


def _distinct_returns(fn: ir.Operation) -> None:
    ret = fn.regions[0].blocks[0].operations[len(fn.regions[0].blocks[0].operations) - 1]
    seen: set = set()
    for i, v in enumerate(list(ret.operands)):
        if v in seen and isinstance(v.type, ir.MemRefType):
            with ir.InsertionPoint(ret), ret.location:
                copy = memref.AllocOp(v.type, [], []).result
                memref.CopyOp(v, copy)
            ret.operands[i] = copy
        seen.add(v)


@register_pass("dg-distinct-result-buffers",
               "copy memrefs returned more than once so each result has its own buffer")
def distinct_result_buffers(module: ir.Operation) -> None:
    for fn in functions(module):
        _distinct_returns(fn)

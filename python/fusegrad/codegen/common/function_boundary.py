"""Buffers at function boundaries: arguments are read-only, results are distinct.

- dg-readonly-arguments (before bufferization): function arguments are the
  caller's tensors, but one-shot-bufferize treats them as writable and would
  update them in place (scatter_add, insert_slice into an argument). An outlined
  op's destinations are the exception (codegen/common/outline.py).
- dg-unfilled-destinations (before bufferization): an outlined op's destinations are
  `dg.full 0` on dg, a zero fill after lowering, which the callee then overwrites
  whole; each call gets an empty tensor instead (no memset on the CPU, no fill kernel
  on CUDA per destination).
- dg-distinct-result-buffers (after bufferization): `buffer-results-to-out-params`
  crashes (MLIR 22) when a function returns one memref twice, which happens
  after CSE merges equal results or when a forward returns a value it also
  saves for the backward; each repeated return operand becomes a fresh copy.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, memref

from ...passes import functions
from .outline import DESTINATION


def readonly_arguments(module: ir.Operation) -> None:
    """Every tensor argument read-only, but an outlined function's destinations (which
    it writes its results into: `outline.DESTINATION`)."""
    read_only = ir.DictAttr.get({"bufferization.writable": ir.BoolAttr.get(False)})
    for fn in functions(module):
        args = fn.regions[0].blocks[0].arguments
        if not any(isinstance(a.type, ir.RankedTensorType) for a in args):
            continue
        given = list(ir.ArrayAttr(fn.attributes["arg_attrs"])) \
            if "arg_attrs" in fn.attributes else [ir.DictAttr.get()] * len(args)
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [attrs if DESTINATION in ir.DictAttr(attrs) else
             read_only if isinstance(a.type, ir.RankedTensorType) else ir.DictAttr.get()
             for a, attrs in zip(args, given)])


def _destinations(fn: ir.Operation) -> list[int]:
    if "arg_attrs" not in fn.attributes:
        return []
    return [i for i, attrs in enumerate(ir.ArrayAttr(fn.attributes["arg_attrs"]))
            if DESTINATION in ir.DictAttr(attrs)]


def unfilled_destinations(module: ir.Operation) -> None:
    """Each destination operand of a call that a `linalg.fill` of a `tensor.empty` makes
    becomes a copy of that empty, made just before the call; the fill goes when nothing
    else reads it."""
    body = module.regions[0].blocks[0]
    written = {ir.StringAttr(op.operation.attributes["sym_name"]).value: places
               for op in body.operations if op.operation.name == "func.func"
               and (places := _destinations(op.operation))}
    if not written:
        return
    calls: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call" and \
                ir.FlatSymbolRefAttr(op.attributes["callee"]).value in written:
            calls.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    for call in calls:
        for i in written[ir.FlatSymbolRefAttr(call.attributes["callee"]).value]:
            fill = call.operands[i].owner
            if isinstance(fill, ir.Block) or fill.operation.name != "linalg.fill":
                continue
            empty = fill.operation.opview.outputs[0].owner
            if isinstance(empty, ir.Block) or empty.operation.name != "tensor.empty":
                continue
            call.operands[i] = empty.operation.clone(ir.InsertionPoint(call)).results[0]
            if not list(fill.operation.results[0].uses):
                fill.operation.erase()


def _distinct_returns(fn: ir.Operation) -> None:
    ret = fn.regions[0].blocks[0].operations[len(fn.regions[0].blocks[0].operations) - 1]
    seen: set = set()
    for i, v in enumerate(list(ret.operands)):
        if v in seen and isinstance(v.type, ir.MemRefType):
            with ir.InsertionPoint(ret), ret.location:
                t = ir.MemRefType(v.type)
                sizes = [memref.DimOp(v, arith.ConstantOp(ir.IndexType.get(), k).result).result
                         for k in range(t.rank) if t.is_dynamic_dim(k)]
                copy = memref.AllocOp(ir.MemRefType.get(t.shape, t.element_type), sizes,
                                      []).result
                memref.CopyOp(v, copy)
            ret.operands[i] = copy
        seen.add(v)


def distinct_result_buffers(module: ir.Operation) -> None:
    for fn in functions(module):
        _distinct_returns(fn)

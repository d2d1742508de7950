"""The public functions of a module as the runtime sees them: tensors in, tensors out.

Both targets compile each public (entry) function for the caller's tensors: read its
signature before lowering (`entry_signatures`), and drop results that are just
arguments, which the runtime hands back instead of copying (`forward_arguments`).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from ...dialects.core import is_public
from ...dialects.types import TensorSpec


def entry_signatures(module: ir.Module) -> dict[str, tuple[list[TensorSpec], list[TensorSpec]]]:
    """Public defined functions -> (input specs, output specs), on tensors (before lowering).
    Raises TypeError for an entry that is not statically shaped tensors in and out."""
    entries = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or not op.regions[0].blocks:
            continue
        if not is_public(op):
            continue
        ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        name = ir.StringAttr(op.attributes["sym_name"]).value
        try:
            entries[name] = ([TensorSpec.from_mlir(t) for t in ftype.inputs],
                             [TensorSpec.from_mlir(t) for t in ftype.results])
        except TypeError as e:
            raise TypeError(f"@{name} at {op.location}: {e}; entry functions must take and "
                            "return statically shaped tensors") from None
    return entries


def forward_arguments(module: ir.Module, names) -> dict[str, dict[int, int]]:
    """Drop results that are just arguments (a forward returning an input it saves for
    the backward) from the entries: the runtime hands the argument back instead of
    copying it into a fresh buffer. Returns, per entry, result index -> argument index."""
    forwarded: dict[str, dict[int, int]] = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or ir.StringAttr(op.attributes["sym_name"]).value not in names:
            continue
        block = op.regions[0].blocks[0]
        ret = block.operations[len(block.operations) - 1].operation
        args = list(block.arguments)
        mapping = {k: args.index(v) for k, v in enumerate(ret.operands) if v in args}
        if not mapping:
            continue
        kept = [v for k, v in enumerate(ret.operands) if k not in mapping]
        with ir.InsertionPoint(ret), ret.location:
            func.ReturnOp(kept)
        ret.erase()
        ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        op.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(ftype.inputs, [v.type for v in kept]))
        forwarded[ir.StringAttr(op.attributes["sym_name"]).value] = mapping
    return forwarded

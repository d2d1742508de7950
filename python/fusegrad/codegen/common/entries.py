"""The public functions of a module as the runtime sees them: tensors in, tensors out.

Both targets compile each public (entry) function for the caller's tensors: read its
signature before lowering (`entry_signatures`), keep the entries a compile needs
(dg-keep-functions), and drop results that are just arguments, which the runtime hands
back instead of copying (dg-forward-arguments); the CPU calls entries through their C
interface (dg-c-interface).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from ...dialects.core import is_public
from ...dialects.types import TensorSpec
from ...passes import PassError, functions


def entry_signatures(module: ir.Module) -> dict[str, tuple[list[TensorSpec], list[TensorSpec]]]:
    """Public defined functions -> (input specs, output specs), on tensors (before lowering).
    Raises TypeError for an entry that does not take and return dg tensors."""
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
            raise TypeError(f"@{name} at {op.location}: {e}; entry functions take and return "
                            "ranked tensors (a `?` dim named by the type's encoding)") from None
    return entries


FORWARDED = "dg.forwarded"  # [result, argument, result, argument, ...] of an entry


def keep_functions(module: ir.Operation, names: str = "") -> None:
    """Erase the public functions not in `names` (comma-separated): a compile lowers the
    entries it needs (a forward alone, its backward later) from a module holding more."""
    keep = {n.strip() for n in names.split(",") if n.strip()}
    if not keep:
        raise PassError("name the public functions to keep "
                        "(names=f_fwd,f_bwd)")
    for op in list(functions(module)):
        if is_public(op) and ir.StringAttr(op.attributes["sym_name"]).value not in keep:
            op.erase()


def forward_arguments(module: ir.Operation) -> None:
    """Drop results that are just arguments (a forward returning an input it saves for
    the backward) from the entries, recording them as `dg.forwarded`: the runtime hands
    the argument back instead of copying it into a fresh buffer."""
    for op in functions(module):
        if not is_public(op):
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
        op.attributes[FORWARDED] = ir.DenseI64ArrayAttr.get(
            [i for pair in sorted(mapping.items()) for i in pair])


def forwarded(module: ir.Module) -> dict[str, dict[int, int]]:
    """Per entry, result index -> argument index, as `dg-forward-arguments` recorded."""
    out = {}
    for op in functions(module.operation):
        if FORWARDED in op.attributes:
            pairs = list(ir.DenseI64ArrayAttr(op.attributes[FORWARDED]))
            out[ir.StringAttr(op.attributes["sym_name"]).value] = dict(zip(pairs[::2],
                                                                           pairs[1::2]))
    return out


def c_interface(module: ir.Operation) -> None:
    """Give each entry a C interface (`llvm.emit_c_interface`): the CPU runtime calls
    `_mlir_ciface_<name>` with one pointer per memref descriptor."""
    for op in functions(module):
        if is_public(op):
            op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()

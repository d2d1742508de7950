"""Outline dg ops into private functions that a later pass turns into library calls.

A library call takes buffers, which exist only after bufferization, while the op
it replaces is easiest to recognize on dg. So each selected op becomes a call of a
private function `@__dg_<op>_<k>` (one per op name, attributes and types) holding
just that op, tagged with an attribute that records the op and its attributes.
The body lowers like any other (the op's decomposition), so the IR stays correct
whether or not the library pass runs; bufferization gives the function
identity-layout (contiguous) memref arguments, the results last, as out-params.

Bufferization makes no out-param for a result of run-time size (the caller cannot
allocate what it does not know the size of), so an op of symbolic sizes is outlined
in destination-passing style where its pass takes it (`symbolic=True`; attention on
both targets): the caller
passes one destination per result (`dg.full` 0 of the result's type, whose sizes the
caller knows), marked DESTINATION; the function writes each result into its
destination (`bufferization.materialize_in_destination`) and returns it, and
`drop-equivalent-buffer-results` then leaves the same signature as the static case:
the inputs, then one buffer per result. `dg-unfilled-destinations` drops the zero fill
the `dg.full` lowers to.

`dg-outline-conv-grads` and `dg-outline-attention` are the outlinings both targets run:
the CPU calls PyTorch's convolution backward and flash attention kernels for them
(dg-conv-to-torch, dg-attention-to-torch), the CUDA launch plan calls cuDNN and
PyTorch's fused attention kernels (`conv2d_grad`, `attention` and `attention_grad`
steps). Outlining for library calls only one target makes lives with that target's pass
(dg-outline-conv-nhwc).
"""
from __future__ import annotations

from typing import Callable

from mlir import ir
from mlir.dialects import bufferization, func

from ...dialects.attention import KERNEL_DTYPES, OPS as ATTENTION_OPS

# the dtypes PyTorch's kernels take through its C shim (codegen/cpu/library/torch_calls.py)
LIBRARY_DTYPES = ("f16", "bf16", "f32", "f64")
CONV_GRAD_CALL = "dg.conv2d_backward"  # attribute of the outlined convolution gradients
CONV_GRAD_OPS = ("dg.conv2d_input_grad", "dg.conv2d_weight_grad")
ATTENTION_CALL = "dg.attention_call"  # attribute of the outlined attention functions
# argument attribute of a destination (dg-readonly-arguments leaves it writable)
DESTINATION = "dg.destination"


def symbols(body: ir.Block) -> set[str]:
    return {ir.StringAttr(o.operation.attributes["sym_name"]).value
            for o in body.operations if "sym_name" in o.operation.attributes}


def _top_level(op: ir.Operation, module: ir.Operation) -> ir.Operation:
    while op.parent is not None and op.parent.operation != module:
        op = op.parent.operation
    return op


def _static(op: ir.Operation) -> bool:
    return all(v.type.has_static_shape for v in (*op.operands, *op.results))


def outline_ops(module: ir.Operation, selected: Callable[[ir.Operation], bool], tag: str,
                facts: Callable[[ir.Operation], dict[str, ir.Attribute]] | None = None, *,
                symbolic: bool = False) -> None:
    """Replace each op for which `selected(op)` holds by a call of a private function
    holding it, tagged `tag = {op = <name without dg.>, <the op's attributes>, <facts(op)>}`
    (`facts`: what the library call needs to know of the operands). An op of symbolic
    sizes is outlined with destinations (module docstring) where `symbolic`, else stays
    where it is (lowered by its decomposition)."""
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if selected(op) and (symbolic or _static(op)):
            ops.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    if not ops:
        return
    taken = symbols(module.regions[0].blocks[0])
    outlined: dict[tuple, str] = {}
    for op in ops:
        attrs = {name: op.attributes[name] for name in op.attributes}
        tagged = {**attrs, **(facts(op) if facts else {})}
        result_types = [r.type for r in op.results]
        destinations = result_types if not _static(op) else []
        types = [v.type for v in op.operands] + destinations
        key = (op.name, tuple(sorted((k, str(v)) for k, v in tagged.items())),
               tuple(map(str, types)))
        name = outlined.get(key)
        if name is None:
            k = sum(1 for other in outlined if other[0] == op.name)
            while (name := f"__dg_{op.name[3:]}_{k}") in taken:
                k += 1
            taken.add(name)
            outlined[key] = name
            with ir.InsertionPoint(_top_level(op, module)), op.location:
                _outlined_function(name, op, attrs, types, len(destinations), tag, tagged)
        with ir.InsertionPoint(op), op.location:
            made = [ir.Operation.create("dg.full", results=[t], attributes={
                "value": ir.FloatAttr.get(ir.F64Type.get(), 0.0)}).result for t in destinations]
            call = func.CallOp(result_types, ir.FlatSymbolRefAttr.get(name),
                               [*op.operands, *made])
        for old, new in zip(op.results, call.results):
            old.replace_all_uses_with(new)
        op.erase()


def _outlined_function(name: str, op: ir.Operation, attrs: dict[str, ir.Attribute],
                       types: list[ir.Type], destinations: int, tag: str,
                       tagged: dict[str, ir.Attribute]) -> None:
    """The private function `name` of argument `types` computing a copy of `op` (of
    attributes `attrs`), its results written into its last `destinations` arguments
    where there are any."""
    result_types = [r.type for r in op.results]
    fn = func.FuncOp(name, ir.FunctionType.get(types, result_types), visibility="private")
    fn.attributes[tag] = ir.DictAttr.get({"op": ir.StringAttr.get(op.name[3:]), **tagged})
    if destinations:
        marked = ir.DictAttr.get({DESTINATION: ir.UnitAttr.get()})
        fn.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [ir.DictAttr.get()] * (len(types) - destinations) + [marked] * destinations)
    block = fn.add_entry_block()
    inputs = list(block.arguments)[:len(types) - destinations]
    with ir.InsertionPoint(block):
        inner = ir.Operation.create(op.name, results=result_types, operands=inputs,
                                    attributes=attrs)
        results = list(inner.results)
        if destinations:
            results = [bufferization.MaterializeInDestinationOp(r.type, r, d).result
                       for r, d in zip(results, list(block.arguments)[len(inputs):])]
        func.ReturnOp(results)


def outline_conv_grads(module: ir.Operation) -> None:
    outline_ops(module, lambda op: op.name in CONV_GRAD_OPS and
                str(op.results[0].type.element_type) in LIBRARY_DTYPES, CONV_GRAD_CALL)


def _zero_mask(mask: ir.Value) -> bool:
    """Is an attention's mask a constant 0 (no mask: the importer fills one)?"""
    owner = mask.owner
    if isinstance(owner, ir.Block) or owner.operation.name != "dg.full":
        return False
    return ir.FloatAttr(owner.operation.attributes["value"]).value == 0.0


def outline_attention(module: ir.Operation, target: str = "cpu") -> None:
    """dg.attention and dg.attention_grad of the dtypes `target`'s kernels take become
    calls tagged ATTENTION_CALL, with `unmasked = 1` where the mask is a constant 0: a
    fused CUDA kernel is then called without one, as eager calls it (flash attention
    takes no mask)."""
    if target not in KERNEL_DTYPES:
        raise ValueError(f"dg-outline-attention: target={target!r} is not one of "
                         f"{sorted(KERNEL_DTYPES)}")
    dtypes = KERNEL_DTYPES[target]

    def facts(op: ir.Operation) -> dict[str, ir.Attribute]:
        mask = op.operands[3 if op.name == "dg.attention" else 6]
        return {"unmasked": ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                               int(_zero_mask(mask)))}
    outline_ops(module, lambda op: op.name in ATTENTION_OPS and
                str(op.operands[1].type.element_type) in dtypes, ATTENTION_CALL, facts,
                symbolic=True)

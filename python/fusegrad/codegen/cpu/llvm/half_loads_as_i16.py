"""dg-half-loads-as-i16: 16-bit floats (bf16, f16, and vectors of them) cross memory
and private function boundaries as i16 bits, bitcast to the float type in registers.

LLVM's SLP vectorizer merges a short strided run of scalar bf16 loads (a 9 x 9
transpose) into one masked load of an odd-length vector (`<75 x bfloat>`), which
the X86 backend with AVX512-BF16 cannot legalize: it asserts and aborts the
process. The same run of i16 loads legalizes. Bitcasts between i16 and a 16-bit
float cost nothing, and every computation on these types already runs in f32.

A bf16 argument or result of a function (an outlined loop's running max) is passed
in an XMM register; without AVX512-BF16 the backend holds bf16 values widened to
f32 and narrows them for the call with `__truncsfbf2`, which libgcc_s has only from
GCC 13: the JIT failed to link on such CPUs (AVX2 only, Debian 12). As i16 they
are moved, not narrowed.
"""
from __future__ import annotations

from mlir import ir


def _as_bits(t: ir.Type) -> ir.Type | None:
    """The i16 counterpart of a bf16/f16 scalar or vector type, else None."""
    i16 = ir.IntegerType.get_signless(16)
    if isinstance(t, (ir.BF16Type, ir.F16Type)):
        return i16
    if isinstance(t, ir.VectorType) and isinstance(t.element_type, (ir.BF16Type, ir.F16Type)):
        return ir.VectorType.get(t.shape, i16)
    return None


def _bitcast(value: ir.Value, to: ir.Type) -> ir.Value:
    """`value` bitcast to `to`, at the current insertion point."""
    return ir.Operation.create("llvm.bitcast", results=[to], operands=[value]).results[0]


def _private_functions(module: ir.Operation) -> dict[str, ir.Operation]:
    """llvm.func definitions only this module calls (private or internal)."""
    found = {}
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "llvm.func" or not op.regions[0].blocks:
            continue
        private = "sym_visibility" in op.attributes and \
            ir.StringAttr(op.attributes["sym_visibility"]).value == "private"
        internal = "linkage" in op.attributes and \
            str(op.attributes["linkage"]) in ("#llvm.linkage<internal>", "#llvm.linkage<private>")
        if private or internal:
            found[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return found


def _returns(fn: ir.Operation) -> list[ir.Operation]:
    return [op.operation for block in fn.regions[0].blocks for op in block.operations
            if op.operation.name == "llvm.return"]


def _signatures_as_bits(module: ir.Operation) -> None:
    """Arguments and results of 16-bit float types of private functions become i16."""
    changed = {}
    for name, fn in _private_functions(module).items():
        entry = fn.regions[0].blocks[0]
        inputs = [a.type for a in entry.arguments]
        returns = _returns(fn)
        result = returns[0].operands[0].type if returns and returns[0].operands else None
        if not any(_as_bits(t) for t in inputs) and not (result and _as_bits(result)):
            continue
        for arg in entry.arguments:
            bits = _as_bits(arg.type)
            if bits is not None:
                float_type = arg.type
                arg.set_type(bits)
                with ir.InsertionPoint.at_block_begin(entry), fn.location:
                    value = _bitcast(arg, float_type)
                arg.replace_all_uses_except(value, value.owner.operation)
        if result and _as_bits(result):
            for ret in returns:
                with ir.InsertionPoint(ret), ret.location:
                    ret.operands[0] = _bitcast(ret.operands[0], _as_bits(result))
        signature = ", ".join(str(_as_bits(t) or t) for t in inputs)
        returned = "void" if result is None else str(_as_bits(result) or result)
        fn.attributes["function_type"] = ir.TypeAttr.get(
            ir.Type.parse(f"!llvm.func<{returned} ({signature})>"))
        changed[name] = (inputs, result)
    if not changed:
        return

    calls: list = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.call" and "callee" in op.attributes and \
                ir.FlatSymbolRefAttr(op.attributes["callee"]).value in changed:
            calls.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    for op in calls:
        inputs, result = changed[ir.FlatSymbolRefAttr(op.attributes["callee"]).value]
        with ir.InsertionPoint(op), op.location:
            for i, t in enumerate(inputs):
                if _as_bits(t):
                    op.operands[i] = _bitcast(op.operands[i], _as_bits(t))
        if result and _as_bits(result):
            value = op.results[0]
            value.set_type(_as_bits(result))
            with ir.InsertionPoint.after(op), op.location:
                cast = _bitcast(value, result)
            value.replace_all_uses_except(cast, cast.owner.operation)


def half_loads_as_i16(module: ir.Operation) -> None:
    _signatures_as_bits(module)
    loads, stores = [], []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "llvm.load" and _as_bits(op.results[0].type) is not None:
            loads.append(op)
        elif op.name == "llvm.store" and _as_bits(op.operands[0].type) is not None:
            stores.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op in loads:
        value = op.results[0]
        with ir.InsertionPoint(op), op.location:
            bits = ir.Operation.create("llvm.load", results=[_as_bits(value.type)],
                                       operands=list(op.operands),
                                       attributes={a: op.attributes[a] for a in op.attributes})
            cast = ir.Operation.create("llvm.bitcast", results=[value.type],
                                       operands=[bits.results[0]])
        value.replace_all_uses_with(cast.results[0])
        op.erase()
    for op in stores:
        value = op.operands[0]
        with ir.InsertionPoint(op), op.location:
            cast = ir.Operation.create("llvm.bitcast", results=[_as_bits(value.type)],
                                       operands=[value])
        op.operands[0] = cast.results[0]

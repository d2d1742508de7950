"""What dg-autodiff and dg-jvp share: picking functions, wrt inputs, IR plumbing."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from mlir import ir
from mlir.dialects import func

from ...dialects.builder import Builder, spec
from ...dialects.core import ShapeError, attrs_of, lookup
from ...dialects.region_ops import is_fusion
from ...dialects.types import TensorSpec, is_float
from ...dialects.core import is_public
from ...passes import PassError

DIFFERENTIATED = "dg.differentiated"
WRT = "dg.wrt"
NUM_OUTPUTS = "dg.num_outputs"
CT_OUTPUTS = "dg.ct_outputs"
REACHED_BY = "dg.reached_by"
TANGENT_OUTPUTS = "dg.tangent_outputs"
GENERATED_MARKERS = (CT_OUTPUTS, TANGENT_OUTPUTS)


def func_name(fn: ir.Operation) -> str:
    return ir.StringAttr(fn.attributes["sym_name"]).value


def forward_backward_pairs(module: ir.Operation) -> list[tuple[ir.Operation, ir.Operation]]:
    """The (@X_fwd with dg.num_outputs, @X_bwd) pairs dg-autodiff made in `module`: the
    forward returns its outputs then the values it saves, which the backward takes first."""
    funcs = {func_name(op.operation): op.operation for op in module.regions[0].blocks[0].operations
             if op.operation.name == "func.func" and op.operation.regions[0].blocks}
    return [(fwd, funcs[name[:-4] + "_bwd"]) for name, fwd in funcs.items()
            if name.endswith("_fwd") and NUM_OUTPUTS in fwd.attributes
            and name[:-4] + "_bwd" in funcs]


def functions_to_differentiate(module: ir.Operation) -> list[ir.Operation]:
    """Public `func.func` definitions not yet marked `dg.differentiated`."""
    found = []
    for op in module.regions[0].blocks[0].operations:
        fn = op.operation
        if fn.name != "func.func" or not fn.regions[0].blocks:
            continue
        if not is_public(fn):
            continue
        if DIFFERENTIATED not in fn.attributes:
            found.append(fn)
    return found


def function_type(fn: ir.Operation) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)


def is_float_type(t: ir.Type) -> bool:
    return is_float(TensorSpec.from_mlir(t).dtype)


def float_indices(types: Sequence[ir.Type]) -> list[int]:
    return [i for i, t in enumerate(types) if is_float_type(t)]


def parse_indices(option: str, name: str = "wrt") -> list[int] | None:
    """A pass option such as `wrt=0,2` as indices; None when not given."""
    if not option.strip():
        return None
    try:
        return [int(v) for v in option.split(",")]
    except ValueError:
        raise PassError(f"option {name}={option!r} must be comma-separated indices, "
                        f"e.g. {name}=0,2") from None


def resolve_wrt(fn: ir.Operation, option: list[int] | None) -> list[int]:
    """Inputs to differentiate: the option, else @f's `dg.wrt`, else every float input.

    On a generated function (`@f_bwd`, `@f_vjp`, `@f_jvp`: it has `dg.ct_outputs` or
    `dg.tangent_outputs`) `dg.wrt` describes what it computed, not a request, so
    it is ignored there.
    """
    inputs = function_type(fn).inputs
    if option is not None:
        wrt = option
    elif WRT in fn.attributes and not any(a in fn.attributes for a in GENERATED_MARKERS):
        wrt = list(ir.DenseI64ArrayAttr(fn.attributes[WRT]))
    else:
        return float_indices(inputs)
    for i in wrt:
        if not 0 <= i < len(inputs):
            raise PassError(f"wrt index {i} out of range: @{func_name(fn)} has {len(inputs)} "
                            "inputs", fn.location)
        if not is_float_type(inputs[i]):
            raise PassError(f"cannot differentiate @{func_name(fn)} with respect to input {i} "
                            f"of type {inputs[i]}: only floating-point inputs have gradients",
                            fn.location)
    if len(set(wrt)) != len(wrt):
        raise PassError(f"wrt {wrt} repeats an input", fn.location)
    return list(wrt)


def body_ops(fn: ir.Operation) -> tuple[list[ir.Operation], list[ir.Value]]:
    """The ops of `fn`'s single block, checked to be dg ops, and its returned values."""
    block = fn.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    if len(fn.regions[0].blocks) != 1 or not ops or ops[-1].name != "func.return":
        raise PassError(f"@{func_name(fn)} must have a single block ending in func.return",
                        fn.location)
    for op in ops[:-1]:
        if is_fusion(op):
            raise PassError(f"cannot differentiate a fusion region in @{func_name(fn)}: run "
                            "dg-autodiff before dg-fuse", op.location)
        if not op.name.startswith("dg."):
            raise PassError(f"cannot differentiate '{op.name}' in @{func_name(fn)}: only dg ops "
                            "are differentiable (inline calls first)", op.location)
    return ops[:-1], list(ops[-1].operands)


def clone_op(op: ir.Operation, operands: Sequence[ir.Value]) -> ir.Operation:
    """A copy of the region-free `op` at the current insertion point with new operands."""
    return ir.Operation.create(op.name, results=[r.type for r in op.results],
                               operands=list(operands),
                               attributes={name: op.attributes[name] for name in op.attributes},
                               loc=op.location)


def new_function(module: ir.Operation, after: ir.Operation, name: str,
                 inputs: Sequence[ir.Type], outputs: Sequence[ir.Type],
                 loc: ir.Location) -> ir.Operation:
    """An empty public `func.func @name` placed after `after`, with an entry block."""
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and func_name(op.operation) == name:
            raise PassError(f"cannot create @{name}: the module already has a function of that "
                            "name", op.operation.location)
    with ir.InsertionPoint.after(after), loc:
        fn = func.FuncOp(name, ir.FunctionType.get(list(inputs), list(outputs)))
        fn.add_entry_block()
    return fn.operation


def set_i64s(fn: ir.Operation, name: str, values: Iterable[int]) -> None:
    fn.attributes[name] = ir.DenseI64ArrayAttr.get([int(v) for v in values])


def get_i64s(fn: ir.Operation, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(fn.attributes[name]))


def mark_differentiated(*fns: ir.Operation) -> None:
    for fn in fns:
        fn.attributes[DIFFERENTIATED] = ir.UnitAttr.get()


def grad_location(op: ir.Operation, what: str) -> ir.Location:
    """Where derivative IR of `op` points: a NameLoc `"<what> of dg.x"` around op's location."""
    return ir.Location.name(f"{what} of {op.name}", childLoc=op.location)


def check_rule_result(op: ir.Operation, what: str, got: list, expected: Sequence[ir.Value]) -> None:
    """A rule must return one value (or None) per expected slot, of the expected type."""
    if len(got) != len(expected):
        raise PassError(f"the {what} rule of {op.name} returned {len(got)} values for "
                        f"{len(expected)} slots", op.location)
    for i, (g, v) in enumerate(zip(got, expected)):
        if g is not None and g.type != v.type:
            raise PassError(f"the {what} rule of {op.name} returned {g.type} for slot #{i} of "
                            f"type {v.type}", op.location)


def rule_of(op: ir.Operation, slot: str):
    d = lookup(op.name)
    rule = getattr(d, slot)
    if rule is None:
        raise PassError(f"{op.name} has no {slot.upper()} rule; register one with "
                        f"@{slot}_rule in its op family module", op.location)
    return d, rule


def active_values(ops: Sequence[ir.Operation], seeds: Iterable[ir.Value]) -> set:
    """Floating-point values that depend on `seeds` (the differentiated inputs)."""
    active = set(seeds)
    for op in ops:
        if any(o in active for o in op.operands):
            active.update(r for r in op.results if is_float_type(r.type))
    return active


def outputs_reaching(ops: Sequence[ir.Operation], outputs: Sequence[ir.Value]) -> dict:
    """value -> the indices of `outputs` that depend on it through any op but
    dg.stop_gradient (a detach). An input no output with a gradient reaches gets None
    from eager's autograd, not zeros: a parameter the loss does not read keeps `.grad`
    None, which optimizers skip. Data flow through integer and boolean values counts
    too: eager records ops whose derivative is zero (copysign's sign source, a p=0
    cdist) and gives their inputs zeros."""
    reach: dict = {}
    for i, v in enumerate(outputs):
        reach.setdefault(v, set()).add(i)
    for op in reversed(ops):
        if op.name == "dg.stop_gradient":
            continue
        sources = set().union(*(reach.get(r, ()) for r in op.results))
        if sources:
            for v in op.operands:
                reach.setdefault(v, set()).update(sources)
    return reach


def set_reached_by(fn: ir.Operation, reached_by: Sequence[Iterable[int]]) -> None:
    """`dg.reached_by`: per wrt input, the outputs whose cotangents reach its gradient."""
    fn.attributes[REACHED_BY] = ir.ArrayAttr.get(
        [ir.DenseI64ArrayAttr.get(sorted(int(i) for i in outs)) for outs in reached_by])


def get_reached_by(fn: ir.Operation) -> list[list[int]] | None:
    if REACHED_BY not in fn.attributes:
        return None
    return [list(ir.DenseI64ArrayAttr(a)) for a in ir.ArrayAttr(fn.attributes[REACHED_BY])]


def erase_dead_ops(fn: ir.Operation) -> None:
    """Erase dg ops whose results are unused (all dg ops are side-effect free)."""
    for op in reversed([o.operation for o in fn.regions[0].blocks[0].operations]):
        if op.name.startswith("dg.") and all(not list(r.uses) for r in op.results):
            op.erase()


def apply_rule(op: ir.Operation, slot: str, loc: ir.Location, ins, outs, seeds) -> list:
    """Run op's VJP/JVP rule at the current insertion point, at `loc`."""
    d, rule = rule_of(op, slot)
    try:
        with loc:
            return list(rule(Builder(loc), ins, outs, seeds, op=d.name, attrs=attrs_of(op)))
    except ShapeError as e:
        raise PassError(f"the {slot.upper()} rule of {op.name} built invalid IR: {e}",
                        op.location) from None


@dataclass
class Derivation:
    """A function derived from `source`, as dg-autodiff's `@f_vjp` and dg-jvp's `@f_jvp` are.

    It takes `source`'s inputs then one seed per float output (reverse mode:
    cotangents) or per wrt input (forward mode: tangents), replays `source`'s
    ops, and returns `source`'s outputs then one derivative per wrt input
    (reverse) or per float output (forward).
    """

    source: ir.Operation
    fn: ir.Operation
    wrt: list[int]
    float_outputs: list[int]
    ops: list[ir.Operation]
    returned: list[ir.Value]
    source_args: list[ir.Value]
    args: list[ir.Value]  # the derived function's: source's inputs, then the seeds
    env: dict  # source value -> its copy in the derived function

    @classmethod
    def start(cls, source: ir.Operation, wrt: Sequence[int] | None, name: str, *,
              reverse: bool, outputs: Sequence[int] | None = None) -> "Derivation":
        """`outputs`: the floating-point outputs that take a seed or get a derivative
        (default: all)."""
        source = source.operation
        ftype = function_type(source)
        ins, outs = list(ftype.inputs), list(ftype.results)
        wrt = resolve_wrt(source, list(wrt) if wrt is not None else None)
        float_outputs = float_indices(outs)
        if outputs is not None:
            unknown = sorted(set(outputs) - set(float_outputs))
            if unknown:
                raise PassError(f"@{func_name(source)} has no floating-point outputs {unknown} "
                                f"to differentiate (it has {float_outputs})", source.location)
            float_outputs = sorted(set(outputs))
        of_inputs, of_outputs = [ins[i] for i in wrt], [outs[i] for i in float_outputs]
        seeds, derivatives = (of_outputs, of_inputs) if reverse else (of_inputs, of_outputs)
        ops, returned = body_ops(source)
        fn = new_function(source.parent, source, name, ins + seeds, outs + derivatives,
                          source.location)
        source_args = list(source.regions[0].blocks[0].arguments)
        args = list(fn.regions[0].blocks[0].arguments)
        return cls(source, fn, wrt, float_outputs, ops, returned, source_args, args,
                   dict(zip(source_args, args)))

    @property
    def seeds(self) -> list[ir.Value]:
        return self.args[len(self.source_args):]

    def replay(self, op: ir.Operation) -> ir.Operation:
        """Copy a source op into the derived function (at the insertion point)."""
        copy = clone_op(op, [self.env[v] for v in op.operands])
        self.env.update(zip(op.results, copy.results))
        return copy

    def zeros_like(self, v: ir.Value) -> ir.Value:
        s = spec(v)
        return Builder(self.source.location).full(shape=s.shape, dtype=s.dtype, value=0.0)

    def finish(self, derivatives: Sequence[ir.Value], seeds_attr: str) -> ir.Operation:
        """Return outputs then `derivatives`; record the signature in attributes."""
        func.ReturnOp([self.env[v] for v in self.returned] + list(derivatives),
                      loc=self.source.location)
        erase_dead_ops(self.fn)
        self.fn.attributes[NUM_OUTPUTS] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64, self.fn.context), len(self.returned))
        set_i64s(self.fn, WRT, self.wrt)
        set_i64s(self.fn, seeds_attr, self.float_outputs)
        return self.fn

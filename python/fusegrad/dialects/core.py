"""The dg op registry: every op is defined once, with all of its rules.

An `OpDef` carries the op's signature (operands, results, attributes), its
fusion class, and its rules, registered next to the op's definition in the op
family modules (`elementwise.py`, `reduction.py`, ...):

- `shape`     (ins, attrs, hint) -> result specs; also the verifier's check
- `reference` torch implementation, used by the reference interpreter
- `scalar`    elementwise ops only: arith/math on scalars inside linalg bodies
- `lower`     dg op -> linalg/tensor IR (dg-lower-to-linalg)
- `vjp`       reverse-mode rule (dg-autodiff)
- `jvp`       forward-mode rule (dg-jvp)

Rules are attached with the decorators `shape_rule`, `reference_rule`,
`scalar_rule`, `lowering`, `vjp_rule` and `jvp_rule`, all keyed by op name.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from mlir import ir


class ShapeError(ValueError):
    """An op's operands/attributes violate its shape or dtype rule."""


def holds(condition: Any) -> bool | None:
    """Whether a condition on sizes holds: True or False where it is decided (always, for
    static sizes), None where it depends on the values of symbolic sizes."""
    if isinstance(condition, (bool, np.bool_)):
        return bool(condition)
    import sympy

    if isinstance(condition, sympy.Eq):
        difference = sympy.expand(condition.lhs - condition.rhs)
        if difference == 0:
            return True
        return False if difference.is_number else None
    try:
        decided = sympy.simplify(condition)
    except Exception:  # sympy gives up on some conditions (floors: PrecisionExhausted)
        return None
    if decided in (sympy.true, sympy.false):
        return bool(decided)
    return None


def equal(a: Any, b: Any) -> Any:
    """The condition `a == b` on sizes (for `holds`/`require`): Python's `==` on
    symbolic sizes compares their expressions, not their values."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    import sympy

    return sympy.Eq(a, b)


def require(condition: Any, message: str) -> None:
    """Raise ShapeError(message) unless `condition` may hold. A condition on symbolic sizes
    that only their values decide is accepted: the capture's guards (Dynamo's, on the
    sizes it made symbolic) ensure what the program was traced under."""
    if holds(condition) is False:
        raise ShapeError(message)


class Kind(enum.Enum):
    """Fusion class of an op: what kind of loop nest it needs."""

    ELEMENTWISE = "elementwise"
    BROADCAST = "broadcast"  # explicit broadcast: a pure index map
    VIEW = "view"  # reshape/transpose/slice/reverse: pure index maps
    DATA_MOVEMENT = "data_movement"  # pad, concatenate
    SOURCE = "source"  # constant/full/iota: no tensor inputs
    RANDOM = "random"
    REDUCTION = "reduction"
    GATHER = "gather"  # gather, index_select, scatter_add
    CONTRACTION = "contraction"  # matmul, conv2d
    SCAN = "scan"  # running combination along one dim


class Attr(enum.Enum):
    """Attribute kinds: how a Python value maps to an MLIR attribute."""

    I64 = ("#builtin.integer",)
    F64 = ("#builtin.float",)
    STR = ("#builtin.string",)
    I64S = ("#builtin.dense_array",)
    ELEMENTS = ("#builtin.dense_int_or_fp_elements",)

    @property
    def irdl_base(self) -> str:
        return self.value[0]

    def to_mlir(self, value: Any) -> ir.Attribute:
        if self is Attr.I64:
            return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))
        if self is Attr.F64:
            return ir.FloatAttr.get_f64(float(value))
        if self is Attr.STR:
            return ir.StringAttr.get(str(value))
        if self is Attr.I64S:
            return ir.DenseI64ArrayAttr.get([int(v) for v in value])
        if self is Attr.ELEMENTS:
            return value  # already a DenseElementsAttr (see builder.constant)
        raise AssertionError(self)

    def from_mlir(self, attr: ir.Attribute) -> Any:
        if self is Attr.I64:
            return ir.IntegerAttr(attr).value
        if self is Attr.F64:
            return ir.FloatAttr(attr).value
        if self is Attr.STR:
            return ir.StringAttr(attr).value
        if self is Attr.I64S:
            return tuple(ir.DenseI64ArrayAttr(attr))
        if self is Attr.ELEMENTS:
            return attr
        raise AssertionError(self)


# an integer-array attribute's symbolic entries (a slice's limit `s0 - 1`, a pad's
# high edge) are ShapedType's dynamic marker in the array, and their sizes, in order, are
# the string attribute named with this suffix: `limit = array<i64: -9223372036854775808, 4>,
# limit_sizes = "s0 - 1"`, as a tensor type's `?` dims are named by its encoding
SIZES_SUFFIX = "_sizes"
DYNAMIC = -(1 << 63)


def encode_attrs(op: "OpDef", attrs: dict[str, Any]) -> dict[str, ir.Attribute]:
    """`attrs` of dg op `op` as MLIR attributes (symbolic array entries included)."""
    from ..runtime import abi

    out = {}
    for name, value in attrs.items():
        kind = op.attrs[name]
        if kind is Attr.I64S and any(abi.is_symbolic(abi.as_dim(v)) for v in value):
            dims = [abi.as_dim(v) for v in value]
            out[name] = ir.DenseI64ArrayAttr.get(
                [DYNAMIC if abi.is_symbolic(d) else d for d in dims])
            out[name + SIZES_SUFFIX] = ir.StringAttr.get(
                ", ".join(abi.format_dim(d) for d in dims if abi.is_symbolic(d)))
        else:
            out[name] = kind.to_mlir(value)
    return out


@dataclass
class OpDef:
    """One dg op. Operand/result names prefixed with `*` are variadic."""

    name: str
    operands: tuple[str, ...]
    results: tuple[str, ...]
    attrs: dict[str, Attr]
    kind: Kind
    summary: str
    # rules (see module docstring); None until registered
    shape: Callable | None = None
    reference: Callable | None = None
    scalar: Callable | None = None
    lower: Callable | None = None
    vjp: Callable | None = None
    jvp: Callable | None = None

    @property
    def full_name(self) -> str:
        return f"dg.{self.name}"

    @property
    def differentiable(self) -> bool:
        return self.vjp is not None


OPS: dict[str, OpDef] = {}


def define(name: str, operands: tuple[str, ...], results: tuple[str, ...] = ("result",),
           attrs: dict[str, Attr] | None = None, *, kind: Kind, summary: str,
           ) -> OpDef:
    if name in OPS:
        raise ValueError(f"dg.{name} is defined twice")
    op = OpDef(name, tuple(operands), tuple(results), dict(attrs or {}), kind, summary)
    OPS[name] = op
    return op


def lookup(name: str) -> OpDef:
    """Op definition by `add` or `dg.add`."""
    short = name[3:] if name.startswith("dg.") else name
    try:
        return OPS[short]
    except KeyError:
        raise KeyError(f"unknown dg op '{name}'") from None


def is_pointwise(op) -> bool:
    """Is `op` (an ir.Operation) a dg op of one result computed element by element?"""
    if not op.name.startswith("dg.") or len(op.results) != 1:
        return False
    return op.name[3:] in OPS and OPS[op.name[3:]].kind is Kind.ELEMENTWISE


def _rule(slot: str) -> Callable[..., Callable[[Callable], Callable]]:
    def decorator(*names: str) -> Callable[[Callable], Callable]:
        def register(fn: Callable) -> Callable:
            for n in names:
                op = lookup(n)
                if getattr(op, slot) is not None:
                    raise ValueError(f"{slot} rule for dg.{n} registered twice")
                setattr(op, slot, fn)
            return fn
        return register
    decorator.__name__ = f"{slot}_rule"
    decorator.__doc__ = f"Register `fn` as the {slot} rule of the named dg ops."
    return decorator


shape_rule = _rule("shape")
reference_rule = _rule("reference")
scalar_rule = _rule("scalar")
lowering = _rule("lower")
vjp_rule = _rule("vjp")
jvp_rule = _rule("jvp")


def attrs_of(op: ir.Operation) -> dict[str, Any]:
    """The dg attributes of `op` as Python values."""
    d = lookup(op.name)
    out: dict[str, Any] = {}
    for name, kind in d.attrs.items():
        if name in op.attributes:
            out[name] = kind.from_mlir(op.attributes[name])
            if kind is Attr.I64S and DYNAMIC in out[name]:
                out[name] = _symbolic_entries(op, name, out[name])
    return out


def _symbolic_entries(op: ir.Operation, name: str, values: tuple[int, ...]) -> tuple[Any, ...]:
    from .types import symbolic_dims

    key = name + SIZES_SUFFIX
    sizes = list(symbolic_dims(ir.StringAttr(op.attributes[key]).value)) \
        if key in op.attributes else []
    if len(sizes) != values.count(DYNAMIC):
        raise ShapeError(f"{op.name}: attribute {name} has {values.count(DYNAMIC)} symbolic "
                         f"entries and {len(sizes)} sizes in {key}")
    sizes.reverse()
    return tuple(sizes.pop() if v == DYNAMIC else v for v in values)


def elements_to_numpy(attr: ir.Attribute) -> np.ndarray:
    attr = ir.DenseElementsAttr(attr)
    shape = tuple(attr.type.shape)
    if attr.is_splat:  # the buffer protocol misreads i1 splats: expand them ourselves
        value = attr.get_splat_value()
        if isinstance(value, ir.BoolAttr):
            return np.full(shape, value.value)
        if isinstance(value, ir.IntegerAttr):
            if ir.IntegerType(value.type).width == 1:
                return np.full(shape, bool(value.value))
            return np.full(shape, value.value, dtype=np.int64)
        return np.full(shape, ir.FloatAttr(value).value)
    if str(attr.type.element_type) == "bf16":
        raise NotImplementedError("non-splat bf16 dense literals cannot be read by the MLIR "
                                  "bindings; write an f32 dg.constant followed by dg.convert")
    return np.array(attr).reshape(shape)


def is_public(fn: ir.Operation) -> bool:
    """Is `fn` (a func.func) public: an entry the runtime or another module may call?
    (Here rather than with the passes: a compile-cache hit asks it and runs no pass.)"""
    vis = fn.attributes["sym_visibility"] if "sym_visibility" in fn.attributes else None
    return vis is None or ir.StringAttr(vis).value == "public"

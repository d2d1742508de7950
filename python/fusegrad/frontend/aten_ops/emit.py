"""The table's core: the registration (`handles` into `HANDLERS`, `RANDOM_OPS`), the
tables of ops skipped (`IGNORED`) or kept eager by design (`KEPT_EAGER`), what a handler
sees (`Emit`) and raises (`Unsupported`) or returns for a result it does not compute
(`Unavailable`), and the helpers shared by the op families (dtype promotion, `coerce`,
`reshape`, dim normalisation, `slice_dim`, `_clip`, `_running_sum`)."""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.fx
from mlir import ir
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from .. import custom_ops  # noqa: F401  (defines torch.ops.fusegrad.stop_gradient)
from ...dialects.builder import Builder, spec
from ...dialects.types import TensorSpec, from_torch_dtype, torch_dtype

aten = torch.ops.aten


class Unsupported(Exception):
    """This call of the op has no exact dg mapping (the message says why)."""


@dataclass(frozen=True)
class Unavailable:
    """A result the importer did not compute; using it makes the op unsupported."""

    what: str


@dataclass
class Emit:
    """What a handler sees: a located builder, the node and its result specs."""

    b: Builder
    node: torch.fx.Node
    out: list[TensorSpec | None]
    importer: Any

    @property
    def out0(self) -> TensorSpec:
        return self.out[0]

    def seed(self) -> ir.Value:
        return self.importer.next_seed(self.b)

    def result_used(self, index: int) -> bool:
        return any(u.target is operator.getitem and u.args[1] == index for u in self.node.users)


HANDLERS: dict[torch._ops.OpOverload, Callable[..., Any]] = {}

# ops the importer skips: static metadata checks that tracing already performed on the
# (specialised) shapes and dtypes. Data-dependent asserts (_assert_async) are NOT here:
# dropping one would hide the error eager raises on bad input.
IGNORED = frozenset({torch.ops.aten._assert_tensor_metadata.default})
RANDOM_OPS: set[torch._ops.OpOverload] = set()


def handles(*ops: torch._ops.OpOverload, random: bool = False) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        for op in ops:
            if op in HANDLERS:
                raise ValueError(f"{op} is mapped twice")
            HANDLERS[op] = fn
            if random:
                RANDOM_OPS.add(op)
        return fn
    return register


# ops without a mapping by design, and why (the importer's message)
KEPT_EAGER: dict[Any, str] = {
    # an nn.LSTM layer traces to it; it runs inside the compiled graph, its backward too
    # (torch_compile.trace_or_warn_rnns)
    aten.mkldnn_rnn_layer.default: "PyTorch's LSTM kernel (oneDNN), kept as it is by "
                                   "design; the ops around it compile",
}


# ------------------------------------------------------------------ helpers
def _opmath(dtype: str) -> str:
    return "f32" if dtype in ("f16", "bf16") else dtype


def _meta(x: Any) -> Any:
    if isinstance(x, ir.Value):
        s = spec(x)
        # promotion reads the rank, not the sizes: a symbolic one stands as 1
        shape = s.shape if s.is_static else tuple(d if isinstance(d, int) else 1
                                                  for d in s.shape)
        return torch.empty(shape, dtype=torch_dtype(s.dtype), device="meta")
    if is_size(x):  # a size read as a scalar: an integer (a float, its power t ** -0.5)
        return 1 if x.is_integer else 1.0
    return x


def promoted(*xs: Any) -> str:
    """PyTorch's computation dtype for an elementwise op over `xs`."""
    compute, _ = elementwise_dtypes(*[_meta(x) for x in xs],
                                    type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)
    return from_torch_dtype(compute)


def coerce(em: Emit, x: Any, dtype: str, shape: Sequence[int]) -> ir.Value:
    """`x` (a value or a Python scalar) converted to `dtype` and broadcast to `shape`."""
    if not isinstance(x, ir.Value):
        if isinstance(x, complex):
            raise Unsupported("complex scalars are not supported")
        if is_size(x):
            return size_value(em, x, dtype, shape)
        return em.b.full(shape=tuple(shape), dtype=dtype, value=float(x))
    if spec(x).dtype != dtype:
        x = em.b.convert(x, dtype=dtype)
    return em.b.broadcast_to(x, tuple(shape))


def cast(em: Emit, x: ir.Value, dtype: str) -> ir.Value:
    return x if spec(x).dtype == dtype else em.b.convert(x, dtype=dtype)


def full_as(em: Emit, x: ir.Value, value: float) -> ir.Value:
    return em.b.full_like(x, value)


def norm_dim(d: int, rank: int) -> int:
    r = max(rank, 1)
    if not -r <= d < r:
        raise Unsupported(f"dim {d} out of range for rank {rank}")
    return d % r


def norm_dims(dims: Any, rank: int) -> list[int]:
    """Sorted non-negative reduction dims; None or [] mean all dims (none for a 0-d tensor)."""
    if rank == 0:
        return []
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({norm_dim(d, rank) for d in dims})


def reshape(em: Emit, x: ir.Value, shape: Sequence[int]) -> ir.Value:
    return x if spec(x).shape == tuple(shape) else em.b.reshape(x, shape=tuple(shape))


def to_bool(em: Emit, x: Any, shape: Sequence[int]) -> ir.Value:
    """Truthiness of `x` as i1 (x != 0)."""
    if isinstance(x, ir.Value) and spec(x).dtype == "i1":
        return em.b.broadcast_to(x, tuple(shape))
    if not isinstance(x, ir.Value):
        return em.b.full(shape=tuple(shape), dtype="i1", value=float(bool(x)))
    x = em.b.broadcast_to(x, tuple(shape))
    return em.b.compare(x, full_as(em, x, 0.0), direction="ne")


# ------------------------------------------------------------------ symbolic sizes
# In a graph of symbolic sizes (`capture.capture_symbolic`), a dim and an integer
# argument computed from sizes (a view's size, a slice's bound) are sympy expressions of
# dg's sizes `s0`, `s1`, ...; Python's comparisons cannot decide them. A handler asks
# `known`/`decided` instead, and turns a size into a tensor with `size_value`.
def is_size(x: Any) -> bool:
    """Is `x` a symbolic size (a sympy expression; a size that is a number is an int)?"""
    import sympy
    return isinstance(x, sympy.Basic)


def known(em: Emit, condition: Any) -> bool | None:
    """Whether a condition on sizes holds: Python's answer for static sizes; for symbolic
    ones sympy's, else the capture's ShapeEnv's (the sizes' ranges, Dynamo's guards); None
    where only the sizes' values decide."""
    if isinstance(condition, bool):
        return condition
    sizes = getattr(em.importer, "sizes", None)
    if sizes is not None:
        return sizes.decide(condition)
    from ...dialects.core import holds
    return holds(condition)


def decided(em: Emit, condition: Any, what: str) -> bool:
    """`known(em, condition)`, raising Unsupported where the sizes' values decide it."""
    answer = known(em, condition)
    if answer is None:
        raise Unsupported(f"{what} depends on the values of symbolic sizes ({condition})")
    return answer


def size_value(em: Emit, value: Any, dtype: str, shape: Sequence[Any]) -> ir.Value:
    """A symbolic size (or a number) as a tensor of `dtype` broadcast to `shape`: each
    size is the sum of a tensor of that many ones (what the compiled code knows it by),
    combined by dg arithmetic in i64 (f64 where the expression has fractions)."""
    if not is_size(value):
        return em.b.full(shape=tuple(shape), dtype=dtype, value=float(value))
    return em.b.broadcast_to(cast(em, _size_tensor(em, value), dtype), tuple(shape))


def scalar_like(em: Emit, x: ir.Value, value: Any) -> ir.Value:
    """`value` (a number or a symbolic size) as a tensor like `x`."""
    if is_size(value):
        return size_value(em, value, spec(x).dtype, spec(x).shape)
    return full_as(em, x, float(value))


def broadcast_shapes(em: Emit, *shapes: Sequence[Any]) -> list[Any]:
    """torch.broadcast_shapes, for symbolic sizes too (a size broadcasts where it is
    provably 1; sizes that only their values could tell apart are Unsupported)."""
    if all(isinstance(d, int) for shape in shapes for d in shape):
        return list(torch.broadcast_shapes(*shapes))
    rank = max((len(shape) for shape in shapes), default=0)
    out = []
    for k in range(rank):
        sizes = [shape[len(shape) - rank + k] for shape in shapes if len(shape) - rank + k >= 0]
        kept = [d for d in sizes if not known(em, equal_sizes(d, 1))]
        size = kept[0] if kept else 1
        for d in kept[1:]:
            if not decided(em, equal_sizes(d, size), "a broadcast"):
                raise Unsupported(f"shapes {[list(s) for s in shapes]} do not broadcast")
        out.append(size)
    return out


def equal_sizes(a: Any, b: Any) -> Any:
    """The condition a == b on sizes (Python's == compares symbolic ones as written)."""
    from ...dialects.core import equal
    return equal(a, b)


def _size_tensor(em: Emit, e: Any) -> ir.Value:
    """0-d i64 (or f64) tensor of the value of sympy expression `e` of sizes."""
    import sympy

    b = em.b
    if e.is_Integer:
        return b.full(shape=(), dtype="i64", value=float(int(e)))
    if e.is_Number:
        return b.full(shape=(), dtype="f64", value=float(e))
    if e.is_Symbol:
        return b.reduce_sum(b.full(shape=(e,), dtype="i64", value=1.0), dims=[0])

    def common(values: list[ir.Value]) -> list[ir.Value]:
        dtype = "f64" if any(spec(v).dtype == "f64" for v in values) else "i64"
        return [cast(em, v, dtype) for v in values]

    def f64(v: Any) -> ir.Value:
        return cast(em, _size_tensor(em, v), "f64")

    if isinstance(e, (sympy.Add, sympy.Mul, sympy.Max, sympy.Min)):
        parts = common([_size_tensor(em, a) for a in e.args])
        op = {sympy.Add: "add", sympy.Mul: "mul", sympy.Max: "max", sympy.Min: "min"}[e.func]
        result = parts[0]
        for p in parts[1:]:
            result = b.create(op, [result, p])
        return result
    if isinstance(e, sympy.Pow):
        base, exponent = e.args
        if exponent.is_Integer and 0 < exponent <= 8:
            x = _size_tensor(em, base)
            result = x
            for _ in range(int(exponent) - 1):
                result = b.mul(result, x)
            return result
        if exponent == -1:
            return b.reciprocal(f64(base))
        if exponent.is_Number:  # a scale t ** -0.5: pow, as Python's float power
            return b.pow(f64(base), b.full(shape=(), dtype="f64", value=float(exponent)))
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        rounded = (b.floor if isinstance(e, sympy.floor) else b.ceil)(f64(e.args[0]))
        return b.convert(rounded, dtype="i64")
    if isinstance(e, sympy.Mod):  # a - m floor(a / m), as sympy's (and Python's) %
        a, m = (f64(x) for x in e.args)
        r = b.sub(a, b.mul(m, b.floor(b.div(a, m))))
        return b.convert(r, dtype="i64") if e.is_integer else r
    from ..symbolic import NotExpressible
    raise NotExpressible(f"the value {e} of sizes ({type(e).__name__}) as a tensor")


# ------------------------------------------------------------------ shared helpers
_BOOL_ARITH = {"add": "or", "mul": "and", "max": "or", "min": "and"}


def slice_dim(em: Emit, x: ir.Value, dim: int, start: int, end: int, step: int = 1) -> ir.Value:
    s = spec(x)
    starts = [0] * s.rank
    limits = list(s.shape)
    strides = [1] * s.rank
    starts[dim], limits[dim], strides[dim] = start, end, step
    # nothing to read (a symbolic slice that may be empty reads none of its operand then)
    if known(em, end <= start) is True:
        shape = list(s.shape)
        shape[dim] = 0
        return em.b.full(shape=shape, dtype=s.dtype, value=0.0)
    if starts == [0] * s.rank and limits == list(s.shape) and step == 1:
        return x
    return em.b.slice(x, start=starts, limit=limits, stride=strides)


def _clip(em: Emit, x: ir.Value, lo: ir.Value | None, hi: ir.Value | None,
          at_bounds: bool) -> ir.Value:
    """`x` limited to [lo, hi] by selects, which pass the gradient where `x` is kept:
    at the bounds too if `at_bounds` (clamp), else not (relu, hardtanh). dg.max/min
    would split it at a tie, as torch.maximum does (relu's gradient at 0 would be 0.5).
    A NaN `x` is kept (its comparisons are false)."""
    below, above = ("lt", "gt") if at_bounds else ("le", "ge")
    y = x
    if lo is not None:
        y = em.b.select(em.b.compare(y, lo, direction=below), lo, y)
    if hi is not None:  # compares y: with lo > hi, hi wins (min(max(x, lo), hi))
        y = em.b.select(em.b.compare(y, hi, direction=above), hi, y)
    return y


def _running_sum(em: Emit, x: ir.Value, d: int) -> ir.Value:
    """Inclusive prefix sums along dim d: one dg.scan."""
    return em.b.scan(x, dim=d, combiner="add", reverse=0)[0]

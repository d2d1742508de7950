"""Python builders for dg ops: `b.exp(x)`, `b.reduce_sum(x, dims=[1])`, ...

Every op in the table is reachable as a method of `Builder`; result types are
inferred by the op's shape rule, so a builder call that would produce invalid
IR raises `ShapeError` naming the op instead.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from mlir import ir

from .core import OPS, ShapeError, attrs_of, encode_attrs, lookup
from .region_ops import create_fusion, create_fusion_yield
from .types import TensorSpec, from_torch_dtype
from .lazy_torch import torch


def spec(v: ir.Value) -> TensorSpec:
    return TensorSpec.from_mlir(v.type)


def recreate(op: ir.Operation, operands: Sequence[ir.Value],
             result_types: Sequence[ir.Type] | None = None) -> ir.Operation:
    """A copy of the region-less `op` at the insertion point, reading `operands` (and
    with `result_types`, by default `op`'s): passes clone ops this way to move,
    duplicate or re-shape them."""
    return ir.Operation.create(
        op.name, results=list(result_types) if result_types is not None
        else [r.type for r in op.results], operands=list(operands),
        attributes={name: op.attributes[name] for name in op.attributes}, loc=op.location)


def erase_if_unused(op: ir.Operation) -> None:
    """Erase dg op `op` if nothing reads it, then its producers that become unread.

    The ops to erase are all found first, readers before producers, and erased after:
    erasing while walking reached a producer twice (`x * x`, or a producer also read by
    another erased producer) and touched it after erasing it."""
    dead: list[ir.Operation] = []

    def unread(o: ir.Operation) -> bool:
        return all(any(u.owner.operation == d for d in dead) for r in o.results for u in r.uses)

    stack = [op]
    while stack:
        o = stack.pop()
        if not o.name.startswith("dg.") or any(o == d for d in dead) or not unread(o):
            continue
        dead.append(o)
        stack.extend(x.owner.operation for x in o.operands if not isinstance(x.owner, ir.Block))
    for o in dead:
        o.erase()


def erase_dead(block: ir.Block) -> None:
    """Erase the dg ops of `block` nothing reads (last first, so chains go whole)."""
    for op in reversed([o.operation for o in block.operations]):
        if op.name.startswith("dg.") and all(len(list(r.uses)) == 0 for r in op.results):
            op.erase()


def infer(name: str, operands: Sequence[ir.Value], attrs: dict[str, Any],
          hint: list[TensorSpec] | None) -> list[TensorSpec]:
    """Result specs of dg op `name` (raises ShapeError)."""
    d = lookup(name)
    missing = [a for a in d.attrs if a not in attrs]
    if missing:
        raise ShapeError(f"{d.full_name} is missing attribute(s) {missing}")
    return d.shape([spec(v) for v in operands], attrs, hint, op=d.name)


class Builder:
    """Emits dg ops at the current `ir.InsertionPoint`.

    Keyword arguments named like the op's attributes become attributes;
    `shape=` and `dtype=` give the result type where it cannot be inferred
    (reshape, broadcast_in_dim, convert, full, iota, random ops).
    """

    def __init__(self, loc: ir.Location | None = None) -> None:
        self.loc = loc

    def create(self, name: str, operands: Sequence[ir.Value] = (), *,
               shape: Sequence[int] | None = None, dtype: str | None = None,
               result_types: Sequence[TensorSpec] | None = None, **attrs: Any) -> Any:
        d = lookup(name)
        unknown = set(attrs) - set(d.attrs)
        if unknown:
            raise TypeError(f"{d.full_name} has no attribute(s) {sorted(unknown)}")
        hint = list(result_types) if result_types is not None else None
        if hint is None and (shape is not None or dtype is not None):
            base = spec(operands[0]) if operands else None
            hint = [TensorSpec(tuple(shape) if shape is not None else base.shape,
                               dtype if dtype is not None else base.dtype)]
        results = infer(name, operands, attrs, hint)
        op = ir.Operation.create(
            d.full_name, results=[r.to_mlir() for r in results], operands=list(operands),
            attributes=encode_attrs(d, attrs),
            loc=self.loc)
        return op.results[0] if len(d.results) == 1 and not d.results[0].startswith("*") \
            else list(op.results)

    def __getattr__(self, name: str):
        if name in OPS:
            return lambda *operands, **kw: self.create(name, operands, **kw)
        raise AttributeError(f"Builder has no op {name!r}")

    # ---- conveniences over the raw ops
    def constant(self, value: Any, dtype: str | None = None) -> ir.Value:
        """A dense literal from a tensor, array or Python scalar."""
        t = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value))
        dt = dtype or from_torch_dtype(t.dtype)
        if dt == "bf16":  # numpy has no bfloat16: an f32 literal converted in IR
            return self.convert(self.constant(t.float(), "f32"), dtype="bf16")
        arr = t.detach().cpu().numpy()
        spec_ = TensorSpec(tuple(t.shape), dt)
        if dt == "i1":
            attr = ir.DenseElementsAttr.get(np.packbits(arr.astype(bool).ravel(), bitorder="little"),
                                            type=spec_.to_mlir())
        else:
            np_dt = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8,
                     "i16": np.int16, "i32": np.int32, "i64": np.int64}[dt]
            attr = ir.DenseElementsAttr.get(np.ascontiguousarray(arr.astype(np_dt)),
                                            type=spec_.to_mlir())
        return self.create("constant", (), value=attr)

    def transpose(self, x: ir.Value, perm: Sequence[int]) -> ir.Value:
        """dg.transpose, composed with a transpose that produced `x`: a VJP transposes
        back what its forward transposed (a linear layer's `W^T^T`), and two transposes
        would become a copy kernel where none is needed."""
        perm = [int(p) for p in perm]
        owner = x.owner
        if not isinstance(owner, ir.Block) and owner.operation.name == "dg.transpose":
            inner = list(attrs_of(owner.operation)["perm"])
            x, perm = owner.operation.operands[0], [inner[p] for p in perm]
        if perm == list(range(len(perm))):
            return x
        return self.create("transpose", (x,), perm=perm)

    def full_like(self, x: ir.Value, value: float) -> ir.Value:
        s = spec(x)
        return self.full(shape=s.shape, dtype=s.dtype, value=value)

    def broadcast_to(self, x: ir.Value, shape: Sequence[int]) -> ir.Value:
        """numpy-style broadcast (trailing dims aligned) as one broadcast_in_dim."""
        s = spec(x)
        if s.shape == tuple(shape):
            return x
        offset = len(shape) - s.rank
        if offset < 0:
            raise ShapeError(f"cannot broadcast {s} to {list(shape)}")
        return self.broadcast_in_dim(x, shape=shape, dims=list(range(offset, len(shape))))

    def concat(self, values: Sequence[ir.Value], dim: int) -> ir.Value:
        """Concatenate any number of tensors as a balanced tree of binary dg.concatenate
        (each element is copied log2(len) times, not len times as in a chain)."""
        if len(values) == 1:
            return values[0]
        half = len(values) // 2
        return self.concatenate(self.concat(values[:half], dim), self.concat(values[half:], dim),
                                dim=dim)

    def fusion(self, result_types: Sequence[TensorSpec]) -> ir.Operation:
        """An empty fusion region (see region_ops); fill its block, then `fusion_yield`."""
        return create_fusion(result_types, self.loc)

    def fusion_yield(self, values: Sequence[ir.Value]) -> ir.Operation:
        return create_fusion_yield(values, self.loc)

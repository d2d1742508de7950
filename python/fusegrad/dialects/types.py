"""Tensor specs: the (shape, dtype) pairs that shape rules reason about.

Shape rules, the importer and the runtime all speak `TensorSpec`, a plain
Python value, so they can be used and tested without building IR.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable, Sequence

from mlir import ir

from ..runtime import abi
from .lazy_torch import torch

# dtype name -> MLIR element type factory; torch dtype, size and kind come from the
# runtime's table (runtime/abi.py), which compiled code and the runtime share
_ELEMENT_TYPES = {
    "f16": lambda: ir.F16Type.get(),
    "bf16": lambda: ir.BF16Type.get(),
    "f32": lambda: ir.F32Type.get(),
    "f64": lambda: ir.F64Type.get(),
    "i1": lambda: ir.IntegerType.get_signless(1),
    "i8": lambda: ir.IntegerType.get_signless(8),
    "i16": lambda: ir.IntegerType.get_signless(16),
    "i32": lambda: ir.IntegerType.get_signless(32),
    "i64": lambda: ir.IntegerType.get_signless(64),
}
DTYPES = tuple(abi.DTYPES)


def is_float(dtype: str) -> bool:
    return abi.DTYPES[dtype][2]


def torch_dtype(dtype: str) -> torch.dtype:
    return abi.torch_dtype(dtype)


def from_torch_dtype(dtype: torch.dtype) -> str:
    name = abi.dg_dtype(dtype)
    if name is None:
        raise TypeError(f"fusegrad has no dg dtype for torch dtype {dtype}; supported: "
                        f"{sorted(str(abi.torch_dtype(d)) for d in DTYPES)}")
    return name


def element_type(dtype: str) -> ir.Type:
    return _ELEMENT_TYPES[dtype]()


# element types the bindings hand back as their own classes: no printing to name them
# (str() of a type is most of a TensorSpec.from_mlir, called ~10^5 times by dg-fuse)
_FLOAT_CLASSES = {ir.F16Type: "f16", ir.BF16Type: "bf16", ir.F32Type: "f32", ir.F64Type: "f64"}


def dtype_of(element: ir.Type) -> str:
    name = _FLOAT_CLASSES.get(type(element))
    if name is not None:
        return name
    if isinstance(element, ir.IntegerType):
        # ui8/si8 are not dg's i8: dg integers are signless
        name = f"i{element.width}" if element.is_signless else str(element)
    else:
        name = str(element)
    if name not in abi.DTYPES:
        raise TypeError(f"unsupported element type {element}")
    return name


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += c == "("
        depth -= c == ")"
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


@functools.lru_cache(maxsize=4096)
def symbolic_dims(encoding: str) -> tuple[abi.Dim, ...]:
    """The sizes of a tensor type's `?` dims, from its encoding (`"s0, 4*s1"`)."""
    return tuple(abi.parse_dim(p.strip()) for p in _split_top_level(encoding))


def dims_encoding(shape: Iterable[abi.Dim]) -> str:
    return ", ".join(abi.format_dim(d) for d in shape if abi.is_symbolic(d))


def tensor_type(shape: Sequence[abi.Dim], element: ir.Type) -> ir.RankedTensorType:
    """The tensor type of `shape`: symbolic dims are `?`, named by the encoding."""
    shape = [abi.as_dim(d) for d in shape]
    if all(isinstance(d, int) for d in shape):
        return ir.RankedTensorType.get(list(shape), element)
    dynamic = ir.ShapedType.get_dynamic_size()
    return ir.RankedTensorType.get([d if isinstance(d, int) else dynamic for d in shape],
                                   element, encoding=ir.StringAttr.get(dims_encoding(shape)))


# module attribute: a typical value of each symbolic size (`{s0 = 128 : i64}`), from the
# capture's example inputs; cost models (dg-remat's saved bytes) weigh sizes by it
SIZE_HINTS_ATTR = "dg.size_hints"
# the hint of a symbol the module gives none for
DEFAULT_SIZE_HINT = 64


def size_hints(op: ir.Operation) -> dict[str, int]:
    """The size hints of the module holding `op` (or `op` itself)."""
    while op is not None and op.name != "builtin.module":
        op = op.parent
    if op is None or SIZE_HINTS_ATTR not in op.attributes:
        return {}
    attr = ir.DictAttr(op.attributes[SIZE_HINTS_ATTR])
    return {attr[i].name: ir.IntegerAttr(attr[i].attr).value for i in range(len(attr))}


@dataclass(frozen=True)
class TensorSpec(abi.TensorSig):
    """A tensor type: shape and dtype name (`f32`, `i64`, `i1`, ...); the runtime's
    tensor signature with the compiler's checks and MLIR conversions.

    A symbolic dim (`abi.Dim`) is a `?` in the MLIR type, whose encoding names the
    sizes of its `?` dims in order: `tensor<?x128x?xf32, "s0, 4*s1">`. Two values of one
    symbolic shape have one type, so the ops' same-type constraints and the shape
    rules' comparisons check symbolic sizes as they check static ones."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in abi.DTYPES:
            raise TypeError(f"unknown dtype {self.dtype!r}; expected one of {DTYPES}")

    def with_shape(self, shape: Iterable[int]) -> "TensorSpec":
        return TensorSpec(tuple(shape), self.dtype)

    def hinted(self, hints: dict[str, int]) -> "TensorSpec":
        """This spec at the size hints (DEFAULT_SIZE_HINT for a symbol without one)."""
        if self.is_static:
            return self
        sizes = {str(s): hints.get(str(s), DEFAULT_SIZE_HINT)
                 for d in self.shape if abi.is_symbolic(d) for s in d.free_symbols}
        return self.with_shape(abi.eval_dim(d, sizes) for d in self.shape)

    def with_dtype(self, dtype: str) -> "TensorSpec":
        return TensorSpec(self.shape, dtype)

    def to_mlir(self) -> ir.RankedTensorType:
        return tensor_type(self.shape, element_type(self.dtype))

    @staticmethod
    def from_mlir(t: ir.Type) -> "TensorSpec":
        if not isinstance(t, ir.RankedTensorType):
            raise TypeError(f"expected a ranked tensor, got {t}")
        if t.has_static_shape:
            return TensorSpec(tuple(t.shape), dtype_of(t.element_type))
        encoding = t.encoding
        if encoding is None or not isinstance(encoding, ir.StringAttr):
            raise TypeError(f"{t}: a dg tensor's `?` dims need their sizes as the type's "
                            'encoding, e.g. tensor<?x128xf32, "s0">')
        try:
            sizes = list(symbolic_dims(encoding.value))
        except ValueError as e:
            raise TypeError(f"{t}: {e}") from None
        dims = list(t.shape)
        dynamic = [i for i, d in enumerate(dims) if ir.ShapedType.is_dynamic_size(d)]
        if len(sizes) != len(dynamic):
            raise TypeError(f"{t}: {len(sizes)} sizes in the encoding for {len(dynamic)} "
                            "`?` dims")
        for i, size in zip(dynamic, sizes):
            dims[i] = size
        return TensorSpec(tuple(dims), dtype_of(t.element_type))

    @staticmethod
    def of(t: torch.Tensor) -> "TensorSpec":
        return TensorSpec(tuple(t.shape), from_torch_dtype(t.dtype))

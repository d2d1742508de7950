"""Tensor specs: the (shape, dtype) pairs that shape rules reason about.

Shape rules, the importer and the runtime all speak `TensorSpec`, a plain
Python value, so they can be used and tested without building IR.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable

from mlir import ir

from .lazy_torch import torch

# dtype name -> (MLIR element type factory, torch dtype name, is_float, bytes per element)
_DTYPES = {
    "f16": (lambda: ir.F16Type.get(), "float16", True, 2),
    "bf16": (lambda: ir.BF16Type.get(), "bfloat16", True, 2),
    "f32": (lambda: ir.F32Type.get(), "float32", True, 4),
    "f64": (lambda: ir.F64Type.get(), "float64", True, 8),
    "i1": (lambda: ir.IntegerType.get_signless(1), "bool", False, 1),
    "i8": (lambda: ir.IntegerType.get_signless(8), "int8", False, 1),
    "i16": (lambda: ir.IntegerType.get_signless(16), "int16", False, 2),
    "i32": (lambda: ir.IntegerType.get_signless(32), "int32", False, 4),
    "i64": (lambda: ir.IntegerType.get_signless(64), "int64", False, 8),
}
DTYPES = tuple(_DTYPES)


@functools.cache
def _from_torch() -> dict:
    return {getattr(torch, v[1]): k for k, v in _DTYPES.items()}


def is_float(dtype: str) -> bool:
    return _DTYPES[dtype][2]


def torch_dtype(dtype: str) -> torch.dtype:
    return getattr(torch, _DTYPES[dtype][1])


def from_torch_dtype(dtype: torch.dtype) -> str:
    try:
        return _from_torch()[dtype]
    except KeyError:
        raise TypeError(f"fusegrad has no dg dtype for torch dtype {dtype}; "
                        f"supported: {sorted(str(d) for d in _from_torch())}") from None


def element_type(dtype: str) -> ir.Type:
    return _DTYPES[dtype][0]()


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
    if name not in _DTYPES:
        raise TypeError(f"unsupported element type {element}")
    return name


@dataclass(frozen=True)
class TensorSpec:
    """A static tensor type: shape and dtype name (`f32`, `i64`, `i1`, ...)."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        if self.dtype not in _DTYPES:
            raise TypeError(f"unknown dtype {self.dtype!r}; expected one of {DTYPES}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * _DTYPES[self.dtype][3]

    def with_shape(self, shape: Iterable[int]) -> "TensorSpec":
        return TensorSpec(tuple(shape), self.dtype)

    def with_dtype(self, dtype: str) -> "TensorSpec":
        return TensorSpec(self.shape, dtype)

    def to_mlir(self) -> ir.RankedTensorType:
        return ir.RankedTensorType.get(list(self.shape), element_type(self.dtype))

    @staticmethod
    def from_mlir(t: ir.Type) -> "TensorSpec":
        if not isinstance(t, ir.RankedTensorType) or not t.has_static_shape:
            raise TypeError(f"expected a statically shaped ranked tensor, got {t}")
        return TensorSpec(tuple(t.shape), dtype_of(t.element_type))

    @staticmethod
    def of(t: torch.Tensor) -> "TensorSpec":
        return TensorSpec(tuple(t.shape), from_torch_dtype(t.dtype))

    def __str__(self) -> str:
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + self.dtype + ">"

"""Tensor specs: the (shape, dtype) pairs that shape rules reason about.

Shape rules, the importer and the runtime all speak `TensorSpec`, a plain
Python value, so they can be used and tested without building IR.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

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


@dataclass(frozen=True)
class TensorSpec(abi.TensorSig):
    """A static tensor type: shape and dtype name (`f32`, `i64`, `i1`, ...); the runtime's
    tensor signature with the compiler's checks and MLIR conversions."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dtype not in abi.DTYPES:
            raise TypeError(f"unknown dtype {self.dtype!r}; expected one of {DTYPES}")

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

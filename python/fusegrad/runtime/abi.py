"""What the compiler and both runtimes agree on: dtype names and tensor signatures.

Compiled code names element types by dg's dtype names (`f32`, `bf16`, `i1`, ...); a
library's metadata, a launch plan and an exported artifact describe each entry's
tensors as `TensorSig`s (shape, dtype name). The compiler's `dialects.types` builds on
this table (adding MLIR types); this module imports neither MLIR nor torch at import.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

# dg dtype name -> (torch dtype name, bytes per element, is a float)
DTYPES: dict[str, tuple[str, int, bool]] = {
    "f16": ("float16", 2, True),
    "bf16": ("bfloat16", 2, True),
    "f32": ("float32", 4, True),
    "f64": ("float64", 8, True),
    "i1": ("bool", 1, False),
    "i8": ("int8", 1, False),
    "i16": ("int16", 2, False),
    "i32": ("int32", 4, False),
    "i64": ("int64", 8, False),
}


@functools.cache
def _torch_dtypes() -> dict[str, Any]:
    import torch

    return {name: getattr(torch, spec[0]) for name, spec in DTYPES.items()}


@functools.cache
def _dg_dtypes() -> dict[Any, str]:
    return {t: name for name, t in _torch_dtypes().items()}


def torch_dtype(name: str) -> Any:
    """The torch dtype of dg dtype `name` (KeyError for an unknown name)."""
    return _torch_dtypes()[name]


def dg_dtype(dtype: Any) -> str | None:
    """The dg dtype name of a torch dtype, or None when compiled code has none."""
    return _dg_dtypes().get(dtype)


def itemsize(name: str) -> int:
    return DTYPES[name][1]


@dataclass(frozen=True)
class TensorSig:
    """A tensor's signature as compiled code sees it: shape and dg dtype name. The
    compiler's `dialects.types.TensorSpec` is one, with MLIR conversions added."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

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
        return self.numel * itemsize(self.dtype)

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TensorSig":
        return cls(tuple(data["shape"]), data["dtype"])

    def __str__(self) -> str:
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + self.dtype + ">"

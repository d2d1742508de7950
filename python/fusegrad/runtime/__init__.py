"""Executing compiled code: the CPU runtime (`cpu.CpuModule`, from the JIT or from a
shared library, `cpu_library`), the CUDA runtime (`cuda`), and exported artifacts
(`load`, `exported`). None of it needs MLIR.

Submodules are imported on first use, so `import fusegrad.runtime` stays cheap.
"""
from __future__ import annotations

from typing import Any

__all__ = ["CpuModule", "load"]


def __getattr__(name: str) -> Any:
    if name == "CpuModule":
        from .cpu import CpuModule
        return CpuModule
    if name == "load":
        from .exported import load
        return load
    raise AttributeError(f"module 'fusegrad.runtime' has no attribute {name!r}")

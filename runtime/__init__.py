"""Executing compiled code: the CPU runtime (`cpu.CpuModule`, from the JIT or from a
shared library, `cpu_library`) and the CUDA runtime (`cuda`).

Submodules are imported on first use, so `import fusegrad.runtime` stays cheap.
"""
from __future__ import annotations

from typing import Any

__all__ = ["CpuModule"]


def __getattr__(name: str) -> Any:
    if name == "CpuModule":
        from .cpu import CpuModule
        return CpuModule
    raise AttributeError(f"module 'fusegrad.runtime' has no attribute {name!r}")

"""Executing compiled code: the CPU runtime (`cpu.CpuModule`, over code the compiler
made in this process or a shared library, `cpu_library`), the CUDA runtime (`cuda`,
`cuda_graphs`), exported artifacts (`load`, `exported`), and what all of them share with
the compiler (`abi`: dtype names, tensor signatures). It loads, checks and launches; it
imports neither MLIR nor any part of the compiler (test_layering.py checks).

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

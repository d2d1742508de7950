"""dg on tensors -> code for this CPU: `compile_cpu`.

Runs the CPU lowering (`pipelines.CPU_LINALG`, `BUFFERIZE`, the LLVM stage for this
host), then turns the LLVM dialect into machine code: with LLVM's tools in parallel
processes for big modules (`llvm/native_code.py`), else with MLIR's ExecutionEngine
(`llvm/jit.py`). The result is a `runtime.cpu.CpuModule`.
"""
from __future__ import annotations

import functools
import logging
import os
import tempfile
import time
from typing import Callable

from mlir import ir

from ...dialects.types import TensorSpec
from ...pass_manager import run_pipeline
from ...pipelines import BUFFERIZE, CPU_LINALG, cpu_llvm_pipeline
from ...runtime import cpu_library
from ..common.entries import entry_signatures, forward_arguments
from .llvm import native_code
from .llvm.jit import jit_module, module_facts

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1)
def _host_has_avx512f() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split(":", 1)[1].split()
    except OSError:
        pass
    return False


def host_llvm_pipeline() -> str:
    """The CPU_LLVM pipeline for the code the JIT makes for this host: exp scales with
    `llvm.intr.ldexp` where that is one AVX-512 instruction (dg-expand-math)."""
    return cpu_llvm_pipeline(ldexp=_host_has_avx512f())


def _entries(module: ir.Module) -> dict[str, tuple[list[TensorSpec], list[TensorSpec]]]:
    """The entries, each given a C interface for the runtime."""
    try:
        entries = entry_signatures(module)
    except TypeError as e:
        raise TypeError(f"compile_cpu: {e}") from None
    for op in module.body.operations:
        op = op.operation
        if op.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value in entries:
            op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    return entries


def compile_cpu(module: ir.Module, library: str | None = None,
                on_stage: Callable[[str, ir.Module], None] | None = None):
    """Lower `module` (dg on tensors) in place to LLVM and compile it for this host.

    Returns a `fusegrad.runtime.cpu.CpuModule` with one entry per public function.
    With `library`, the code is also that shared library (for `runtime.cpu_library`).
    `on_stage(name, module)` sees the module after each of the three sub-pipelines
    ("linalg", "bufferized", "llvm"; FUSEGRAD_DUMP writes them). LLVM runs in
    parallel processes (`native_code`) for big modules where its tools and a C
    compiler are found, else in the ExecutionEngine (`FUSEGRAD_CPU_CODEGEN=engine`
    always asks for it).
    """
    t0 = time.perf_counter()
    with module.context:
        entries = _entries(module)
        forwarded = forward_arguments(module, entries)
        for stage, pipeline in (("linalg", CPU_LINALG), ("bufferized", BUFFERIZE),
                                ("llvm", host_llvm_pipeline())):
            run_pipeline(module, pipeline)
            if on_stage is not None:
                on_stage(stage, module)
    t1 = time.perf_counter()
    tools = native_code.toolchain()
    with tempfile.TemporaryDirectory(prefix="fusegrad-lib-") as tmp:
        target = library or os.path.join(tmp, cpu_library.LIBRARY)
        parts = None
        if tools is not None:
            try:
                parts = native_code.build_library(module, target, tools)
            except native_code.ToolError as e:
                log.warning("compiling with LLVM's tools failed, using the ExecutionEngine "
                            "instead: %s", e)
        if parts:  # a library removed once loaded stays mapped
            cm = cpu_library.load(target, entries, forwarded, *module_facts(module))
            how = f"LLVM tools, {parts} parts"
        else:
            cm = jit_module(module, entries, forwarded=forwarded, library=library)
            how = "ExecutionEngine"
    log.debug("compile_cpu: %d entries, MLIR %.1f ms, LLVM %.1f ms (%s)", len(entries),
              (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3, how)
    return cm

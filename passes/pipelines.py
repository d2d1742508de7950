"""Target pipelines: dg on tensors -> LLVM dialect (CPU), and `compile_cpu`.

The CPU pipeline follows the checked recipe in `shared/notes/mlir-lowering-facts.md`
section 5: lower dg, fuse elementwise generics, bufferize across function
boundaries with identity layouts, turn results into out-params (the runtime
allocates outputs as torch tensors), free temporaries, then loops -> LLVM.
"""
from __future__ import annotations

import functools
import logging
import os
import tempfile
import time
from typing import Callable

from mlir import ir
from mlir.dialects import func

from ..dialects.types import TensorSpec
from . import (attention_library, blas, collapse_dims, conv_library, copy_elision,  # noqa: F401
               cpu_kernels, function_boundary, function_dedup, gomp, half_memory,
               internal_linkage, kernel_params, loop_outlining, math_approx, native_code,
               prefetch, result_copies, strided_copy, widen_bool, workspace)  # (register passes)
from .cpu_kernels import ROW_TEMP_MAX_BYTES
from .function_boundary import is_public
from .registry import register_pipeline, run_pipeline

log = logging.getLogger("fusegrad.passes.pipelines")

# dg -> linalg on tensors, fused; convolution gradients and attention become calls of
# functions that dg-conv-to-torch / dg-attention-to-torch turn into PyTorch's kernels
LINALG_PIPELINE = ",".join([
    "dg-outline-conv-grads",
    "dg-outline-conv-nhwc",
    "dg-outline-attention",
    f"dg-lower-to-linalg{{row-bytes-max={ROW_TEMP_MAX_BYTES}}}",
    "canonicalize",
    "cse",
])

# tensors -> memrefs; arguments are never written; outputs become out-params (computed
# in place, not copied there); temporaries are freed.
BUFFERIZE_PIPELINE = ",".join([
    "dg-readonly-arguments",
    "dg-split-shared-fills",
    "dg-split-shared-empties",
    "eliminate-empty-tensors",
    "one-shot-bufferize{bufferize-function-boundaries=1 "
    "function-boundary-type-conversion=identity-layout-map}",
    "canonicalize", "cse", "canonicalize",
    "dg-distinct-result-buffers",
    "buffer-results-to-out-params{hoist-static-allocs=1 modify-public-functions=1}",
    "canonicalize", "cse",
    "buffer-deallocation-pipeline",
    "dg-results-in-place",
    "canonicalize",
])

# memrefs + loops -> LLVM dialect. No MLIR runtime library is needed: strided
# copies become loops, i1 is stored as i8, bf16/f16 math runs in f32 (bf16
# conversions expand to integer ops; f16 ones call libgcc_s, see runtime.cpu),
# ipowi becomes a function, f32 transcendentals become inline polynomials
# (dg-expand-math), and the rest without an LLVM intrinsic (f64 erf) call libm.
# The only vector ops are dg-cpu-kernels' tile transposes (1-D loads, shuffles, stores).
# A part copied whole into a concatenation is computed in place (dg-elide-copies);
# loops streaming through arrays prefetch them ahead (dg-prefetch-streams).
# An entry's temporaries live in one workspace argument the runtime keeps per thread
# (dg-plan-workspace).
# Kernels, BLAS/convolution calls and threads: docs/ARCHITECTURE.md.
def llvm_pipeline(ldexp: bool = False) -> str:
    """`ldexp`: exp scales by llvm.intr.ldexp (for AVX-512 targets, see dg-expand-math)."""
    return ",".join([
        "dg-elide-copies",
        "dg-matmul-to-blas",
        "dg-conv-to-torch",
        "dg-attention-to-torch",
        "dg-strided-copy-to-linalg",
        "dg-collapse-reduction-dims",
        "dg-cpu-kernels",
        "func.func(convert-linalg-to-loops)",
        "dg-outline-entry-loops",
        "dg-prefetch-streams",
        "dg-dedup-functions",
        "dg-widen-bool-memrefs",
        "dg-plan-workspace",
        "lower-affine",
        "func.func(math-extend-to-supported-types{target-type=f32})",
        "arith-emulate-unsupported-floats{source-types=bf16,f16 target-type=f32}",
        "arith-expand{include-bf16=1}",
        "dg-expand-math{ldexp=1}" if ldexp else "dg-expand-math",
        "convert-math-to-funcs",
        "convert-scf-to-cf",
        "expand-strided-metadata",
        "lower-affine",
        "convert-vector-to-llvm",
        "finalize-memref-to-llvm",
        "convert-math-to-llvm",
        "convert-math-to-libm",
        "convert-arith-to-llvm",
        "convert-index-to-llvm",
        "convert-ub-to-llvm",
        "convert-func-to-llvm",
        "dg-noalias-kernel-args",
        "convert-cf-to-llvm",
        "reconcile-unrealized-casts",
        "dg-half-loads-as-i16",
        "canonicalize",
        "dg-prune-kernel-params",
        "dg-gomp-launchers",
        "dg-internal-kernels",
    ])


LLVM_PIPELINE = llvm_pipeline()

CPU_PIPELINE = ",".join([LINALG_PIPELINE, BUFFERIZE_PIPELINE, LLVM_PIPELINE])


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
    """LLVM_PIPELINE for the code the JIT makes for this host: exp scales with
    `llvm.intr.ldexp` where that is one AVX-512 instruction (dg-expand-math)."""
    return llvm_pipeline(ldexp=_host_has_avx512f())


register_pipeline("dg-cpu-linalg", LINALG_PIPELINE, "dg -> fused linalg on tensors")
register_pipeline("dg-cpu-bufferize", BUFFERIZE_PIPELINE,
                  "tensors -> memrefs, results -> out-params, temporaries freed")
register_pipeline("dg-cpu-llvm", LLVM_PIPELINE, "memrefs and loops -> LLVM dialect")
register_pipeline("dg-lower-to-llvm", CPU_PIPELINE,
                  "the whole CPU lowering: dg-cpu-linalg, dg-cpu-bufferize, dg-cpu-llvm")


def entry_signatures(module: ir.Module) -> dict[str, tuple[list[TensorSpec], list[TensorSpec]]]:
    """Public defined functions -> (input specs, output specs), on tensors (before lowering).
    Raises TypeError for an entry that is not statically shaped tensors in and out."""
    entries = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or not op.regions[0].blocks:
            continue
        if not is_public(op):
            continue
        ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        name = ir.StringAttr(op.attributes["sym_name"]).value
        try:
            entries[name] = ([TensorSpec.from_mlir(t) for t in ftype.inputs],
                             [TensorSpec.from_mlir(t) for t in ftype.results])
        except TypeError as e:
            raise TypeError(f"@{name} at {op.location}: {e}; entry functions must take and "
                            "return statically shaped tensors") from None
    return entries


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


def forward_arguments(module: ir.Module, names) -> dict[str, dict[int, int]]:
    """Drop results that are just arguments (a forward returning an input it saves for
    the backward) from the entries: the runtime hands the argument back instead of
    copying it into a fresh buffer. Returns, per entry, result index -> argument index."""
    forwarded: dict[str, dict[int, int]] = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func" or ir.StringAttr(op.attributes["sym_name"]).value not in names:
            continue
        block = op.regions[0].blocks[0]
        ret = block.operations[len(block.operations) - 1].operation
        args = list(block.arguments)
        mapping = {k: args.index(v) for k, v in enumerate(ret.operands) if v in args}
        if not mapping:
            continue
        kept = [v for k, v in enumerate(ret.operands) if k not in mapping]
        with ir.InsertionPoint(ret), ret.location:
            func.ReturnOp(kept)
        ret.erase()
        ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        op.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(ftype.inputs, [v.type for v in kept]))
        forwarded[ir.StringAttr(op.attributes["sym_name"]).value] = mapping
    return forwarded


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
    from ..runtime import cpu_library
    from ..runtime.cpu import jit_module, module_facts

    t0 = time.perf_counter()
    with module.context:
        entries = _entries(module)
        forwarded = forward_arguments(module, entries)
        for stage, pipeline in (("linalg", LINALG_PIPELINE), ("bufferized", BUFFERIZE_PIPELINE),
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

"""Every dg pass, by name, in one table: what `fusegrad-opt --list-passes` prints.

A dg pass is a function `run(module: ir.Operation, **options)` that rewrites the module
in place and raises `PassError` (message + location) to fail. Its options are its
keyword parameters with their defaults: `fuse_pass(module, max_ops=64, row_temps=True)`
is `dg-fuse{max-ops=8 row-temps=0}` in a pipeline. The table below (like MLIR's
Passes.td) says where each pass lives and what it does, in pipeline order within each
room; a pass's module is imported the first time a pipeline names it. Named pipelines
are in `pipelines.py`, pass managers are built by `pass_manager.py`.

The helpers at the end (`functions`, `rewrite_bodies`) are what most passes start from.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from mlir import ir


class PassError(RuntimeError):
    """A pass failed at `location` (None: the whole module)."""

    def __init__(self, message: str, location: ir.Location | None = None) -> None:
        super().__init__(message)
        self.location = location


@dataclass(frozen=True)
class Pass:
    """A dg pass: its name, `where` it is (`module:function`, the module relative to
    `fusegrad` when it starts with a dot), what it does."""

    name: str
    where: str
    description: str

    @property
    def run(self) -> Callable[..., None]:
        return _load(self.where)

    @property
    def options(self) -> dict[str, Any]:
        """Option -> default value: the function's keyword parameters."""
        return _options(self.where)


@functools.lru_cache(maxsize=None)
def _load(where: str) -> Callable[..., None]:
    module, _, function = where.partition(":")
    return getattr(importlib.import_module(module, __package__), function)


@functools.lru_cache(maxsize=None)
def _options(where: str) -> dict[str, Any]:
    params = list(inspect.signature(_load(where)).parameters.values())[1:]
    return {p.name: p.default for p in params}


def _table(*passes: Pass) -> dict[str, Pass]:
    table: dict[str, Pass] = {}
    for p in passes:
        if p.name in table:
            raise ValueError(f"pass {p.name} is in the table twice")
        table[p.name] = p
    return table


PASSES: dict[str, Pass] = _table(
    # the dialect
    Pass("dg-verify", ".dialects.verify:verify_pass",
         "check dg shape, dim and dtype rules"),
    # transforms/autodiff: differentiation and what is saved for the backward
    Pass("dg-autodiff", ".transforms.autodiff.autodiff:autodiff_pass",
         "reverse mode: @f -> @f_fwd (outputs, saved) and @f_bwd (saved, cotangents -> grads);"
         " joint=true emits @f_vjp instead; wrt=0,2 picks the inputs; ct_outputs=1 the outputs"
         " that take a cotangent (the others get none)"),
    Pass("dg-jvp", ".transforms.autodiff.jvp:jvp_pass",
         "forward mode: @f -> @f_jvp(inputs, tangents) -> (outputs, tangents); wrt=0,2 picks "
         "the inputs"),
    Pass("dg-remat", ".transforms.autodiff.remat:remat_pass",
         "choose saved vs recomputed forward values by min-cut (memory-budget: bytes the "
         "forward may save, 0 = minimal)"),
    Pass("dg-drop-cotangents", ".transforms.autodiff.autodiff:drop_cotangents_pass",
         "specialize each backward @f_bwd to zero cotangents for the forward outputs `outputs`"
         " (their arguments go)"),
    Pass("dg-drop-stop-gradients", ".transforms.autodiff.drop_stop_gradients:drop_stop_gradients",
         "after differentiation dg.stop_gradient is the identity and dg.evenly_read its "
         "value: their uses read that operand"),
    # transforms: layout and decompositions
    Pass("dg-channels-last", ".transforms.channels_last:channels_last",
         "f32/f64 dg.conv2d and its gradients -> their NHWC twins, with the ops between them "
         "computing channels-last (saved values stay so between @f_fwd and @f_bwd)"),
    Pass("dg-decompose-attention", ".transforms.decompose_attention:decompose_attention",
         "dg.attention / dg.attention_grad -> their decomposition in dg ops (matmuls and a "
         "softmax), before dg-fuse; keep-library=1 (CUDA) keeps the ops PyTorch's fused "
         "kernels run (f16/bf16/f32 of static sizes)"),
    # transforms/fusion: the rewrites that prepare fusion, then fusion
    Pass("dg-narrow-matmuls", ".transforms.fusion.narrow_matmuls:narrow_matmuls_pass",
         "an f32 matmul of widened bf16/f16 operands whose readers round it back runs on the "
         "16-bit operands (f32 accumulation in the library call)"),
    Pass("dg-matmul-scalars", ".transforms.fusion.matmul_scalars:move_matmul_scalars_pass",
         "a matmul operand scaled by a splat scales the product instead, where pointwise "
         "readers take the scaling for free"),
    Pass("dg-hoist-reshapes", ".transforms.fusion.hoist_reshapes:hoist_reshapes_pass",
         "reshape a pointwise op's operands instead of its result"),
    Pass("dg-sink-reshapes", ".transforms.fusion.sink_reshapes:sink_reshapes_pass",
         "a pointwise op reading reshapes of a fusing op's result computes before the "
         "reshape (it joins that op's region)"),
    Pass("dg-scatter-into-sums", ".transforms.fusion.scatter_into_sums:scatter_into_sums_pass",
         "x + scatter_add(0, idx, src) -> scatter_add(x, idx, src): no temporary of x's size"),
    Pass("dg-sink-gathers", ".transforms.fusion.sink_gathers:sink_gathers_pass",
         "gather from a pointwise op's operands instead of its result"),
    Pass("dg-transposes-to-matmuls", ".transforms.fusion.matmul_transposes:move_transposes_to_matmuls_pass",
         "move transposes of the last two dims through pointwise ops and leading-dim reshapes "
         "to the matmuls that take them as gemm flags"),
    Pass("dg-transpose-matmul-results", ".transforms.fusion.matmul_transposes:transpose_matmul_results_pass",
         "a matmul read only through transposes computes the transposed product"),
    Pass("dg-fuse", ".transforms.fusion.fuse:fuse_pass",
         "group dg ops into fusion regions (one kernel each); row-temps=0 for targets without "
         "stack rows (CUDA): recompute what a row reduction reads"),
    Pass("dg-sink-to-uses", ".transforms.sink_to_uses:sink_to_uses_pass",
         "move each op to just before its first use (a backward's recomputations to their "
         "layer), where that keeps no more bytes alive"),
    # conversion: dg -> linalg
    Pass("dg-size-arguments", ".conversion.sizes:size_arguments_pass",
         "a function using a symbolic size no argument has as a dim takes it as a trailing "
         "index argument (named in dg.size_arguments)"),
    Pass("dg-lower-to-linalg", ".conversion.lower_to_linalg:lower_to_linalg",
         "lower dg ops to linalg/tensor/arith/math on tensors (row-bytes-max > 0: a fusion "
         "region's transcendentals that its reduction and outputs share are evaluated once "
         "into a tensor, for targets that keep such a tensor one row at a time; the CPU "
         "pipeline passes its row-temporary limit)"),
    Pass("dg-drop-size-encodings", ".conversion.sizes:drop_size_encodings_pass",
         "after dg-lower-to-linalg: tensor types drop the encodings naming their ? dims"),
    # codegen/common: both targets
    Pass("dg-keep-functions", ".codegen.common.entries:keep_functions",
         "erase the public functions not named in names=a,b (the entries a compile needs)"),
    Pass("dg-forward-arguments", ".codegen.common.entries:forward_arguments",
         "entries drop the results that are arguments, recorded as dg.forwarded (the "
         "runtime hands those arguments back)"),
    Pass("dg-outline-conv-grads", ".codegen.common.outline:outline_conv_grads",
         "f32/f64 dg.conv2d_input_grad / conv2d_weight_grad -> calls of private functions "
         "tagged for dg-conv-to-torch (PyTorch's convolution_backward on the CPU)"),
    Pass("dg-unfilled-destinations", ".codegen.common.function_boundary:unfilled_destinations",
         "an outlined op's destinations made by a zero fill get an empty tensor (the callee "
         "writes every element)"),
    Pass("dg-readonly-arguments", ".codegen.common.function_boundary:readonly_arguments",
         "mark function arguments bufferization.writable=false (never updated in place)"),
    Pass("dg-split-shared-fills", ".codegen.common.split_shared_fills:split_shared_fills",
         "clone a linalg.fill on tensors for each op that accumulates into it (before "
         "bufferization: no shared zero buffer copied into every reduction)"),
    Pass("dg-split-shared-empties", ".codegen.common.split_shared_fills:split_shared_empties",
         "give each tensor.empty at most `uses-per-empty` users (clones for the rest: "
         "bufferization's analysis is quadratic in the writers of one buffer)"),
    Pass("dg-distinct-result-buffers", ".codegen.common.function_boundary:distinct_result_buffers",
         "copy memrefs returned more than once so each result has its own buffer"),
    Pass("dg-results-in-place", ".codegen.common.results_in_place:results_in_place",
         "a result copied into its out-param at the end is computed in the out-param"),
    Pass("dg-widen-bool-memrefs", ".codegen.common.widen_bool_memrefs:widen_bool_memrefs",
         "store i1 memrefs as i8 (after convert-linalg-to-loops)"),
    # codegen/cpu: entries and library calls (codegen/cpu/library)
    Pass("dg-c-interface", ".codegen.common.entries:c_interface",
         "give each entry a C interface (llvm.emit_c_interface), as the CPU runtime calls it"),
    Pass("dg-outline-conv-nhwc", ".codegen.cpu.library.conv_to_torch:outline_conv_nhwc",
         "f32/f64 channels-last convolutions (dg.conv2d_nhwc and its gradients) -> calls of "
         "private functions tagged for dg-conv-to-torch"),
    Pass("dg-outline-attention", ".codegen.common.outline:outline_attention",
         "dg.attention / dg.attention_grad of the dtypes the target's kernels take "
         "(target=cpu: f32/f64, cuda: f16/bf16/f32) -> calls of private functions tagged "
         "for dg-attention-to-torch (PyTorch's flash attention on the CPU) or the CUDA "
         "launch plan's attention steps (PyTorch's fused SDPA kernels)"),
    Pass("dg-matmul-to-blas", ".codegen.cpu.library.matmul_to_blas:matmul_to_blas",
         "f32/f64 linalg.matmul/batch_matmul on contiguous memrefs -> BLAS gemm calls, "
         "bf16/f16 ones -> PyTorch's baddbmm (transposed operands and results through the "
         "transpose flags)"),
    Pass("dg-conv-to-torch", ".codegen.cpu.library.conv_to_torch:conv_to_torch",
         "f32/f64 linalg convolutions on contiguous memrefs -> PyTorch's CPU convolution "
         "(aoti_torch_cpu_convolution); functions from dg-outline-conv-grads -> "
         "aoti_torch_cpu_convolution_backward; layout=auto|nchw|channels-last: how grouped "
         "convolutions pass activations (auto: the faster, measured)"),
    Pass("dg-attention-to-torch", ".codegen.cpu.library.attention_to_torch:attention_to_torch",
         "functions from dg-outline-attention on contiguous memrefs -> PyTorch's CPU flash "
         "attention (aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu and its "
         "backward)"),
    # codegen/cpu: kernels on memrefs
    Pass("dg-elide-copies", ".codegen.cpu.elide_copies:elide_copies",
         "a buffer written, copied whole into part of another and dead after becomes a view of"
         " that part (concatenations computed in place)"),
    Pass("dg-strided-copy-to-linalg", ".codegen.cpu.strided_copy_to_linalg:strided_copy_to_linalg",
         "rewrite memref.copy of strided memrefs as linalg.copy"),
    Pass("dg-collapse-reduction-dims", ".codegen.cpu.collapse_reduction_dims:collapse_dims",
         "adjacent reduction loops of a linalg.generic over contiguous memory -> one "
         "(memref.collapse_shape views of the operands)"),
    Pass("dg-cpu-scans", ".codegen.cpu.scans:cpu_scans",
         "dg.scan's loop nests as vector code: rows in vectors (prefix scans in registers), "
         "other dims with the scanned loop outside the contiguous ones"),
    Pass("dg-cpu-kernels", ".codegen.cpu.kernels:cpu_kernels",
         "linalg on static memrefs -> row-fused loop kernels (reductions in registers, row "
         "temporaries on the stack, large kernels threaded through libgomp)"),
    Pass("dg-outline-entry-loops", ".codegen.cpu.outline_entry_loops:outline_entry_loops",
         "loops left in public functions move into private noinline functions"),
    Pass("dg-prefetch-streams", ".codegen.cpu.prefetch_streams:prefetch_streams",
         "innermost loops streaming through contiguous arrays: strip-mined into chunks, each "
         "prefetching its streams ahead"),
    Pass("dg-gpu-dedup-kernels", ".codegen.cuda.dedup_kernels:dedup_kernels",
         "outlined gpu.modules with identical bodies are merged (launches go to one copy), "
         "before NVVM and ptxas"),
    Pass("dg-dedup-functions", ".codegen.cpu.dedup_functions:dedup_functions",
         "private functions with identical bodies are merged (calls go to one copy)"),
    Pass("dg-plan-workspace", ".codegen.cpu.plan_workspace:plan_workspace",
         "temporaries of each public function -> views of one workspace argument, packed by "
         "liveness"),
    Pass("dg-expand-math", ".codegen.cpu.expand_math:expand_math",
         "f32 exp/expm1/log/log1p/tanh/erf/sin/cos and constant-exponent powf -> inline "
         "polynomials (vectorizable, no libm calls); ldexp=1: scale by llvm.intr.ldexp (for "
         "AVX-512 targets)"),
    # codegen/cpu: the LLVM dialect (codegen/cpu/llvm)
    Pass("dg-noalias-kernel-args", ".codegen.cpu.kernels:noalias_kernel_args",
         "after LLVM lowering: the kernel pointers dg-cpu-kernels found distinct get "
         "llvm.noalias, so LLVM vectorizes loops over many buffers without runtime checks"),
    Pass("dg-half-loads-as-i16", ".codegen.cpu.llvm.half_loads_as_i16:half_loads_as_i16",
         "bf16/f16 (scalars and vectors) cross llvm.load/llvm.store and private functions' "
         "signatures as i16 bits, bitcast in registers (x86 cannot legalize masked loads of "
         "odd bf16 vectors; without AVX512-BF16 a bf16 argument called __truncsfbf2)"),
    Pass("dg-prune-kernel-params", ".codegen.cpu.llvm.prune_kernel_params:prune_kernel_params",
         "remove the parameters private LLVM functions never read (the exploded memref "
         "descriptor fields of static shapes) from them, their __parallel launchers and their "
         "calls; run after canonicalize"),
    Pass("dg-gomp-launchers", ".codegen.cpu.llvm.gomp_launchers:gomp_launchers",
         "define the @K__parallel launchers of dg-cpu-kernels with libgomp's GOMP_parallel "
         "(LLVM dialect)"),
    Pass("dg-inline-entries", ".codegen.cpu.llvm.inline_entries:inline_entries",
         "each entry @f moves into its C interface @_mlir_ciface_f, which called it with every "
         "field of every memref descriptor (a call of thousands of arguments for a backward, "
         "quadratic in LLVM's instruction selection)"),
    Pass("dg-internal-kernels", ".codegen.cpu.llvm.internal_kernels:internal_kernels",
         "private llvm.func definitions, and entries called through their C interface, get "
         "internal linkage (no packed wrappers)"),
    Pass("dg-packed-entries", ".codegen.cpu.llvm.packed_entries:packed_entries",
         "add `_mlir__mlir_ciface_f(void **args)` for each defined `_mlir_ciface_f` (the "
         "ExecutionEngine's packed calling convention)"),
    # codegen/cuda
    Pass("dg-gpu-library-stubs", ".codegen.cuda.library_stubs:library_stubs",
         "bodies of functions outlined by dg-outline-attention -> a bare return (the launch "
         "plan runs their calls as attention steps; no kernel is made of them)"),
    Pass("dg-gpu-kernels", ".codegen.cuda.kernels:gpu_kernels",
         "linalg on static memrefs -> gpu.launch kernels: pointwise (thread per element), row "
         "kernels (block per row, gpu.all_reduce), other reductions (thread per output); "
         "contractions stay host library calls"),
)


def functions(module: ir.Operation) -> Iterator[ir.Operation]:
    """The func.func ops of `module` that have a body."""
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func" and op.regions[0].blocks:
            yield op


def rewrite_ops(block: ir.Block, rewrite: Callable[[ir.Operation], bool]) -> int:
    """Offer each op of `block` to `rewrite` in program order, round after round, until a
    round changes nothing (a rewrite may enable one before or after it); how many
    changed. A rewrite may erase the op it is given and ops before it, and insert ops
    anywhere before it (the next round sees those)."""
    changed = 0
    while True:
        done = sum(rewrite(op) for op in [o.operation for o in block.operations])
        if not done:
            return changed
        changed += done


def rewrite_bodies(module: ir.Operation, rewrite: Callable[[ir.Block], int],
                   log: logging.Logger, message: str) -> None:
    """Run `rewrite` (a pass's rewrite of one function body, returning how many changes it
    made) on each function; `message` % (function, count) is logged where it made some."""
    for fn in functions(module):
        n = rewrite(fn.regions[0].blocks[0])
        if n:
            log.debug(message, ir.StringAttr(fn.attributes["sym_name"]).value, n)

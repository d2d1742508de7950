"""Every named pipeline, in one place: what `fusegrad.compile` runs, stage by stage.

A compile is three steps (docs/ARCHITECTURE.md has the picture):

1. differentiation (`dg-autodiff`, `dg-jvp`; `Program` picks the options),
2. `dg-optimize` (target independent, but for two knobs: the CUDA target decomposes
   the attention its library kernels do not take and keeps no row of a temporary on a
   stack),
3. the target's lowering: `dg-lower-to-llvm` (CPU) or `dg-lower-to-cuda` (CUDA).

Each stage below is a named pipeline that `fusegrad-opt -p NAME` runs on a dump of the
stage before it (`FUSEGRAD_DUMP`), and `fusegrad-opt --list-pipelines` prints. `Program`
and the compile drivers (`codegen/cpu/compile.py`, `codegen/cuda/compile.py`) run these
same strings, so a dump and a pipeline always agree.
"""
from __future__ import annotations

from typing import Sequence

from .codegen.cpu.kernels import ROW_TEMP_MAX_BYTES
from .transforms.fusion import REWRITES
from .passes import PassError

TARGETS = ("cpu", "cuda")

# ---------------------------------------------------------------- dg-optimize
# The rewrites that give fusion its shape (matmuls absorbing scalars, transposes and
# 16-bit casts, reshapes and gathers moved to the region inputs), then fusion itself.
# dg-remat runs them on a trial copy of the forward too (`remat.written_anyway`).
FUSION_REWRITES = ",".join(REWRITES)


def optimize_stages(target: str = "cpu", *, remat: bool = True, channels_last: bool = True,
                    fusion: bool = True) -> list[tuple[str, str]]:
    """(stage, pipeline) pairs of `dg-optimize` for `target`, as `Program` runs and dumps
    them; the options switch stages off (`CompileOptions`)."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r} (expected one of {TARGETS})")
    cuda = target == "cuda"
    stages = []
    if cuda:  # what PyTorch's fused kernels do not run: the softmax fuses with its neighbours
        stages.append(("attention-decomposed", "dg-decompose-attention{keep-library=1}"))
    if remat:
        stages.append(("remat", "dg-remat"))
    if channels_last and not cuda:
        stages.append(("channels-last", "dg-channels-last"))
    if fusion:
        stages.append(("fused", fusion_pipeline(target)))
    return stages


def fusion_pipeline(target: str = "cpu") -> str:
    """The fusion stage: its rewrites, then dg-fuse, then each kernel moved next to its
    uses (dg-sink-to-uses). CUDA kernels keep no row of a temporary on a stack: there
    dg-fuse recomputes what a row reduction would store."""
    fuse = "dg-fuse{row-temps=0}" if target == "cuda" else "dg-fuse"
    return f"dg-fusion-rewrites,{fuse},dg-sink-to-uses"


def optimize_pipeline(target: str = "cpu") -> str:
    return ",".join(p for _, p in optimize_stages(target))


# ---------------------------------------------------------------- CPU lowering
# entries as the runtime calls them: results that are arguments handed back, C interfaces
CPU_ENTRIES = "dg-forward-arguments,dg-c-interface"

# dg -> linalg on tensors, fused; convolution gradients and attention become calls of
# functions that dg-conv-to-torch / dg-attention-to-torch turn into PyTorch's kernels
CPU_LINALG = ",".join([
    "dg-outline-conv-grads",
    "dg-outline-conv-nhwc",
    "dg-outline-attention",
    "dg-size-arguments",
    f"dg-lower-to-linalg{{row-bytes-max={ROW_TEMP_MAX_BYTES}}}",
    "dg-drop-size-encodings",
    "canonicalize",
    "cse",
])

# tensors -> memrefs; arguments are never written; outputs become out-params (computed
# in place, not copied there); temporaries are freed. Both targets use it: on CUDA the
# host function's arguments are the caller's device tensors and its outputs.
BUFFERIZE = ",".join([
    "dg-unfilled-destinations",
    "dg-readonly-arguments",
    "dg-split-shared-fills",
    "dg-split-shared-empties",
    "eliminate-empty-tensors",
    "one-shot-bufferize{bufferize-function-boundaries=1 "
    "function-boundary-type-conversion=identity-layout-map}",
    "canonicalize", "cse", "canonicalize",
    "dg-distinct-result-buffers",
    "drop-equivalent-buffer-results",  # an outlined op's results written in destinations
    "buffer-results-to-out-params{hoist-static-allocs=1 modify-public-functions=1}",
    "canonicalize", "cse",
    "buffer-deallocation-pipeline",
    "dg-results-in-place",
    "canonicalize",
])


def cpu_llvm_pipeline(ldexp: bool = False) -> str:
    """memrefs + loops -> LLVM dialect. No MLIR runtime library is needed: strided copies
    become loops, i1 is stored as i8, bf16/f16 math runs in f32 (bf16 conversions expand
    to integer ops; f16 ones call libgcc_s, see runtime.cpu), ipowi becomes a function,
    f32 transcendentals become inline polynomials (dg-expand-math; `ldexp`: exp scales
    with llvm.intr.ldexp, one instruction on AVX-512), and the rest without an LLVM
    intrinsic (f64 erf) call libm. The only vector ops are dg-cpu-kernels' tile
    transposes. A part copied whole into a concatenation is computed in place
    (dg-elide-copies); loops streaming through arrays prefetch ahead
    (dg-prefetch-streams); an entry's temporaries live in one workspace argument the
    runtime keeps per thread (dg-plan-workspace)."""
    return ",".join([
        "dg-elide-copies",
        "dg-matmul-to-blas",
        "dg-conv-to-torch",
        "dg-attention-to-torch",
        "dg-strided-copy-to-linalg",
        "dg-collapse-reduction-dims",
        "dg-cpu-scans",
        "dg-cpu-kernels",
        "func.func(convert-linalg-to-loops)",
        "dg-outline-entry-loops",
        "dg-dedup-functions",  # first: the copies of a layer's kernels need no prefetches
        "dg-prefetch-streams",
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
        "dg-inline-entries",
        "dg-internal-kernels",
    ])


CPU_LLVM = cpu_llvm_pipeline()

# ---------------------------------------------------------------- CUDA lowering
DEFAULT_CHIPS = ("sm_80", "sm_90")
CUDA_ENTRIES = "dg-forward-arguments"

# convolution gradients and attention: calls of outlined functions, run by cuDNN and
# PyTorch's fused SDPA kernels through PyTorch (`conv2d_grad`, `attention` and
# `attention_grad` plan steps), as on the CPU
CUDA_LINALG = ",".join([
    "dg-outline-conv-grads",
    "dg-outline-attention{target=cuda}",
    "dg-size-arguments",
    "dg-lower-to-linalg",
    "dg-drop-size-encodings",
    "canonicalize",
    "cse",
])

# constants sunk into launches before outlining, or they become kernel parameters; a
# layer's copies of a kernel merged before NVVM and ptxas
CUDA_OUTLINE = ",".join([
    "gpu-launch-sink-index-computations",
    "gpu-kernel-outlining",
    "canonicalize",
    "cse",
    "dg-gpu-dedup-kernels",
])

# inside each gpu.module: loops -> cf, gpu/arith/math/memref -> NVVM (bare pointers: each
# memref is one `.u64` pointer parameter)
_KERNEL_LOWERING = ("gpu.module(expand-strided-metadata,lower-affine,convert-scf-to-cf,"
                    "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1},"
                    "canonicalize,cse,reconcile-unrealized-casts)")


def _chips(text: str) -> list[str]:
    chips = [c.strip() for c in text.replace(";", ",").split(",") if c.strip()]
    for c in chips:
        if not (c.startswith("sm_") and c[3:].rstrip("a").isdigit()):
            raise PassError(f"dg-gpu-nvvm: bad chip '{c}' (expected e.g. sm_80 or sm_90)")
    if not chips:
        raise PassError("dg-gpu-nvvm: no chips given (chips=sm_80,sm_90)")
    return chips


def _ptx_features(chip: str) -> str:
    # PTX ISA 7.8 covers sm_90 (and everything older); sm_90a and newer need 8.x
    num = int(chip[3:].rstrip("a"))
    return "+ptx80" if num >= 90 and chip.endswith("a") else "+ptx78" if num >= 90 else "+ptx70"


def nvvm_pipeline(chips: Sequence[str] = DEFAULT_CHIPS, opt_level: int = 3) -> str:
    """Attach one NVVM target per chip, lower the gpu.modules, serialize each to PTX
    (`gpu-module-to-binary{format=isa}`; cubins come from ptxas, codegen/cuda/ptxas.py).

    The host function stays at the memref level (no `gpu-to-llvm`): the launch plan
    (codegen/cuda/launch_plan.py) walks it. A pipeline string, not a pass: running a
    pass manager from inside a pass callback aborts MLIR (`nvvm-attach-target` loads
    dialects, which asserts in a multi-threaded execution context)."""
    parts = [f"nvvm-attach-target{{chip={c} features={_ptx_features(c)} O={opt_level}}}"
             for c in _chips(",".join(chips))]
    return ",".join(parts + [_KERNEL_LOWERING, "gpu-module-to-binary{format=isa}"])


def cuda_pipeline(chips: Sequence[str] = DEFAULT_CHIPS, kernel_options: str = "") -> str:
    """`dg-lower-to-cuda` for other chips, or with dg-gpu-kernels options
    (`block-size=128 row-block=512`)."""
    return ",".join([cuda_kernels_pipeline(kernel_options), nvvm_pipeline(chips)])


def cuda_kernels_pipeline(kernel_options: str = "") -> str:
    """`dg-lower-to-cuda` up to outlined kernels, before NVVM: host memref code and
    `gpu.module`s of gpu/scf/arith/memref code (what the tests' kernel emulator runs)."""
    kernels = f"dg-gpu-kernels{{{kernel_options}}}" if kernel_options else "dg-gpu-kernels"
    # booleans stored as bytes after dg-gpu-kernels (torch.bool's layout; MLIR 22's
    # memref-to-LLVM lowering aborts on i1 loads/stores)
    return ",".join([CUDA_LINALG, BUFFERIZE, "dg-gpu-library-stubs", kernels,
                     "dg-widen-bool-memrefs", CUDA_OUTLINE])


# ---------------------------------------------------------------- the names
PIPELINES: dict[str, tuple[str, str]] = {  # name -> (pipeline, description)
    "dg-fusion-rewrites": (FUSION_REWRITES, "the rewrites dg-fuse relies on: stop_gradient "
                           "dropped, casts, scalars and transposes into matmuls, reshapes and "
                           "gathers hoisted to the inputs"),
    "dg-optimize": (optimize_pipeline("cpu"), "dg -> dg for the CPU: dg-remat, "
                    "dg-channels-last, dg-fusion-rewrites, dg-fuse"),
    "dg-optimize-cuda": (optimize_pipeline("cuda"), "dg -> dg for CUDA: "
                         "dg-decompose-attention, dg-remat, dg-fusion-rewrites, "
                         "dg-fuse{row-temps=0}"),
    "dg-cpu-linalg": (CPU_LINALG, "dg -> fused linalg on tensors; library ops outlined"),
    "dg-cpu-bufferize": (BUFFERIZE, "tensors -> memrefs, results -> out-params, "
                         "temporaries freed"),
    "dg-cpu-llvm": (CPU_LLVM, "memrefs and loops -> LLVM dialect"),
    "dg-lower-to-llvm": ("dg-cpu-linalg,dg-cpu-bufferize,dg-cpu-llvm",
                         "the whole CPU lowering: dg-cpu-linalg, dg-cpu-bufferize, "
                         "dg-cpu-llvm"),
    "dg-gpu-linalg": (CUDA_LINALG, "dg -> linalg on tensors (CUDA target)"),
    "dg-gpu-bufferize": (BUFFERIZE, "tensors -> memrefs, results -> out-params, "
                         "temporaries freed (CUDA target; the CPU recipe)"),
    "dg-gpu-outline": (CUDA_OUTLINE, "gpu.launch -> gpu.module + gpu.launch_func "
                       "(constants sunk first)"),
    "dg-gpu-nvvm": (nvvm_pipeline(), "NVVM targets sm_80 and sm_90, kernels -> NVVM "
                    "(bare-pointer ABI) -> PTX gpu.binary per kernel"),
    "dg-lower-to-cuda": ("dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-library-stubs,dg-gpu-kernels,"
                         "dg-widen-bool-memrefs,dg-gpu-outline,dg-gpu-nvvm",
                         "the whole CUDA lowering: dg-gpu-linalg, dg-gpu-bufferize, "
                         "dg-gpu-library-stubs, dg-gpu-kernels, dg-gpu-outline, dg-gpu-nvvm "
                         "(host memref code + one PTX gpu.binary per kernel)"),
}

"""CUDA target pipelines: dg on tensors -> host memref code + PTX per kernel.

Stages (each a named pipeline usable in `fusegrad-opt -p`):

- `dg-gpu-linalg`: dg -> linalg on tensors (shared with the CPU target; convolution
  gradients become calls of outlined functions, as there).
- `dg-gpu-bufferize`: the CPU recipe (read-only arguments, one-shot
  bufferization with identity layouts, distinct result buffers, results ->
  out-params, deallocation): the host function's arguments are the caller's
  device tensors and its outputs.
- `dg-gpu-kernels` (pass, `gpu_kernels.py`): linalg -> `gpu.launch`.
- `dg-gpu-outline`: sink constants into launches, outline each launch into
  its own `gpu.module` (notes: sinking before outlining, or constants become
  kernel parameters).
- `dg-gpu-nvvm`: attach one NVVM target per chip (sm_80 and sm_90; other
  chips: `nvvm_pipeline(chips)`),
  lower the kernels to NVVM with the bare-pointer ABI (each memref is one
  `.u64` pointer parameter), and serialize with `gpu-module-to-binary{format=isa}`
  (PTX; `runtime` / `compile_cuda` assemble cubins with `ptxas`).

The host function stays at the memref level (no `gpu-to-llvm`): the launch
plan (`gpu_launch_plan.py`) walks it.
"""
from __future__ import annotations

import logging
from typing import Sequence

from . import function_boundary, gpu_kernels, widen_bool  # noqa: F401  (register passes)
from .pipelines import BUFFERIZE_PIPELINE
from .registry import PassError, register_pipeline

log = logging.getLogger("fusegrad.passes.gpu_pipeline")

DEFAULT_CHIPS = ("sm_80", "sm_90")

# convolution gradients: calls of outlined functions, run by cuDNN through PyTorch
# (`conv2d_grad` plan steps), as on the CPU
GPU_LINALG_PIPELINE = ",".join([
    "dg-outline-conv-grads",
    "dg-lower-to-linalg",
    "canonicalize",
    "cse",
])

GPU_BUFFERIZE_PIPELINE = BUFFERIZE_PIPELINE  # the CPU recipe: read-only args, out-params

# linalg -> gpu.launch; booleans stored as bytes (torch.bool's layout; MLIR 22's
# memref-to-LLVM lowering aborts on i1 loads/stores)
GPU_KERNELS_PIPELINE = "dg-gpu-kernels,dg-widen-bool-memrefs"

GPU_OUTLINE_PIPELINE = ",".join([
    "gpu-launch-sink-index-computations",
    "gpu-kernel-outlining",
    "canonicalize",
    "cse",
])

# inside each gpu.module: loops -> cf, gpu/arith/math/memref -> NVVM (bare pointers)
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
    """Attach one NVVM target per chip, lower the gpu.modules, serialize each to PTX.

    A pipeline string, not a pass: running a pass manager from inside a pass
    callback aborts MLIR (`nvvm-attach-target` loads dialects, which asserts
    in a multi-threaded execution context).
    """
    parts = [f"nvvm-attach-target{{chip={c} features={_ptx_features(c)} O={opt_level}}}"
             for c in _chips(",".join(chips))]
    return ",".join(parts + [_KERNEL_LOWERING, "gpu-module-to-binary{format=isa}"])


GPU_NVVM_PIPELINE = nvvm_pipeline()
GPU_PIPELINE = ",".join([GPU_LINALG_PIPELINE, GPU_BUFFERIZE_PIPELINE, GPU_KERNELS_PIPELINE,
                         GPU_OUTLINE_PIPELINE, GPU_NVVM_PIPELINE])

register_pipeline("dg-gpu-linalg", GPU_LINALG_PIPELINE, "dg -> linalg on tensors (CUDA target)")
register_pipeline("dg-gpu-bufferize", GPU_BUFFERIZE_PIPELINE,
                  "tensors -> memrefs, results -> out-params, temporaries freed (CUDA target)")
register_pipeline("dg-gpu-outline", GPU_OUTLINE_PIPELINE,
                  "gpu.launch -> gpu.module + gpu.launch_func (constants sunk first)")
register_pipeline("dg-gpu-nvvm", GPU_NVVM_PIPELINE,
                  "NVVM targets sm_80 and sm_90, kernels -> NVVM (bare-pointer ABI) -> PTX "
                  "gpu.binary per kernel")
register_pipeline("dg-lower-to-cuda", GPU_PIPELINE,
                  "the whole CUDA lowering: dg-gpu-linalg, dg-gpu-bufferize, dg-gpu-kernels, "
                  "dg-gpu-outline, dg-gpu-nvvm (host memref code + one PTX gpu.binary per kernel)")

"""dg on tensors -> a CUDA launch plan: `compile_cuda`, and the command that prints one.

`python -m fusegrad.codegen.cuda.compile FILE.mlir` lowers a dg file for CUDA and prints
its launch plan and PTX (the lit tests read it), or writes an artifact folder with `-o`.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Callable, Optional, Sequence

from mlir import ir

from ...pass_manager import run_pipeline
from ...pipelines import CUDA_ENTRIES, DEFAULT_CHIPS, cuda_pipeline
from ...runtime.cuda import LaunchPlan, PlanError
from ..common.entries import forwarded as forwarded_results
from .kernels import (FULL_REDUCE_UNROLL, POINTWISE_BLOCK, POINTWISE_READ_BYTES,
                      ROW_BLOCK, ROW_CACHE)
from .launch_plan import build_plan, entry_signatures, format_plan
from .ptxas import PtxasError, assemble, find_ptxas

log = logging.getLogger(__name__)


def compile_cuda(module: ir.Module, chips: Sequence[str] = DEFAULT_CHIPS,
                 cubin: Optional[bool] = None, block_size: int = POINTWISE_BLOCK,
                 row_block: int = ROW_BLOCK, row_cache: int = ROW_CACHE,
                 full_unroll: int = FULL_REDUCE_UNROLL,
                 pointwise_bytes: int = POINTWISE_READ_BYTES,
                 on_stage: Callable[[str, str, ir.Module], None] | None = None) -> LaunchPlan:
    """Lower `module` (dg on tensors, fused or not) in place and return its launch plan.

    `cubin`: assemble cubins with ptxas (True: required; None: when ptxas is
    found, else PTX only, which the driver JIT-compiles; False: PTX only).
    `on_stage("cuda", pipeline, module)` sees the lowered module and the pipeline that
    lowered it (FUSEGRAD_DUMP writes it).
    """
    t0 = time.perf_counter()
    lowering = cuda_pipeline(chips, f"block-size={block_size} row-block={row_block} "
                                    f"row-cache={row_cache} full-unroll={full_unroll} "
                                    f"pointwise-bytes={pointwise_bytes}")
    with module.context:
        entries = entry_signatures(module)
        run_pipeline(module, CUDA_ENTRIES)
        forwarded = forwarded_results(module)
        run_pipeline(module, lowering)
        if on_stage is not None:
            on_stage("cuda", f"{CUDA_ENTRIES},{lowering}", module)
        plan = build_plan(module, entries, forwarded)
    t1 = time.perf_counter()
    if cubin or (cubin is None and find_ptxas() is not None):
        assemble(plan)
    log.info("compile_cuda: %d functions, %d kernel modules, MLIR %.1f ms, ptxas %.1f ms",
             len(plan.functions), len(plan.modules), (t1 - t0) * 1e3,
             (time.perf_counter() - t1) * 1e3)
    return plan


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the launch plan and PTX of a dg file lowered for CUDA (or save an artifact)."""
    from ...context import make_context

    p = argparse.ArgumentParser(prog="python -m fusegrad.codegen.cuda.compile",
                                description=main.__doc__)
    p.add_argument("file")
    p.add_argument("-p", "--pre", default="", help="dg passes to run first (e.g. dg-fuse)")
    p.add_argument("--chips", default=",".join(DEFAULT_CHIPS))
    p.add_argument("--ptx", default=None, help="print the PTX for this chip")
    p.add_argument("--cubin", action="store_true", help="assemble cubins with ptxas")
    p.add_argument("--row-block", type=int, default=ROW_BLOCK)
    p.add_argument("--block-size", type=int, default=POINTWISE_BLOCK)
    p.add_argument("--row-cache", type=int, default=ROW_CACHE,
                   help="values per thread a row kernel may keep in registers (0: off)")
    p.add_argument("-o", "--output", default=None, help="write the artifact folder here")
    args = p.parse_args(argv)
    with make_context():
        try:
            with open(args.file) as f:
                module = ir.Module.parse(f.read())
            if args.pre:
                run_pipeline(module, args.pre)
            plan = compile_cuda(module, args.chips.split(","), cubin=args.cubin,
                                block_size=args.block_size, row_block=args.row_block,
                                row_cache=args.row_cache)
        except (PlanError, PtxasError, ir.MLIRError, OSError, ValueError) as e:
            print(f"{args.file}: error: {e}", file=sys.stderr)
            return 1
    if args.output:
        plan.save(args.output)
    print(format_plan(plan))
    if args.ptx:
        for m in plan.modules.values():
            img = m.images.get(args.ptx)
            if img is not None and img.ptx is not None:
                print(f"// ---- module {m.name} ({args.ptx})")
                print(img.ptx.decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())

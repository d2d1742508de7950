"""LLVM dialect -> machine code in this process, with MLIR's ExecutionEngine.

The small-module path of `compile_cpu` (big modules go to `native_code`): one engine
optimizes and generates the whole module on one thread. With `library`, the code is
also written as a shared library the compile cache and AOT export keep.
"""
from __future__ import annotations

import logging
import os
import tempfile
from typing import Mapping, Sequence

from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ....conversion.index_check import SITES_ATTR, TAKE_ERROR
from ....conversion.sizes import size_arguments
from ....runtime.cpu import CpuModule, Entries, load_builtins
from ..plan_workspace import workspaces
from .link import LinkError, link

log = logging.getLogger(__name__)


def module_facts(module: ir.Module) -> tuple[tuple[str, list[str]] | None, dict[str, int],
                                             dict[str, list[str]]]:
    """What the runtime needs to know of `module` (an `mlir.ir.Module` in the LLVM
    dialect) besides its entries: the index-error function and sites, if it checks
    indices, each entry's workspace bytes, and the symbols of each entry's size
    arguments."""
    attrs = module.operation.attributes
    index_errors = None
    if SITES_ATTR in attrs:
        index_errors = (TAKE_ERROR, [ir.StringAttr(s).value for s in ir.ArrayAttr(attrs[SITES_ATTR])])
    return index_errors, workspaces(module.operation), size_arguments(module.operation)


def jit_module(module: ir.Module, entries: Entries, *, opt_level: int = 2,
               shared_libs: Sequence[str] = (),
               forwarded: Mapping[str, Mapping[int, int]] | None = None,
               library: str | None = None) -> CpuModule:
    """JIT-compile `module` (an `mlir.ir.Module` in the LLVM dialect) into a `CpuModule`
    with the MLIR ExecutionEngine.

    With `library`, the code is position-independent and is also linked into that
    shared library (`runtime.cpu_library`).
    """
    # O2: the transformer-layer training step runs as fast as at O3 (24 ms) and its
    # JIT takes 7.5 s instead of 11 s (benchmarks/train_step.py)
    load_builtins()
    index_errors, workspaces, sizes = module_facts(module)
    engine = ExecutionEngine(module, opt_level=opt_level, shared_libs=list(shared_libs),
                             enable_object_dump=library is not None,
                             enable_pic=library is not None)
    engine.initialize()
    # raw_lookup("_mlir_ciface_f") finds the packed wrapper `_mlir__mlir_ciface_f`
    cpu = CpuModule(lambda name: engine.raw_lookup("_mlir_ciface_" + name), engine, entries,
                    forwarded, index_errors, workspaces, sizes)
    if library is not None:
        with tempfile.TemporaryDirectory(prefix="fusegrad-jit-") as tmp:
            engine.dump_to_object_file(os.path.join(tmp, "code.o"))
            try:
                link([os.path.join(tmp, "code.o")], library)
            except LinkError as e:  # the code runs; only the library is missing
                log.warning("compiled code not saved as a shared library: %s", e)
    return cpu

"""CPU runtime: run JIT-compiled entry functions on torch tensors, zero-copy.

Entries follow the ABI that `passes.pipelines.CPU_PIPELINE` produces: every
argument is an identity-layout (row-major, contiguous) memref, inputs first,
then one out-param per result; the wrapper `_mlir_ciface_<name>` takes
pointers to memref descriptors. Descriptors are built directly from
`data_ptr()`/sizes/strides, so contiguous tensors are never copied.
Non-contiguous inputs are made contiguous first (one copy): the compiled code
indexes with the static row-major strides of its identity-layout types, so
passing real strides would be wrong.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from pathlib import Path
from typing import Callable, Sequence

import torch
from mlir import ir
from mlir.execution_engine import ExecutionEngine

from ..dialects.types import TensorSpec, torch_dtype
from ..passes.index_check import SITES_ATTR, TAKE_ERROR

log = logging.getLogger("fusegrad.runtime.cpu")

_PACKED_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@functools.lru_cache(maxsize=1)
def load_builtins() -> None:
    """Make libgcc_s's f16 conversion builtins (__truncdfhf2, ...), PyTorch's BLAS and its
    OpenMP runtime visible to the JIT, which resolves undefined symbols in the process's global
    namespace (as it does libm's)."""
    name = ctypes.util.find_library("gcc_s")
    if name:
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    else:
        log.warning("libgcc_s not found: f16 conversions in compiled code will not link")
    # BLAS (sgemm_/dgemm_, see passes/blas.py): PyTorch's CPU library carries it
    lib = Path(torch.__file__).parent / "lib"
    ctypes.CDLL(str(lib / "libtorch_cpu.so"), mode=ctypes.RTLD_GLOBAL)
    # GOMP_parallel (passes/gomp.py): the OpenMP runtime PyTorch runs its threads on
    gomp = sorted(lib.glob("libgomp*.so*")) or [ctypes.util.find_library("gomp")]
    if gomp[0] is None:
        raise RuntimeError("fusegrad: libgomp (PyTorch's OpenMP runtime) not found next to "
                           f"libtorch_cpu.so in {lib}; threaded kernels cannot link")
    ctypes.CDLL(str(gomp[0]), mode=ctypes.RTLD_GLOBAL)


@functools.lru_cache(maxsize=None)
def descriptor_type(rank: int) -> type[ctypes.Structure]:
    """ctypes struct of a ranked memref descriptor (element type does not matter)."""
    fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
              ("offset", ctypes.c_int64)]
    if rank:
        fields += [("sizes", ctypes.c_int64 * rank), ("strides", ctypes.c_int64 * rank)]
    return type(f"MemRefDescriptor{rank}D", (ctypes.Structure,), {"_fields_": fields})


def descriptor(t: torch.Tensor) -> ctypes.Structure:
    """A memref descriptor viewing `t`'s memory (no copy)."""
    d = descriptor_type(t.dim())()
    d.allocated = d.aligned = t.data_ptr()
    d.offset = 0
    if t.dim():
        d.sizes[:] = list(t.shape)
        d.strides[:] = list(t.stride())
    return d


class CpuFunction:
    """Callable `(*tensors) -> list[tensor]` for one entry; holds no per-call state.

    Results are fresh tensors, except a result that is one of the arguments (a
    forward saving its input for the backward): that argument itself is returned,
    never copied. Callers that hand results to users make them unaliased."""

    def __init__(self, name: str, fn: Callable, inputs: Sequence[TensorSpec],
                 outputs: Sequence[TensorSpec], engine: ExecutionEngine,
                 index_errors: "IndexErrors | None" = None,
                 forwarded: dict[int, int] | None = None) -> None:
        self.name = name
        self._engine = engine  # `fn` points into the engine's JIT code: keep it alive
        self._index_errors = index_errors
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self._fn = fn
        # results that are arguments, handed back as they are (result -> argument index)
        self._forwarded = dict(forwarded or {})
        self._computed = [(k, s, torch_dtype(s.dtype)) for k, s in enumerate(outputs)
                          if k not in self._forwarded]
        self._in_dtypes = [torch_dtype(s.dtype) for s in inputs]

    def _check(self, args: Sequence[torch.Tensor]) -> None:
        if len(args) != len(self.inputs):
            raise TypeError(f"@{self.name} takes {len(self.inputs)} tensors, got {len(args)}")
        for i, (t, s, dt) in enumerate(zip(args, self.inputs, self._in_dtypes)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"@{self.name}: argument #{i} is a {type(t).__name__}, "
                                f"expected a torch.Tensor {s}")
            if tuple(t.shape) != s.shape or t.dtype != dt:
                raise TypeError(f"@{self.name}: argument #{i} is {tuple(t.shape)} {t.dtype}, "
                                f"expected {s}; compile for this shape/dtype")
            if t.device.type != "cpu":
                raise TypeError(f"@{self.name}: argument #{i} is on {t.device}; "
                                "the CPU runtime takes CPU tensors")

    def __call__(self, *args: torch.Tensor) -> list[torch.Tensor]:
        self._check(args)
        ins = [t if t.is_contiguous() else t.contiguous() for t in args]
        outs = [torch.empty(s.shape, dtype=dt) for _, s, dt in self._computed]
        descs = [descriptor(t) for t in (*ins, *outs)]
        ptrs = [ctypes.pointer(d) for d in descs]
        packed = (ctypes.c_void_p * len(ptrs))(*[ctypes.addressof(p) for p in ptrs])
        self._fn(packed)
        if self._index_errors is not None:
            self._index_errors.raise_if_set(self.name)
        if not self._forwarded:
            return outs
        results: list = [None] * len(self.outputs)
        for (k, _, _), t in zip(self._computed, outs):
            results[k] = t
        for k, i in self._forwarded.items():
            results[k] = args[i]
        return results


class OutOfRangeIndex(IndexError):
    """A compiled gather/index_select/scatter_add met an index outside its dim: the
    caller's data is wrong (not the compilation), exactly where eager raises too."""


class IndexErrors:
    """The module's out-of-range-index report (passes/index_check.py): the function that
    takes (reads and clears) the failing site, and the sites' descriptions."""

    def __init__(self, take: "CpuFunction", sites: Sequence[str]) -> None:
        self.take = take
        self.sites = list(sites)

    def raise_if_set(self, function: str) -> None:
        site = int(self.take()[0])
        if site:
            raise OutOfRangeIndex(f"@{function}: index out of range in {self.sites[site - 1]}")


class CpuModule:
    """A JIT-compiled module (LLVM dialect) with one `CpuFunction` per entry."""

    def __init__(self, module: ir.Module,
                 entries: dict[str, tuple[list[TensorSpec], list[TensorSpec]]],
                 opt_level: int = 2, shared_libs: Sequence[str] = (),
                 forwarded: dict[str, dict[int, int]] | None = None) -> None:
        # O2: the transformer-layer training step runs as fast as at O3 (24 ms) and its
        # JIT takes 7.5 s instead of 11 s (benchmarks/train_step.py)
        load_builtins()
        self.engine = ExecutionEngine(module, opt_level=opt_level, shared_libs=list(shared_libs))
        self.engine.initialize()
        self.entries = dict(entries)
        index_errors = None
        if SITES_ATTR in module.operation.attributes:
            sites = [ir.StringAttr(s).value for s in
                     ir.ArrayAttr(module.operation.attributes[SITES_ATTR])]
            take = CpuFunction(TAKE_ERROR, _PACKED_FN(self._address(TAKE_ERROR)), [],
                               [TensorSpec((), "i32")], self.engine)
            index_errors = IndexErrors(take, sites)
        self._functions: dict[str, CpuFunction] = {}
        for name, (ins, outs) in self.entries.items():
            self._functions[name] = CpuFunction(name, _PACKED_FN(self._address(name)), ins, outs,
                                                self.engine, index_errors,
                                                (forwarded or {}).get(name))

    def _address(self, name: str) -> int:
        addr = self.engine.raw_lookup("_mlir_ciface_" + name)
        if not addr:
            raise RuntimeError(f"compiled module has no entry @{name} (no C interface)")
        return addr

    def function(self, name: str) -> CpuFunction:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"no entry function @{name}; entries: {sorted(self._functions)}") \
                from None

    @property
    def names(self) -> list[str]:
        return sorted(self._functions)

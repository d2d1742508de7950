"""CPU runtime: run compiled entry functions on torch tensors, zero-copy.

Entries follow the ABI that `pipelines.py` (dg-lower-to-llvm) produces: every
argument is an identity-layout (row-major, contiguous) memref, inputs first,
then one out-param per result; the packed wrapper of `_mlir_ciface_<name>`
takes an array of pointers to memref descriptors. Descriptors are built
directly from `data_ptr()`/sizes/strides, so contiguous tensors are never
copied. Non-contiguous inputs are made contiguous first (one copy): the
compiled code indexes with the static row-major strides of its
identity-layout types, so passing real strides would be wrong.

The code lives either in an LLVM JIT (`jit_module`, which needs MLIR) or in a
shared library (`runtime.cpu_library`); both build the same `CpuModule`.
This module itself imports only torch, so a library runs without MLIR.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import math
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from . import host_memory
from . import abi
from .abi import TensorSig, torch_dtype

log = logging.getLogger(__name__)

_PACKED_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@functools.lru_cache(maxsize=1)
def load_builtins() -> None:
    """Make libgcc_s's f16 conversion builtins (__truncdfhf2, ...), PyTorch's BLAS and its
    OpenMP runtime visible to compiled code, which resolves undefined symbols in the
    process's global namespace (as it does libm's): the JIT and loaded libraries alike."""
    name = ctypes.util.find_library("gcc_s")
    if name:
        ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    else:
        log.warning("libgcc_s not found: f16 conversions in compiled code will not link")
    # BLAS (sgemm_/dgemm_, see codegen/cpu/library/matmul_to_blas.py): PyTorch's CPU library carries it
    lib = Path(torch.__file__).parent / "lib"
    ctypes.CDLL(str(lib / "libtorch_cpu.so"), mode=ctypes.RTLD_GLOBAL)
    # GOMP_parallel (codegen/cpu/llvm/gomp_launchers.py): the OpenMP runtime PyTorch runs its threads on
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


class _Arguments:
    """One thread's memref descriptors for an entry's arguments (inputs, size arguments,
    computed outputs, then the workspace if it has one) and the packed pointer array the
    C interface takes. Static shapes and strides (row-major) are set once, so a call
    sets each descriptor's data pointer (and the sizes and strides of symbolic shapes):
    building descriptors anew was most of the per-call cost. `sizes`: one int64 per
    size argument, after the inputs' descriptors in the packed array."""

    def __init__(self, specs: Sequence[TensorSig], num_inputs: int = 0,
                 num_sizes: int = 0) -> None:
        self.descriptors = []
        for spec in specs:
            d = descriptor_type(len(spec.shape))()
            d.offset = 0
            if spec.shape and spec.is_static:
                d.sizes[:] = list(spec.shape)
                d.strides[:] = _row_major_strides(spec.shape)
            self.descriptors.append(d)
        self.sizes = [ctypes.c_int64() for _ in range(num_sizes)]
        self._pointers = [ctypes.pointer(d) for d in self.descriptors]
        pointers = [ctypes.addressof(p) for p in self._pointers]
        pointers[num_inputs:num_inputs] = [ctypes.addressof(v) for v in self.sizes]
        self.packed = (ctypes.c_void_p * len(pointers))(*pointers)


class _Workspace(threading.local):
    """This thread's workspace: the memory compiled code keeps its temporaries in
    (`codegen/cpu/plan_workspace.py`). One buffer per thread serves every entry (calls on a
    thread never overlap), grows to the largest workspace asked for and is kept, so
    steady-state calls neither allocate nor page-fault their temporaries."""

    buffer: torch.Tensor | None = None

    def data_ptr(self, nbytes: int) -> int:
        if self.buffer is None or self.buffer.numel() < nbytes:
            self.buffer = None  # free the smaller one first
            self.buffer = torch.empty(nbytes, dtype=torch.uint8)
            # tens of MiB that every kernel reads and writes: on 4 KiB pages, far more
            # than the TLB covers (HF BERT training step ~2% slower, GPT-2 ~2.5%)
            host_memory.advise_huge_pages(self.buffer.data_ptr(), nbytes)
            log.debug("workspace of this thread grown to %d bytes", nbytes)
        return self.buffer.data_ptr()

    def growing(self, descriptor: ctypes.Structure, nbytes: int) -> int:
        """Point the descriptor of a growing workspace (`memref<?xi8>`) at this thread's
        buffer, of at least `nbytes`; its address."""
        pointer = self.data_ptr(max(nbytes, GROWING_HEADER))
        descriptor.allocated = descriptor.aligned = pointer
        _set_geometry(descriptor, (self.buffer.numel(),))
        return pointer

    def grow_to_need(self, pointer: int) -> None:
        """After a call on a growing workspace at `pointer`: the bytes it needed are in its
        header; a call that needed more than the buffer ran on a block of its own, and
        the buffer grows for the calls that follow."""
        needed = ctypes.c_int64.from_address(pointer).value
        if needed > self.buffer.numel():
            self.data_ptr(needed)


# bytes at the start of a growing workspace that hold what the call needs
# (`codegen/cpu/plan_workspace.py`)
GROWING_HEADER = 64


_WORKSPACE = _Workspace()


def workspace_bytes() -> int:
    """Bytes of the calling thread's workspace (0 before any call that needs one)."""
    return 0 if _WORKSPACE.buffer is None else _WORKSPACE.buffer.numel()


def _row_major_strides(shape: Sequence[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.insert(0, step)
        step *= size
    return strides


class CpuFunction:
    """Callable `(*tensors) -> list[tensor]` for one entry; safe to call from several
    threads at once (argument descriptors are per thread).

    Results are fresh tensors, except a result that is one of the arguments (a
    forward saving its input for the backward): that argument itself is returned,
    never copied. Callers that hand results to users make them unaliased.
    `workspace`: bytes of temporaries the entry takes as its last argument (0: none); a
    negative value is a growing workspace, of at least that many bytes (temporaries of
    run-time sizes: `memref<?xi8>`, the bytes a call needs in its header)."""

    def __init__(self, name: str, fn: Callable, inputs: Sequence[TensorSig],
                 outputs: Sequence[TensorSig], owner: object,
                 index_errors: "CompiledErrors | None" = None,
                 forwarded: Mapping[int, int] | None = None, workspace: int = 0,
                 size_arguments: Sequence[str] = ()) -> None:
        self.name = name
        # symbols whose values follow the inputs as int64 arguments (dg-size-arguments)
        self.size_arguments = list(size_arguments)
        self.symbolic = bool(self.size_arguments) or not all(
            s.is_static for s in (*inputs, *outputs))
        self.workspace = workspace
        self._owner = owner  # `fn` points into code it holds: keep it alive
        self._index_errors = index_errors
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self._fn = fn
        # results that are arguments, handed back as they are (result -> argument index)
        self._forwarded = dict(forwarded or {})
        self._computed = [(k, s, torch_dtype(s.dtype)) for k, s in enumerate(outputs)
                          if k not in self._forwarded]
        # bytes of each computed result large enough for host_memory's pool, else 0
        self._large = [n if n >= host_memory.LARGE_MIN_BYTES else 0
                      for n in (math.prod(s.shape) * torch.empty((), dtype=dt).element_size()
                                if s.is_static else 0 for _, s, dt in self._computed)]
        self._in_dtypes = [torch_dtype(s.dtype) for s in inputs]
        self._thread = threading.local()  # .arguments: this thread's `_Arguments`
        # the call itself, generated for this signature (`_generate_call`)
        self.call: Callable[..., list[torch.Tensor]] = (
            self._generate_symbolic_call() if self.symbolic else self._generate_call())
        self.sizes_of = self._sizes_function()

    @property
    def returns_arguments(self) -> bool:
        """Does a call hand some of its arguments back as results (all others are fresh)?"""
        return bool(self._forwarded)

    def __call__(self, *args: torch.Tensor, sizes: Mapping[str, int] | None = None,
                 ) -> list[torch.Tensor]:
        """Run the entry. `sizes`: values of symbolic sizes the inputs do not show (a
        backward's, bound where its forward ran: `bind_sizes`); an entry of static sizes
        takes none (the backward of a program whose only size is an integer input)."""
        if sizes is not None and self.symbolic:
            return self.call(*args, sizes=sizes)
        return self.call(*args)

    def _sizes_function(self) -> Callable[[Sequence[torch.Tensor]], dict[str, int]] | None:
        """For an entry of symbolic sizes, the function giving their values in a call with
        given arguments (what its backward takes as `sizes`); None for a static one."""
        if not self.symbolic:
            return None
        return abi.sizes_reader([s.shape for s in self.inputs],
                                abi.symbols_of(s.shape for s in (*self.inputs, *self.outputs)),
                                self.bind_sizes)

    def bind_sizes(self, args: Sequence[torch.Tensor],
                   sizes: Mapping[str, int] | None = None) -> dict[str, int]:
        """The values of the symbolic sizes of a call with `args` (TypeError if the
        shapes do not fit)."""
        try:
            return abi.bind_sizes([s.shape for s in self.inputs],
                                  [tuple(t.shape) for t in args],
                                  [f"@{self.name} argument #{i}" for i in range(len(args))],
                                  dict(sizes or {}))
        except abi.SizeMismatch as e:
            raise TypeError(f"{e}; compile for this shape") from None

    def _check(self, args: Sequence[torch.Tensor]) -> None:
        """Raise the TypeError that names the first argument not matching the signature."""
        if len(args) != len(self.inputs):
            raise TypeError(f"@{self.name} takes {len(self.inputs)} tensors, got {len(args)}")
        for i, (t, s, dt) in enumerate(zip(args, self.inputs, self._in_dtypes)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"@{self.name}: argument #{i} is a {type(t).__name__}, "
                                f"expected a torch.Tensor {s}")
            if (t.shape != s.shape if s.is_static else t.dim() != s.rank) or t.dtype != dt:
                raise TypeError(f"@{self.name}: argument #{i} is {tuple(t.shape)} {t.dtype}, "
                                f"expected {s}; compile for this shape/dtype")
            if not t.is_cpu:
                raise TypeError(f"@{self.name}: argument #{i} is on {t.device}; "
                                "the CPU runtime takes CPU tensors")

    def _arguments(self) -> "_Arguments":
        """This thread's descriptors (made at its first call)."""
        arguments = getattr(self._thread, "arguments", None)
        if arguments is None:
            workspace = [TensorSig((self.workspace,), "i8")] if self.workspace > 0 else \
                [TensorSig((abi.symbol("workspace"),), "i8")] if self.workspace else []
            arguments = self._thread.arguments = _Arguments(
                [*self.inputs, *(s for _, s, _ in self._computed), *workspace],
                len(self.inputs), len(self.size_arguments))
        return arguments

    def _generate_call(self) -> Callable[..., list[torch.Tensor]]:
        """The call, as Python source specialised to this signature and compiled once.

        A small model's step is dominated by per-call overhead, and a generic call
        spent most of it looping over arguments: zips, per-argument list building,
        a descriptor loop. The generated call does only what this signature needs,
        argument by argument, in straight-line code (as torch.fx generates a graph's
        forward). Checks are one expression; on a mismatch `_check` raises the error.
        """
        names = [f"a{i}" for i in range(len(self.inputs))]
        env: dict[str, Any] = {"check": self._check, "empty": torch.empty,
                               "large": host_memory.empty, "arguments_of": self._arguments,
                               "raw": self._fn, "workspace": _WORKSPACE.data_ptr}
        matches = []
        for i, (a, s, dt) in enumerate(zip(names, self.inputs, self._in_dtypes)):
            env[f"S{i}"], env[f"D{i}"] = torch.Size(s.shape), dt
            matches.append(f"{a}.dtype is D{i} and {a}.shape == S{i} and {a}.is_cpu")
        lines = ["def call(*args):", "    try:", f"        [{', '.join(names)}] = args",
                 f"        ok = {' and '.join(matches) or 'True'}",
                 "    except (ValueError, AttributeError):", "        ok = False",
                 "    if not ok:", "        check(args)"]
        lines += [f"    if not {a}.is_contiguous(): {a} = {a}.contiguous()" for a in names]
        outs = []
        for k, ((_, s, dt), nbytes) in enumerate(zip(self._computed, self._large)):
            env[f"O{k}"], env[f"U{k}"] = tuple(s.shape), dt
            lines.append(f"    o{k} = large(O{k}, U{k}, {nbytes})" if nbytes
                         else f"    o{k} = empty(O{k}, dtype=U{k})")
            outs.append(f"o{k}")
        pointers = [f"{a}.data_ptr()" for a in (*names, *outs)]
        if self.workspace > 0:
            pointers.append(f"workspace({self.workspace})")
        lines.append("    arguments = arguments_of()")
        if pointers:
            descriptors = [f"d{j}" for j in range(len(pointers))]
            lines.append(f"    [{', '.join(descriptors)}] = arguments.descriptors"
                         + ("[:-1]" if self.workspace < 0 else ""))
            lines += [f"    {d}.allocated = {d}.aligned = {p}"
                      for d, p in zip(descriptors, pointers)]
        lines += self._growing_workspace(env)
        lines.append("    raw(arguments.packed)")
        if self.workspace < 0:
            lines.append("    grown(w)")
        if self._index_errors is not None:
            env["errors"] = self._index_errors
            lines.append(f"    errors.raise_if_set({self.name!r})")
        results = iter(outs)
        returned = [f"args[{self._forwarded[k]}]" if k in self._forwarded else next(results)
                    for k in range(len(self.outputs))]
        lines.append(f"    return [{', '.join(returned)}]")
        exec(compile("\n".join(lines), f"<fusegrad call @{self.name}>", "exec"), env)
        return env["call"]


    def _growing_workspace(self, env: dict[str, Any]) -> list[str]:
        """A generated call's lines that pass a growing workspace (the last descriptor)."""
        if self.workspace >= 0:
            return []
        env["growing"], env["grown"] = _WORKSPACE.growing, _WORKSPACE.grow_to_need
        return [f"    w = growing(arguments.descriptors[-1], {-self.workspace})"]

    def _generate_symbolic_call(self) -> Callable[..., list[torch.Tensor]]:
        """The call of an entry with symbolic sizes, generated as `_generate_call`'s: it
        binds each symbol from the first input dim that is that symbol (or from `sizes`,
        for a backward's), checks every other input dim, allocates the outputs at the
        sizes, and sets the descriptors' sizes and strides."""
        names = [f"a{i}" for i in range(len(self.inputs))]
        env: dict[str, Any] = {"check": self._check, "mismatch": self.bind_sizes,
                               "alloc": host_memory.empty, "arguments_of": self._arguments,
                               "raw": self._fn, "workspace": _WORKSPACE.data_ptr,
                               "geometry": _set_geometry}
        lines = ["def call(*args, sizes=None):", "    try:",
                 f"        [{', '.join(names)}] = args"]
        matches = []
        for i, (a, s, dt) in enumerate(zip(names, self.inputs, self._in_dtypes)):
            env[f"D{i}"] = dt
            matches.append(f"{a}.dtype is D{i} and {a}.dim() == {s.rank} and {a}.is_cpu")
        lines += [f"        ok = {' and '.join(matches) or 'True'}",
                  "    except (ValueError, AttributeError):", "        ok = False",
                  "    if not ok:", "        check(args)"]
        wanted = abi.symbols_of(s.shape for s in (*self.inputs, *self.outputs)) | \
            set(self.size_arguments)
        lines += abi.binding_source(names, [s.shape for s in self.inputs], wanted)
        lines += [f"    if not {a}.is_contiguous(): {a} = {a}.contiguous()" for a in names]
        outs, shapes = [], {}
        for k, (_, s, dt) in enumerate(self._computed):
            env[f"U{k}"] = dt
            shape = "(" + "".join(f"{abi.dim_code(d)}, " for d in s.shape) + ")"
            itemsize = abi.itemsize(s.dtype)
            lines.append(f"    o{k} = alloc({shape}, U{k}, "
                         f"{' * '.join([str(itemsize)] + [abi.dim_code(d) for d in s.shape])})")
            outs.append(f"o{k}")
            shapes[f"o{k}"] = s
        lines.append("    arguments = arguments_of()")
        tensors = [*zip(names, self.inputs), *((o, shapes[o]) for o in outs)]
        pointers = [f"{a}.data_ptr()" for a, _ in tensors]
        if self.workspace > 0:
            pointers.append(f"workspace({self.workspace})")
        if pointers:
            descriptors = [f"d{j}" for j in range(len(pointers))]
            lines.append(f"    [{', '.join(descriptors)}] = arguments.descriptors"
                         + ("[:-1]" if self.workspace < 0 else ""))
            lines += [f"    {d}.allocated = {d}.aligned = {p}"
                      for d, p in zip(descriptors, pointers)]
            lines += [f"    geometry({d}, {a}.shape)" for d, (a, s) in zip(descriptors, tensors)
                      if not s.is_static]
        lines += [f"    arguments.sizes[{j}].value = {name}"
                  for j, name in enumerate(self.size_arguments)]
        lines += self._growing_workspace(env)
        lines.append("    raw(arguments.packed)")
        if self.workspace < 0:
            lines.append("    grown(w)")
        if self._index_errors is not None:
            env["errors"] = self._index_errors
            lines.append(f"    errors.raise_if_set({self.name!r})")
        results = iter(outs)
        returned = [f"args[{self._forwarded[k]}]" if k in self._forwarded else next(results)
                    for k in range(len(self.outputs))]
        lines.append(f"    return [{', '.join(returned)}]")
        exec(compile("\n".join(lines), f"<fusegrad call @{self.name}>", "exec"), env)
        return env["call"]


def _set_geometry(descriptor: Any, shape: Sequence[int]) -> None:
    """A row-major memref descriptor's sizes and strides for `shape`."""
    step = 1
    for k in range(len(shape) - 1, -1, -1):
        descriptor.sizes[k] = shape[k]
        descriptor.strides[k] = step
        step *= shape[k]


class OutOfRangeIndex(IndexError):
    """A compiled gather/index_select/scatter_add met an index outside its dim: the
    caller's data is wrong (not the compilation), exactly where eager raises too."""


class LibraryCallError(RuntimeError):
    """A call of PyTorch's C shim from compiled code (a convolution, attention or 16-bit
    matmul kernel, or wrapping a buffer as a tensor) returned an error: its results were
    not written, so the call's outputs are not to be used."""


# The C shim functions compiled code calls (codegen/cpu/library/), by number: a failing
# call records its number in the error flag (`CompiledErrors`). Append only: compiled
# libraries hold the numbers.
LIBRARY_CALLS: tuple[tuple[str, str], ...] = (
    ("aoti_torch_create_tensor_from_blob", "Wrapping a buffer as a PyTorch tensor"),
    ("aoti_torch_delete_tensor_object", "Releasing a PyTorch tensor"),
    ("aoti_torch_copy_", "Copying a PyTorch kernel's result"),
    ("aoti_torch_empty_strided", "Allocating a channels-last copy"),
    ("aoti_torch_cpu_convolution", "PyTorch's convolution kernel"),
    ("aoti_torch_cpu_convolution_backward", "PyTorch's convolution backward kernel"),
    ("aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu",
     "PyTorch's flash attention kernel"),
    ("aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu_backward",
     "PyTorch's flash attention backward kernel"),
    ("aoti_torch_cpu_baddbmm_out", "PyTorch's baddbmm kernel"),
)


def _torch_error_message() -> str:
    """What the last exception PyTorch's C shim caught on this thread said ('' if the
    shim cannot tell)."""
    try:
        lib = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
        what = lib.torch_exception_get_what_without_backtrace
    except (OSError, AttributeError):
        return ""
    what.restype = ctypes.c_char_p
    message = what()
    return message.decode(errors="replace").strip() if message else ""


class CompiledErrors:
    """The module's error flag (conversion/index_check.py): the function that takes
    (reads and clears) it, and the sites' descriptions. The flag's low 16 bits are the
    1-based site; the high ones are 0 for an index out of range, else a failed library
    call's number in LIBRARY_CALLS (8 bits) and its return code (above)."""

    def __init__(self, take: "CpuFunction", sites: Sequence[str]) -> None:
        self.take = take
        self.sites = list(sites)

    def raise_if_set(self, function: str) -> None:
        flag = int(self.take()[0])
        if flag:
            self.raise_error(function, flag)

    def raise_error(self, function: str, flag: int) -> None:
        site, detail = self.sites[(flag & 0xFFFF) - 1], flag >> 16
        if not detail:
            raise OutOfRangeIndex(f"@{function}: index out of range in {site}")
        number, code = detail & 0xFF, detail >> 8
        name, what = (LIBRARY_CALLS[number] if number < len(LIBRARY_CALLS) else
                      (f"library call #{number}", "A library call"))
        reason = _torch_error_message()
        raise LibraryCallError(f"@{function}: {what} failed in {site} ({name} returned "
                               f"{code}){': ' + reason if reason else ''}")


Entries = Mapping[str, tuple[Sequence[TensorSig], Sequence[TensorSig]]]


class CpuModule:
    """Compiled entries, one `CpuFunction` each, whatever holds the code.

    `lookup(name)` is the address of the packed C-interface wrapper of entry
    `name` (0 if absent); `owner` (an ExecutionEngine, a ctypes library) holds
    the code. Functions keep this module, hence the code, alive (so the module
    can be weakly referenced and lives as long as some function of it).
    `forwarded`: per entry, result index -> argument index of results handed
    back as arguments. `index_errors`, when the code checks indices or calls PyTorch's
    kernels: the function that takes the error flag, and the sites
    (conversion/index_check.py).
    `workspaces`: per entry that takes one, its workspace bytes (codegen/cpu/plan_workspace.py).
    `size_arguments`: per entry that takes some, the symbols of its size arguments
    (conversion/sizes.py).
    """

    def __init__(self, lookup: Callable[[str], int], owner: object, entries: Entries,
                 forwarded: Mapping[str, Mapping[int, int]] | None = None,
                 index_errors: tuple[str, Sequence[str]] | None = None,
                 workspaces: Mapping[str, int] | None = None,
                 size_arguments: Mapping[str, Sequence[str]] | None = None) -> None:
        host_memory.keep_freed_memory()
        self.owner = owner
        self.entries = {n: (list(ins), list(outs)) for n, (ins, outs) in entries.items()}
        self.forwarded = {n: dict(m) for n, m in (forwarded or {}).items()}
        self.workspaces = {n: int(b) for n, b in (workspaces or {}).items() if b}
        self.size_arguments = {n: list(v) for n, v in (size_arguments or {}).items() if v}
        self.index_errors = (index_errors[0], list(index_errors[1])) if index_errors else None
        errors = None
        if self.index_errors:
            take_name, sites = self.index_errors
            take = CpuFunction(take_name, _PACKED_FN(_address(lookup, take_name)), [],
                               [TensorSig((), "i32")], owner)
            errors = CompiledErrors(take, sites)
        self._functions = {
            name: CpuFunction(name, _PACKED_FN(_address(lookup, name)), ins, outs, self, errors,
                              self.forwarded.get(name), self.workspaces.get(name, 0),
                              self.size_arguments.get(name, ()))
            for name, (ins, outs) in self.entries.items()}

    def function(self, name: str) -> CpuFunction:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"no entry function @{name}; entries: {self.names}") from None

    @property
    def names(self) -> list[str]:
        return sorted(self._functions)


def _address(lookup: Callable[[str], int], name: str) -> int:
    addr = lookup(name)
    if not addr:
        raise RuntimeError(f"compiled module has no entry @{name} (no C interface)")
    return addr

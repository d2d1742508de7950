"""The CUDA runtime: run a compiled launch plan with PyTorch tensors.

Importable without MLIR (only the standard library and torch; the driver
binding `cuda-bindings` is imported when a real driver is first needed), so a
plan written on a machine without a GPU runs where only torch and
cuda-bindings are installed.

A **launch plan** (`LaunchPlan`) is what `fusegrad.codegen.cuda.launch_plan`
reads off the host function after the CUDA pipeline: per public function, its
input/output signatures and a list of steps over named buffers (`arg<i>`:
the function's arguments, inputs then the outputs it computes; `t<i>`:
temporaries), plus one
kernel module per `gpu.binary` with PTX (and, where `ptxas` was available,
cubin) images per chip. Steps, as JSON objects:

| op | fields | runs as |
| --- | --- | --- |
| `alloc` | buf, shape, dtype | `torch.empty` on the device (caching allocator) |
| `free` | buf | drop the reference (stream-ordered reuse) |
| `view` | buf, base, offset, shape, strides (elements) | `base.as_strided(...)` |
| `copy` | src, dst | `dst.copy_(src)` |
| `launch` | module, kernel, grid, block, smem, args (`{"buf": name}`, `{"scalar": v, "type": "i64"}` or `{"size": "s0", "type": "i64"}`) | `cuLaunchKernel` on the current stream |
| `matmul` | a, b, c, overwrite | `torch.mm`/`torch.bmm` into c (cuBLAS), or `addmm_`/`baddbmm_` |
| `conv2d` | x, w, y, stride, dilation, groups, overwrite | `torch.nn.functional.conv2d` (cuDNN) into y |
| `conv2d_grad` | grad, input or weight (the other null), out, stride, padding, dilation, groups | `aten.convolution_backward` (cuDNN) for that one gradient, copied into out (the out buffer stands in for the operand only its shape is read of) |
| `attention` | q, k, v, mask (null: none), out, lse, scale, causal | PyTorch's fused SDPA kernel eager picks (`runtime/sdpa.py`), copied into out and lse |
| `attention_grad` | grad, q, k, v, out, lse, mask, grad_q, grad_k, grad_v, scale, causal | that kernel's backward, copied into the three gradients |
| `index_flag` | buf | the program's index-error flag (one `int32` on the device) |
| `constant` | buf, name | the plan's constant `name`, uploaded once per program |

A function compiled once for every size has symbolic dims in its signatures
(`TensorSig`), and sizes as text where a static one has numbers: alloc shapes, view
geometry, launch grids and size arguments (`runtime/plan_sizes.py`). A call binds the
sizes from its inputs' shapes and runs the steps at their values.

Gather-like kernels clamp an out-of-range index and store their site number
(1-based into the plan's `index_sites`) in the index-error flag. A call that
used the flag copies it to pinned host memory behind its kernels, without
waiting for them; the first later call of the program that finds the copy done
(or `check_index_errors()`, which waits) raises `OutOfRangeIndex` naming the
site and clears the flag: an error surfaces one call late, as CUDA's own
asynchronous errors do, and is never dropped.

`LaunchPlan.save(dir)` writes `plan.json` and the images beside it;
`LaunchPlan.load(dir)` reads them back. `CudaProgram(plan)` runs it: kernels
are launched on PyTorch's current stream with pointers of torch-allocated
tensors (bare-pointer ABI: one `u64` per buffer), every driver call is
checked, and errors name the kernel, the module and the step.

The driver sits behind `Driver` (load a module, get a function, launch), so
tests substitute a fake one; `CudaBindingsDriver` is the real one.
"""
from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence

from .abi import DTYPES, TensorSig, torch_dtype
from . import sdpa
from .plan_sizes import PlanSizes, SizeError, is_symbolic_step, step_sizes

log = logging.getLogger(__name__)

PLAN_FORMAT = "fusegrad-cuda-plan"
# 2: index_flag steps, index_sites; 3: constants; 4: conv2d_grad; 5: forwarded results;
# 6: symbolic sizes (a version 5 plan is a static version 6 one); 7: attention steps
PLAN_VERSION = 7
READ_VERSIONS = (5, 6, 7)
STEP_FIELDS = {
    "alloc": ("buf", "shape", "dtype"),
    "free": ("buf",),
    "view": ("buf", "base", "offset", "shape", "strides"),
    "copy": ("src", "dst"),
    "launch": ("module", "kernel", "grid", "block", "smem", "args"),
    "matmul": ("a", "b", "c", "overwrite"),
    "conv2d": ("x", "w", "y", "stride", "dilation", "groups", "overwrite"),
    "conv2d_grad": ("grad", "input", "weight", "out", "stride", "padding", "dilation",
                    "groups"),
    "index_flag": ("buf",),
    "constant": ("buf", "name"),
    **sdpa.STEP_FIELDS,
}
# graphs="auto": functions holding at most this many bytes (`PlanFunction.footprint`)
# replay from CUDA graphs. At such sizes issuing kernels from Python takes longer than
# running them (a small GPT-2's training step: 9.1 ms launched plainly, 4.1 ms replayed,
# 7.9 ms eager, on an H200), and the memory a graph keeps between calls stays small
AUTO_GRAPH_MAX_BYTES = 256 << 20
GRAPH_MODES = (False, True, "auto")
# a function of symbolic sizes keeps its steps at this many bindings of its sizes (the
# least recently used dropped), each evaluated once: a step costs microseconds to issue
# from Python, evaluating its sizes again at every call would add to that
SHAPES_KEPT = 64
_SCALAR_CTYPES = {"i64": ctypes.c_int64, "i32": ctypes.c_int32, "i16": ctypes.c_int16,
                  "i8": ctypes.c_int8, "f32": ctypes.c_float, "f64": ctypes.c_double}


class PlanError(ValueError):
    """A launch plan is malformed, or does not fit the call or the device."""


class CudaError(RuntimeError):
    """A CUDA driver call failed; the message names the call, the kernel and the step."""


class DriverError(RuntimeError):
    """Raised by a `Driver`: `call` failed with the driver's error `code` (a name)."""

    def __init__(self, call: str, code: str) -> None:
        super().__init__(f"{call} failed: {code}")
        self.call = call
        self.code = code


# ---------------------------------------------------------------- the plan

@dataclass
class Image:
    """One chip's code for a kernel module: PTX text (JIT by the driver) and/or a cubin."""

    chip: str
    ptx: Optional[bytes] = None
    cubin: Optional[bytes] = None


@dataclass
class KernelModule:
    name: str
    kernels: list[str]
    images: dict[str, Image] = field(default_factory=dict)  # chip -> image


@dataclass
class PlanFunction:
    name: str
    inputs: list[TensorSig]
    outputs: list[TensorSig]
    steps: list[dict]
    # outputs that are inputs (a forward saving a parameter for its backward): output
    # index -> input index, handed back as they are; the others are out-params, in order
    forwarded: dict[int, int] = field(default_factory=dict)

    @property
    def computed(self) -> list[int]:
        """The outputs the function writes (its out-params, in order)."""
        return [j for j in range(len(self.outputs)) if j not in self.forwarded]

    @property
    def symbolic(self) -> bool:
        """Is it compiled for every value of some sizes (`runtime/plan_sizes.py`)?"""
        return not all(s.is_static for s in (*self.inputs, *self.outputs)) or \
            any(is_symbolic_step(s) for s in self.steps)

    def footprint(self, steps: Sequence[dict] | None = None,
                  outputs: Sequence[Sequence[int]] | None = None) -> int:
        """Bytes a call holds at most: its temporaries at their peak plus its outputs (what
        a CUDA graph of it keeps allocated between calls). A function of symbolic sizes
        gives its `steps` and `outputs` shapes at a binding of them (`PlanSizes.at`)."""
        size = {}
        live = peak = 0
        for s in self.steps if steps is None else steps:
            if s["op"] == "alloc":
                size[s["buf"]] = _nbytes(s["shape"], s["dtype"])
                live += size[s["buf"]]
                peak = max(peak, live)
            elif s["op"] == "free":
                live -= size.pop(s["buf"], 0)
        shapes = [s.shape for s in self.outputs] if outputs is None else outputs
        return peak + sum(_nbytes(shapes[j], self.outputs[j].dtype) for j in self.computed)


@dataclass
class Constant:
    """A constant buffer the kernels read (a dense literal of the program): row-major data."""

    shape: list[int]
    dtype: str
    data: bytes

    def to_json(self, name: str) -> dict:
        return {"shape": list(self.shape), "dtype": self.dtype, "file": _constant_file(name)}


@dataclass
class LaunchPlan:
    functions: dict[str, PlanFunction]
    modules: dict[str, KernelModule]
    index_sites: list[str] = field(default_factory=list)  # "dg.gather at file:line", ...
    constants: dict[str, Constant] = field(default_factory=dict)

    # ---- serialisation
    def to_json(self) -> dict:
        """The plan as JSON data; images are referenced by file name (see `save`)."""
        return {
            "format": PLAN_FORMAT, "version": PLAN_VERSION,
            "functions": {f.name: {"inputs": [s.to_json() for s in f.inputs],
                                   "outputs": [s.to_json() for s in f.outputs],
                                   "forwarded": {str(j): i for j, i in f.forwarded.items()},
                                   "steps": f.steps}
                          for f in self.functions.values()},
            "modules": {m.name: {"kernels": m.kernels,
                                 "images": {c: {k: _image_file(m.name, c, k)
                                                for k in ("ptx", "cubin")
                                                if getattr(img, k) is not None}
                                            for c, img in m.images.items()}}
                        for m in self.modules.values()},
            "index_sites": list(self.index_sites),
            "constants": {n: c.to_json(n) for n, c in self.constants.items()},
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write `plan.json` and one file per image into directory `path`."""
        os.makedirs(path, exist_ok=True)
        for m in self.modules.values():
            for chip, img in m.images.items():
                for kind in ("ptx", "cubin"):
                    data = getattr(img, kind)
                    if data is not None:
                        with open(os.path.join(path, _image_file(m.name, chip, kind)), "wb") as f:
                            f.write(data)
        for name, c in self.constants.items():
            with open(os.path.join(path, _constant_file(name)), "wb") as f:
                f.write(c.data)
        with open(os.path.join(path, "plan.json"), "w") as f:
            json.dump(self.to_json(), f, indent=1)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LaunchPlan":
        """Read a plan written by `save`; raises PlanError naming what is wrong."""
        try:
            with open(os.path.join(path, "plan.json")) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise PlanError(f"cannot read launch plan {path}/plan.json: {e}") from None

        def read(name: str) -> bytes:
            try:
                with open(os.path.join(path, name), "rb") as f:
                    return f.read()
            except OSError as e:
                raise PlanError(f"launch plan {path}: missing image {name}: {e}") from None

        return cls.from_json(data, read)

    @classmethod
    def from_json(cls, data: dict, read: Callable[[str], bytes]) -> "LaunchPlan":
        if data.get("format") != PLAN_FORMAT or data.get("version") not in READ_VERSIONS:
            raise PlanError(f"not a {PLAN_FORMAT} version {PLAN_VERSION} plan: "
                            f"format={data.get('format')!r} version={data.get('version')!r}")
        modules = {}
        for name, m in data["modules"].items():
            images = {chip: Image(chip, **{k: read(fn) for k, fn in files.items()})
                      for chip, files in m["images"].items()}
            modules[name] = KernelModule(name, list(m["kernels"]), images)
        functions = {}
        for name, f in data["functions"].items():
            functions[name] = PlanFunction(
                name, [TensorSig.from_json(s) for s in f["inputs"]],
                [TensorSig.from_json(s) for s in f["outputs"]],
                list(f["steps"]), {int(j): int(i) for j, i in f["forwarded"].items()})
        constants = {n: Constant(list(c["shape"]), c["dtype"], read(c["file"]))
                     for n, c in data["constants"].items()}
        plan = cls(functions, modules, list(data["index_sites"]), constants)
        plan.validate()
        return plan

    def validate(self) -> None:
        """Every step well-formed, every buffer defined before use, every kernel known."""
        for f in self.functions.values():
            for j, i in f.forwarded.items():
                if not (0 <= j < len(f.outputs) and 0 <= i < len(f.inputs)) or \
                        f.outputs[j] != f.inputs[i]:
                    raise PlanError(f"@{f.name}: output {j} cannot be input {i}")
            live = {f"arg{i}" for i in range(len(f.inputs) + len(f.computed))}
            for n, s in enumerate(f.steps):
                where = f"@{f.name} step {n} ({s.get('op')})"
                op = s.get("op")
                if op not in STEP_FIELDS:
                    raise PlanError(f"{where}: unknown step op")
                missing = [k for k in STEP_FIELDS[op] if k not in s]
                if missing:
                    raise PlanError(f"{where}: missing fields {missing}")
                used = {"free": [s.get("buf")], "view": [s.get("base")],
                        "copy": [s.get("src"), s.get("dst")],
                        "matmul": [s.get("a"), s.get("b"), s.get("c")],
                        "conv2d": [s.get("x"), s.get("w"), s.get("y")],
                        "conv2d_grad": [b for b in (s.get("grad"), s.get("input"),
                                                    s.get("weight"), s.get("out")) if b],
                        "launch": [a["buf"] for a in s.get("args", []) if "buf" in a],
                        **{k: [s.get(b) for b in bs if s.get(b)]
                           for k, bs in sdpa.STEP_BUFFERS.items()}}.get(op, [])
                for b in used:
                    if b not in live:
                        raise PlanError(f"{where}: buffer {b!r} used before it is defined")
                if op == "free":
                    live.discard(s["buf"])
                if op == "index_flag" and not self.index_sites:
                    raise PlanError(f"{where}: an index flag, but the plan has no index sites")
                if op == "constant" and s["name"] not in self.constants:
                    raise PlanError(f"{where}: no constant {s['name']!r} in the plan")
                if op in ("alloc", "view", "index_flag", "constant"):
                    if op == "alloc" and s["dtype"] not in DTYPES:
                        raise PlanError(f"{where}: unknown dtype {s['dtype']!r}")
                    live.add(s["buf"])
                if op == "launch":
                    m = self.modules.get(s["module"])
                    if m is None or s["kernel"] not in m.kernels:
                        raise PlanError(f"{where}: no kernel {s['kernel']!r} in module "
                                        f"{s['module']!r}")
                    for a in s["args"]:
                        if "buf" not in a and (a.get("type") not in _SCALAR_CTYPES or
                                               ("scalar" in a) == ("size" in a)):
                            raise PlanError(f"{where}: bad kernel argument {a}")
                try:
                    step_sizes(s)
                except SizeError as e:
                    raise PlanError(f"{where}: {e}") from None


ENTRY_METADATA = "meta.json"


def write_entry(directory: str | os.PathLike, plan: LaunchPlan,
                extra: Optional[dict] = None) -> None:
    """Save `plan` in `directory` (see `LaunchPlan.save`) with `meta.json`: `extra` plus
    the sha256 of every file, so that a corrupted or truncated copy (a compile cache
    entry) is detected before it runs."""
    from .cpu_library import sha256_file
    plan.save(directory)
    files = sorted(f for f in os.listdir(directory) if f != ENTRY_METADATA)
    meta = dict(extra or {})
    meta.update({"format": PLAN_FORMAT, "version": PLAN_VERSION,
                 "sha256": {f: sha256_file(os.path.join(directory, f)) for f in files}})
    with open(os.path.join(directory, ENTRY_METADATA), "w") as f:
        json.dump(meta, f, indent=1)


def read_entry(directory: str | os.PathLike) -> tuple[LaunchPlan, dict]:
    """The plan `write_entry` saved in `directory` and its metadata. Raises PlanError
    naming what is wrong (unreadable metadata, another format, a checksum mismatch)."""
    from .cpu_library import sha256_file
    try:
        with open(os.path.join(directory, ENTRY_METADATA)) as f:
            meta = json.load(f)
        if (meta.get("format"), meta.get("version")) != (PLAN_FORMAT, PLAN_VERSION):
            raise PlanError(f"not a {PLAN_FORMAT} version {PLAN_VERSION} entry")
        for name, digest in meta["sha256"].items():
            if sha256_file(os.path.join(directory, name)) != digest:
                raise PlanError(f"{name} does not match its checksum")
    except PlanError as e:
        raise PlanError(f"{directory}: {e}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise PlanError(f"{directory}: {type(e).__name__}: {e}") from None
    return LaunchPlan.load(directory), meta


def _constant_file(name: str) -> str:
    return f"{name}.bin"


def _image_file(module: str, chip: str, kind: str) -> str:
    return f"{module}.{chip}.{kind}"


# ---------------------------------------------------------------- the driver

class Driver(Protocol):
    """The few driver entry points the runtime needs (fakes implement this in tests)."""

    def load_module(self, image: bytes, kind: str) -> Any:
        """Load a `ptx` (NUL-terminated text) or `cubin` image; returns a module handle."""

    def get_function(self, module: Any, name: str) -> Any: ...

    def launch(self, function: Any, grid: Sequence[int], block: Sequence[int], smem: int,
               stream: int, params: Sequence[tuple[str, Any]]) -> None:
        """Launch; `params` are `("ptr", address)` or `(scalar type, value)` pairs."""

    def unload_module(self, module: Any) -> None: ...


def _cu_launch_kernel() -> Callable[..., int]:
    """libcuda's `cuLaunchKernel` as a ctypes function (handles and the stream as ints)."""
    f = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    u = ctypes.c_uint
    f.argtypes = [ctypes.c_void_p, u, u, u, u, u, u, u, ctypes.c_void_p, ctypes.c_void_p,
                  ctypes.c_void_p]
    f.restype = ctypes.c_int
    return f


def driver_available() -> tuple[bool, str]:
    """(True, "") when libcuda loads, cuda-bindings imports and a device answers.

    Checks `ctypes.CDLL("libcuda.so.1")` first: without a driver, `cuInit`
    from cuda-bindings raises instead of returning an error code.
    """
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return False, f"no CUDA driver (libcuda.so.1: {e})"
    try:
        from cuda.bindings import driver  # noqa: F401
    except ImportError as e:
        return False, f"cuda-bindings is not installed ({e}): pip install 'fusegrad[cuda]'"
    try:
        import torch
        if not torch.cuda.is_available():
            return False, "torch sees no CUDA device"
    except Exception as e:  # a torch without CUDA, a broken driver: not usable
        return False, f"torch cannot use CUDA: {type(e).__name__}: {e}"
    return True, ""


class CudaBindingsDriver:
    """The CUDA driver API through `cuda-bindings` (`cuda.bindings.driver`)."""

    def __init__(self, device_index: int = 0) -> None:
        try:
            from cuda.bindings import driver
        except ImportError as e:
            raise CudaError(f"cuda-bindings is not installed ({e}): "
                            "pip install 'fusegrad[cuda]'") from None
        self._d = driver
        self._thread = threading.local()  # per thread: context made current, launch params
        self._launch_kernel = _cu_launch_kernel()
        try:
            self._call("cuInit", driver.cuInit(0))
        except DriverError:
            raise
        except Exception as e:  # cuda-bindings raises when libcuda is missing
            raise DriverError("cuInit", f"{type(e).__name__}: {e}") from None
        self._ensure_context(device_index)

    def _call(self, name: str, result: Any) -> Any:
        if isinstance(result, tuple):
            err, rest = result[0], result[1:]
        else:
            err, rest = result, ()
        if err != self._d.CUresult.CUDA_SUCCESS:
            try:
                code = self._d.cuGetErrorName(err)[1].decode()
            except Exception:  # an unknown code: show the number
                code = str(err)
            raise DriverError(name, code)
        if not rest:
            return None
        return rest[0] if len(rest) == 1 else rest

    def _ensure_context(self, device_index: int) -> None:
        """Make the device's primary context (the one PyTorch uses) current here."""
        d = self._d
        dev = self._call("cuDeviceGet", d.cuDeviceGet(device_index))
        self._ctx = self._call("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(dev))
        self._make_current()

    def _make_current(self) -> None:
        """The context is current per thread, and autograd runs backward passes on its own
        thread per device: without this, their first driver call fails with
        CUDA_ERROR_INVALID_CONTEXT."""
        if getattr(self._thread, "current", False):
            return
        self._call("cuCtxSetCurrent", self._d.cuCtxSetCurrent(self._ctx))
        self._thread.current = True

    def load_module(self, image: bytes, kind: str) -> Any:
        self._make_current()
        if kind == "ptx" and not image.endswith(b"\0"):
            image = image + b"\0"
        return self._call("cuModuleLoadData", self._d.cuModuleLoadData(image))

    def get_function(self, module: Any, name: str) -> Any:
        return self._call("cuModuleGetFunction",
                          self._d.cuModuleGetFunction(module, name.encode()))

    def launch(self, function: Any, grid: Sequence[int], block: Sequence[int], smem: int,
               stream: int, params: Sequence[tuple[str, Any]]) -> None:
        """`cuLaunchKernel` called through ctypes with a parameter block kept per kernel
        and thread: cuda-bindings' wrapper and fresh ctypes objects per launch cost tens
        of microseconds, more than a small kernel runs."""
        self._make_current()
        handle = int(function)
        blocks = self._thread.__dict__.setdefault("params", {})
        slots = blocks.get(handle)
        if slots is None:
            storage = [ctypes.c_void_p() if t == "ptr" else _SCALAR_CTYPES[t]() for t, _ in params]
            array = (ctypes.c_void_p * max(1, len(storage)))(
                *[ctypes.addressof(x) for x in storage])
            slots = blocks[handle] = (storage, array)
        storage, array = slots
        for x, (_, v) in zip(storage, params):
            x.value = v
        err = self._launch_kernel(handle, grid[0], grid[1], grid[2], block[0], block[1],
                                  block[2], smem, stream, array, None)
        if err:
            self._call("cuLaunchKernel", self._d.CUresult(err))

    def unload_module(self, module: Any) -> None:
        self._make_current()
        self._call("cuModuleUnload", self._d.cuModuleUnload(module))


# ---------------------------------------------------------------- running

def _nbytes(shape: Sequence[int], dtype: str) -> int:
    return TensorSig(tuple(shape), dtype).nbytes


def device_chip(device: Any) -> str:
    """`sm_XY` of a CUDA device, from PyTorch."""
    import torch
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


class CudaProgram:
    """Runs the functions of a `LaunchPlan` on one CUDA device.

    `driver`, `device`, `stream` and `chip` default to the real driver, the
    current CUDA device, PyTorch's current stream and the device's compute
    capability; tests pass a fake driver, `device="cpu"`, `stream=lambda: 0`.
    With `graphs=True`, `function()` replays each function from a CUDA graph after its
    first call (`runtime/cuda_graphs.py`); with "auto", the functions whose footprint
    is at most AUTO_GRAPH_MAX_BYTES on a CUDA device (a function of symbolic sizes: at
    the sizes of the call).
    """

    def __init__(self, plan: LaunchPlan, driver: Optional[Driver] = None,
                 device: Any = None, stream: Optional[Callable[[], int]] = None,
                 chip: Optional[str] = None, graphs: bool | str = False) -> None:
        import torch
        if graphs not in GRAPH_MODES:
            raise ValueError(f"graphs={graphs!r} is not one of {GRAPH_MODES}")
        plan.validate()
        self.plan = plan
        self.graphs = graphs
        self.device = torch.device(device if device is not None else "cuda")
        if driver is None:
            torch.cuda.init()
            if self.device.index is None:  # tensors name their device's index: cuda:N
                self.device = torch.device("cuda", torch.cuda.current_device())
            driver = CudaBindingsDriver(self.device.index or 0)
        self.driver = driver
        self._stream = stream or (lambda: torch.cuda.current_stream(self.device).cuda_stream)
        self.chip = chip or device_chip(self.device)
        self._modules: dict[str, Any] = {}
        self._functions: dict[tuple[str, str], Any] = {}
        self._sizes = {f.name: PlanSizes(f.name, f.inputs, f.outputs, f.steps)
                       for f in plan.functions.values() if f.symbolic}
        # per function, its steps at the bindings of its sizes last used (static: one)
        self._bound: dict[str, OrderedDict[tuple[int, ...], BoundSteps]] = {}
        self._constants: dict[str, Any] = {}  # uploaded once, on first use
        self._flag: Any = None  # the index-error flag, once a call needs it
        self._flagged = {f.name for f in plan.functions.values()
                         if any(s["op"] == "index_flag" for s in f.steps)}
        self._pending: Optional[tuple[Any, Any]] = None  # (host copy of the flag, its event)

    @classmethod
    def load(cls, path: str | os.PathLike, **kwargs: Any) -> "CudaProgram":
        return cls(LaunchPlan.load(path), **kwargs)

    # ---- modules
    def _pick_image(self, m: KernelModule) -> tuple[bytes, str, str]:
        """The cubin for this chip, else the PTX of the newest chip not above it."""
        img = m.images.get(self.chip)
        if img is not None and img.cubin is not None:
            return img.cubin, "cubin", self.chip
        mine = _chip_number(self.chip)
        ptx = sorted((c for c, i in m.images.items()
                      if i.ptx is not None and _chip_number(c) <= mine), key=_chip_number)
        if ptx:
            return m.images[ptx[-1]].ptx, "ptx", ptx[-1]
        raise PlanError(f"kernel module {m.name!r} has no image for {self.chip} "
                        f"(has {sorted(m.images)}): compile with chips including {self.chip}")

    def _function(self, module: str, kernel: str, where: str) -> Any:
        key = (module, kernel)
        if key in self._functions:
            return self._functions[key]
        if module not in self._modules:
            image, kind, chip = self._pick_image(self.plan.modules[module])
            try:
                self._modules[module] = self.driver.load_module(image, kind)
            except DriverError as e:
                raise CudaError(f"{e.call} failed for kernel module {module!r} ({kind} for "
                                f"{chip}) needed by kernel {kernel!r} at {where}: {e.code}"
                                ) from None
            log.debug("loaded module %s (%s for %s)", module, kind, chip)
        try:
            fn = self.driver.get_function(self._modules[module], kernel)
        except DriverError as e:
            raise CudaError(f"{e.call} failed for kernel {kernel!r} in module {module!r} "
                            f"at {where}: {e.code}") from None
        self._functions[key] = fn
        return fn

    def close(self) -> None:
        """Unload the kernel modules."""
        for name, mod in list(self._modules.items()):
            try:
                self.driver.unload_module(mod)
            except DriverError as e:
                log.warning("unloading kernel module %s: %s", name, e)
        self._modules.clear()
        self._functions.clear()
        self._bound.clear()

    # ---- calls
    def function(self, name: str) -> Any:
        """A callable running function `name` on torch tensors, returning its outputs."""
        if name not in self.plan.functions:
            raise PlanError(f"no function @{name} in the plan (has "
                            f"{sorted(self.plan.functions)})")
        if name in self._sizes and self.graphs == "auto":
            graphed = self.device.type == "cuda"  # decided per binding of its sizes
        else:
            graphed = self.replays(name)
        if graphed:
            from .cuda_graphs import GraphedFunction
            return GraphedFunction(self, name)
        return CudaFunction(self, name)

    def replays(self, name: str, values: tuple[int, ...] = ()) -> bool:
        """Does a call of @name at the values of its sizes (`bind`) replay from a CUDA
        graph (`graphs`)?"""
        if self.graphs != "auto":
            return bool(self.graphs)
        footprint = self.footprint(name, values)
        graphed = self.device.type == "cuda" and footprint <= AUTO_GRAPH_MAX_BYTES
        log.debug("@%s holds %.1f MB%s: %s", name, footprint / 2**20,
                  f" at sizes {self._sizes[name].named(values)}" if values else "",
                  "replayed from a CUDA graph" if graphed else "launched plainly")
        return graphed

    def footprint(self, name: str, values: tuple[int, ...] = ()) -> int:
        """`PlanFunction.footprint` of @name at the values of its sizes."""
        bound = self.steps_at(name, values)
        return self.plan.functions[name].footprint(bound.steps, bound.outputs)

    def sizes_of(self, name: str) -> Callable[[Sequence[Any]], dict[str, int]] | None:
        """For a function of symbolic sizes, the function giving their values in a call
        with given inputs (what its backward takes as `sizes`); None for a static one."""
        sizes = self._sizes.get(name)
        return None if sizes is None else sizes.sizes_of

    def steps_at(self, name: str, values: tuple[int, ...]) -> "BoundSteps":
        """@name's steps at the values of its sizes (`bind`), evaluated once for the last
        SHAPES_KEPT of them."""
        kept = self._bound.setdefault(name, OrderedDict())
        bound = kept.get(values)
        if bound is not None:
            kept.move_to_end(values)
            return bound
        sizes = self._sizes.get(name)
        if sizes is None:
            f = self.plan.functions[name]
            bound = BoundSteps(f.steps, [tuple(s.shape) for s in f.outputs])
        else:
            bound = BoundSteps(*sizes.at(values))
            log.debug("@%s at sizes %s", name, sizes.named(values))
        kept[values] = bound
        if len(kept) > SHAPES_KEPT:
            kept.popitem(last=False)
        return bound

    def _constant(self, name: str) -> Any:
        import torch
        if name not in self._constants:
            c = self.plan.constants[name]
            dtype = torch_dtype(c.dtype)
            host = (torch.frombuffer(bytearray(c.data), dtype=dtype) if c.data
                    else torch.empty(0, dtype=dtype))
            self._constants[name] = host.reshape(c.shape).to(self.device)
        return self._constants[name]

    # ---- index errors
    def _index_flag(self) -> Any:
        import torch
        if self._flag is None:
            self._flag = torch.zeros((), dtype=torch.int32, device=self.device)
        return self._flag

    def _copy_flag_back(self) -> None:
        """Queue the flag's copy to the host behind this call's kernels."""
        import torch
        if self.device.type != "cuda":  # a fake device: already done
            self._raise_if_flagged(self._flag.clone())
            return
        host = torch.empty((), dtype=torch.int32, pin_memory=True)
        host.copy_(self._flag, non_blocking=True)
        done = torch.cuda.Event()
        done.record(torch.cuda.current_stream(self.device))
        self._pending = (host, done)

    def _raise_if_flagged(self, host: Any) -> None:
        from .cpu import OutOfRangeIndex
        site = int(host)
        if site:
            self._flag.zero_()
            raise OutOfRangeIndex(f"index out of range in {self.plan.index_sites[site - 1]} "
                                  "(in an earlier call of this compiled program on "
                                  f"{self.device})")

    def check_index_errors(self, wait: bool = True) -> None:
        """Raise `OutOfRangeIndex` if an earlier call gathered out of range. `wait=False`
        only looks at copies that are done (what each call does first)."""
        if self._pending is None:
            return
        host, done = self._pending
        if not wait and not done.query():
            return
        done.synchronize()
        self._pending = None
        self._raise_if_flagged(host)

    def bind(self, name: str, inputs: Sequence[Any],
             sizes: Optional[dict[str, int]] = None) -> tuple[int, ...]:
        """Check that `inputs` fit @name's signature on this device (PlanError names the
        first that does not), and return the values of its symbolic sizes in them
        (`PlanSizes.symbols`; () for a static function). `sizes`: values its inputs do
        not show (a backward's, bound where its forward ran)."""
        import torch
        f = self.plan.functions[name]
        if len(inputs) != len(f.inputs):
            raise PlanError(f"@{name} takes {len(f.inputs)} inputs, got {len(inputs)}")
        for i, (x, sig) in enumerate(zip(inputs, f.inputs)):
            want = torch_dtype(sig.dtype)
            if not isinstance(x, torch.Tensor):
                raise PlanError(f"@{name} input {i}: expected a tensor, got {type(x).__name__}")
            if (list(x.shape) != list(sig.shape) if sig.is_static else x.dim() != sig.rank) \
                    or x.dtype != want or x.device != self.device:
                raise PlanError(f"@{name} input {i}: expected {sig.shape if sig.is_static else sig} "
                                f"{want} on {self.device}, got {tuple(x.shape)} {x.dtype} on "
                                f"{x.device}")
        plan_sizes = self._sizes.get(name)
        if plan_sizes is None:
            return ()
        try:
            return plan_sizes.bind(inputs, sizes)
        except SizeError as e:
            raise PlanError(f"{e}; compile for this shape") from None

    def run(self, name: str, *inputs: Any, sizes: Optional[dict[str, int]] = None,
            capturing: bool = False) -> list:
        """Run @name (`sizes`: see `bind`); `capturing`: inside a CUDA-graph capture, where
        the index-error flag is neither polled nor copied back (`after_call` does it after
        a replay)."""
        import torch
        if not capturing:
            self.check_index_errors(wait=False)
        bound = self.steps_at(name, self.bind(name, inputs, sizes))
        f = self.plan.functions[name]
        env: dict[str, Any] = {}
        for i, x in enumerate(inputs):
            env[f"arg{i}"] = x if x.is_contiguous() else x.contiguous()
        outputs = []
        for j, (sig, shape) in enumerate(zip(f.outputs, bound.outputs)):
            if j in f.forwarded:
                outputs.append(inputs[f.forwarded[j]])
                continue
            out = torch.empty(shape, dtype=torch_dtype(sig.dtype), device=self.device)
            env[f"arg{len(env)}"] = out
            outputs.append(out)
        stream = self._stream()
        for n, s in enumerate(bound.steps):
            self._step(f, bound, n, s, env, stream)
        if not capturing:
            self.after_call(name)
        return outputs

    def after_call(self, name: str) -> None:
        """After a call of @name: start copying the index-error flag back if it uses it."""
        if name in self._flagged:
            self._copy_flag_back()

    def _launch_args(self, f: PlanFunction, bound: "BoundSteps", n: int,
                     s: dict) -> tuple[Any, list]:
        """A launch step's function and its arguments as (`ptr`, buffer) or (type, value),
        looked up once per step."""
        if n not in bound.launches:
            fn = self._function(s["module"], s["kernel"], f"@{f.name} step {n}")
            bound.launches[n] = (fn, [("ptr", a["buf"]) if "buf" in a
                                      else (a["type"], a["scalar"]) for a in s["args"]])
        return bound.launches[n]

    def _step(self, f: PlanFunction, bound: "BoundSteps", n: int, s: dict, env: dict,
              stream: int) -> None:
        import torch
        op = s["op"]
        if op == "launch":
            fn, args = self._launch_args(f, bound, n, s)
            params = [("ptr", env[v].data_ptr()) if t == "ptr" else (t, v) for t, v in args]
            try:
                self.driver.launch(fn, s["grid"], s["block"], s["smem"], stream, params)
            except DriverError as e:
                raise CudaError(f"{e.call} failed for kernel {s['kernel']!r} (module "
                                f"{s['module']!r}, grid {s['grid']}, block {s['block']}) at "
                                f"@{f.name} step {n}: {e.code}") from None
        elif op == "alloc":
            env[s["buf"]] = torch.empty(s["shape"], dtype=torch_dtype(s["dtype"]),
                                        device=self.device)
        elif op == "free":
            del env[s["buf"]]
        elif op == "view":
            base = env[s["base"]]
            env[s["buf"]] = base.as_strided(s["shape"], s["strides"],
                                            base.storage_offset() + s["offset"])
        elif op == "copy":
            env[s["dst"]].copy_(env[s["src"]])
        elif op == "matmul":
            _matmul(env[s["a"]], env[s["b"]], env[s["c"]], s["overwrite"])
        elif op == "conv2d":
            _conv2d(env[s["x"]], env[s["w"]], env[s["y"]], s)
        elif op == "conv2d_grad":
            _conv2d_grad(env, s)
        elif op in sdpa.STEP_BUFFERS:
            sdpa.run_step(env, s)
        elif op == "index_flag":
            env[s["buf"]] = self._index_flag()
        elif op == "constant":
            env[s["buf"]] = self._constant(s["name"])
        else:  # validate() rejects these
            raise PlanError(f"@{f.name} step {n}: unknown op {op!r}")


@dataclass
class BoundSteps:
    """A function's steps at one binding of its sizes (a static function's: its plan
    steps), its outputs' shapes there, and each launch's kernel and arguments, looked up
    at its first run (step index -> `_launch_args`)."""

    steps: list[dict]
    outputs: list[tuple[int, ...]]
    launches: dict[int, tuple[Any, list]] = field(default_factory=dict)


class CudaFunction:
    """One function of a `CudaProgram`, called on tensors. Its outputs are fresh tensors
    (the runtime allocates them), except those the plan forwards from its inputs.
    `sizes_of`: for a function of symbolic sizes, their values in a call (None if static)."""

    def __init__(self, program: CudaProgram, name: str) -> None:
        self.program, self.name = program, name
        self.returns_arguments = bool(program.plan.functions[name].forwarded)
        self.sizes_of = program.sizes_of(name)

    def __call__(self, *inputs: Any, sizes: Optional[dict[str, int]] = None) -> list:
        return self.program.run(self.name, *inputs, sizes=sizes)


# cuBLAS runs a 16-bit product whose rows do not start on 16-byte boundaries on its
# align1 kernels: on an H200, GPT-2's language-model head (vocabulary 50257) took
# 4.3-4.8 ms per product that way, about four times an aligned product's time
_ALIGN_BYTES = 16
_ALIGN_MIN_WORK = 1 << 30  # m*n*k below which the copies are not worth it


def _matmul(a: Any, b: Any, c: Any, overwrite: bool) -> None:
    """c = a @ b (or c += a @ b). A large 16-bit 2-D product whose matrices' rows are
    misaligned runs on copies with padded row strides (the same sizes: only where rows
    start changes), and its result is copied back."""
    import torch
    if c.dim() != 2:
        torch.bmm(a, b, out=c) if overwrite else c.baddbmm_(a, b)
        return
    out = c
    if c.element_size() == 2 and a.shape[0] * a.shape[1] * b.shape[1] >= _ALIGN_MIN_WORK \
            and not all(map(_rows_aligned, (a, b, c))):
        a, b, out = _row_aligned(a), _row_aligned(b), _row_aligned(c, copy=not overwrite)
    torch.mm(a, b, out=out) if overwrite else out.addmm_(a, b)
    if out is not c:
        c.copy_(out)


def _rows_aligned(x: Any) -> bool:
    """Does every row of matrix `x` (or column, where columns are contiguous) start on an
    _ALIGN_BYTES boundary, as cuBLAS's vectorized kernels need?"""
    lead = max(x.stride()) * x.element_size()
    return min(x.stride()) == 1 and lead % _ALIGN_BYTES == 0 and \
        x.data_ptr() % _ALIGN_BYTES == 0


def _row_aligned(x: Any, copy: bool = True) -> Any:
    """`x`, or a copy of it (its values where `copy`) laid out in the same order with
    its leading stride rounded up to _ALIGN_BYTES."""
    import torch
    if _rows_aligned(x):
        return x
    per = _ALIGN_BYTES // x.element_size()
    transposed = x.stride(0) == 1 and x.stride(1) != 1  # columns contiguous
    rows, cols = (x.shape[1], x.shape[0]) if transposed else tuple(x.shape)
    padded = torch.empty(rows, -(-cols // per) * per, dtype=x.dtype, device=x.device)
    view = padded[:, :cols]
    view = view.t() if transposed else view
    if copy:
        view.copy_(x)
    return view


def _conv2d(x: Any, w: Any, y: Any, s: dict) -> None:
    import torch.nn.functional as F
    g = s["groups"]
    if x.dim() == 5:  # ngchw / gfchw: grouped convolution
        n, gg, c, h, wd = x.shape
        xx = x.reshape(n, gg * c, h, wd)
        ww = w.reshape(w.shape[0] * w.shape[1], *w.shape[2:])
        r = F.conv2d(xx, ww, stride=s["stride"], dilation=s["dilation"], groups=gg)
        r = r.reshape(y.shape)
    else:
        r = F.conv2d(x, w, stride=s["stride"], dilation=s["dilation"], groups=g)
    if s["overwrite"]:
        y.copy_(r)
    else:
        y.add_(r)


def _conv2d_grad(env: dict, s: dict) -> None:
    import torch
    out = env[s["out"]]
    want_input = s["input"] is None
    x = out if want_input else env[s["input"]]
    w = env[s["weight"]] if want_input else out
    grads = torch.ops.aten.convolution_backward(
        env[s["grad"]], x, w, None, s["stride"], s["padding"], s["dilation"], False, [0, 0],
        s["groups"], [want_input, not want_input, False])
    out.copy_(grads[0] if want_input else grads[1])


def _chip_number(chip: str) -> int:
    try:
        return int(chip[3:].rstrip("a"))
    except ValueError:
        return -1

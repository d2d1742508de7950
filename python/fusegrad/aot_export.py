"""`fusegrad.export`: compile a function ahead of time into a folder that runs without MLIR.

The artifact (format in `runtime/exported.py`, which loads it) holds the plain
forward and, when some input or parameter requires grad, the fwd/bwd pair for
training: for `target="cpu"` each as a shared library plus metadata (the format
of the compile cache), for `target="cuda"` each as a launch plan with PTX and,
where `ptxas` is found, cubins per chip. Exporting needs no GPU. The folder is
written beside its final place and renamed into it, so a reader never sees half
an artifact.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.utils._pytree as pytree
from mlir import ir

from .frontend.capture import TENSOR_LEAF, Captured, CaptureError, capture, read_from_outside
from .frontend.dynamic_shapes import (DynamicDim, DynamicDims, DynamicShapesError,
                                      argument_names, parse_dynamic_shapes)
from .frontend.torch_export import capture_dynamic, trace
from .program import CompileOptions, Program
from .runtime import exported

log = logging.getLogger(__name__)

TARGETS = ("cpu", "cuda")


class ExportError(ValueError):
    """The function or its options cannot be exported (says what to change)."""


def export(fn: Callable[..., Any], *example_inputs: torch.Tensor, path: str | os.PathLike,
           target: str = "cpu", chips: Sequence[str] | None = None,
           dynamic_shapes: Any = None, options: CompileOptions | None = None,
           **compile_kw: Any) -> str:
    """Compile `fn` (an nn.Module or a function of tensors) for the shapes and dtypes of
    `example_inputs` and write the artifact folder `path` (replaced if it exists).

    `dynamic_shapes`, as torch.export's: per input None or `{dim: torch.export.Dim or a
    name}`, in input order or keyed by argument names; the same Dim or name on two
    inputs is one size. Those dims then take every size in the Dim's range (at least 1)
    from one compiled program; ExportError names a dim the function specializes.

    `fusegrad.runtime.load(path)` runs it with torch alone (plus cuda-bindings for
    `target="cuda"`). A module's parameters and buffers are saved with the code, and so
    are the modules and tensors a function reads from outside (its closure, globals),
    named `<variable>.<name>`. The fwd/bwd pair differentiates the inputs and
    parameters that require grad here. `chips`: the CUDA compute capabilities (default
    sm_80 and sm_90). Compile options are keywords as `fusegrad.compile` takes them
    (`fusion=False`; or `options=CompileOptions(...)`, not both).
    Returns the path. Raises ExportError, or the compiler's error naming the op.
    """
    if target not in TARGETS:
        raise ExportError(f"fusegrad.export: target={target!r} is not one of {TARGETS}")
    if chips is not None and target != "cuda":
        raise ExportError("fusegrad.export: chips= applies to target='cuda' only")
    # the target decides how the graph is optimized (dg-fuse, attention), not only lowered
    from .functional import compile_options
    options = (compile_options("export", options, compile_kw) or CompileOptions()).with_(
        executor="cpu", target=target)
    start = time.perf_counter()
    dims = _dynamic_dims(dynamic_shapes, fn, example_inputs)
    module = fn if isinstance(fn, torch.nn.Module) else _Closure(fn)
    if dims:
        try:
            captured, traced, sizes = capture_dynamic(module, example_inputs, dims)
        except CaptureError as e:
            raise ExportError(f"fusegrad.export: {e}") from None
    else:
        (captured, traced), sizes = _capture(module, example_inputs), {}
    try:
        out_spec = pytree.treespec_dumps(captured.out_spec)
    except Exception as e:  # pytree raises for node types it cannot serialize
        raise ExportError(f"fusegrad.export: the output structure cannot be saved ({e}); "
                          "return tensors in tuples, lists or dicts") from None
    template = [None if leaf is TENSOR_LEAF else {"value": leaf}
                for leaf in captured.out_template]
    try:
        json.dumps(template)
    except TypeError as e:
        raise ExportError(f"fusegrad.export: a non-tensor output cannot be saved ({e}); "
                          "return only tensors, numbers, strings or None") from None
    program = Program.from_graph(captured.gm, options)
    inputs = [*captured.lifted, *example_inputs]
    wrt = [i for i, x in enumerate(inputs) if x.requires_grad and x.is_floating_point()]
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".export-", dir=parent)
    try:
        meta: dict[str, Any] = {
            "format": exported.FORMAT, "version": exported.VERSION, "target": target,
            "inputs": _signatures(example_inputs, dims, sizes),
            "sizes": {s: {"name": d.name, "min": d.min, "max": d.max} for s, d in sizes.items()},
            "parameters": _parameters_json(captured.lifted,
                                           _parameter_names(captured.lifted, [module, traced])),
            "mutated": list(captured.mutated), "seed_input": program.seed_input,
            "out_spec": out_spec, "out_template": template,
        }
        build = _build_cpu if target == "cpu" else _cuda_builder(chips)
        with _dynamic_on_cuda(target, sizes):
            module, _ = program.forward_module()
            build(program, module, os.path.join(work, exported.FORWARD), "forward")
            meta["forward"] = {"function": program.name}
            if wrt:
                module, training = program.training_module(wrt)
                build(program, module, os.path.join(work, exported.TRAINING), "training")
                fwd, bwd = program.training_names
                meta["training"] = {"fwd": fwd, "bwd": bwd, **training}
        torch.save([p.detach().cpu() for p in captured.lifted],
                   os.path.join(work, exported.PARAMETERS))
        with open(os.path.join(work, exported.METADATA), "w") as f:
            json.dump(meta, f, indent=1)
        if os.path.exists(path):
            shutil.rmtree(path)
        os.replace(work, path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("exported %s (%s%s%s) in %.1f s", path, target, ", with training" if wrt else "",
             "".join(f", {d}" for d in sizes.values()), time.perf_counter() - start)
    return path


def _dynamic_dims(spec: Any, fn: Callable[..., Any],
                  example_inputs: Sequence[torch.Tensor]) -> DynamicDims:
    """The dynamic dims `spec` (`dynamic_shapes`) declares, per input; empty where it
    declares none."""
    if spec is None:
        return []
    try:
        dims = parse_dynamic_shapes(spec, example_inputs, argument_names(fn))
    except DynamicShapesError as e:
        raise ExportError(f"fusegrad.export: dynamic_shapes: {e}") from None
    return dims if any(dims) else []


def _signatures(example_inputs: Sequence[torch.Tensor], dims: DynamicDims,
                sizes: dict[str, DynamicDim]) -> list[dict[str, Any]]:
    """The user inputs' signatures, their dynamic dims as dg's size names (`s0`, ...)."""
    size_of = {d.name: s for s, d in sizes.items()}
    return [exported.signature_json(x, {k: size_of[d.name] for k, d in per.items()})
            for x, per in zip(example_inputs, dims or [{}] * len(example_inputs))]


@contextlib.contextmanager
def _dynamic_on_cuda(target: str, sizes: dict[str, DynamicDim]) -> Iterator[None]:
    """A CUDA compile of run-time sizes that fails (an op the CUDA kernels do not serve at
    run-time sizes yet) says so, with what the user can do instead."""
    if target != "cuda" or not sizes:
        yield
        return
    try:
        yield
    except Exception as e:  # the compiler's reason, whatever its kind
        raise ExportError(f"fusegrad.export: this function does not compile for "
                          f"target='cuda' with dynamic dims yet ({type(e).__name__}: {e}); "
                          "export it for static shapes or for target='cpu'") from e


def _parameters_json(lifted: Sequence[torch.Tensor],
                     names: Sequence[str | None]) -> list[dict[str, Any]]:
    """Per lifted tensor: its name (as in the module, `<variable>.<name>` for what a
    function closes over; `state_dict()` of the loaded artifact uses it), whether it
    requires grad, and the earlier one it is (tied weights: HF's embedding and LM head),
    so the loaded artifact keeps one tensor whose gradient sums both uses."""
    first: dict[tuple, int] = {}
    out = []
    for i, p in enumerate(lifted):
        key = (p.untyped_storage().data_ptr(), p.storage_offset(), tuple(p.shape), p.stride(),
               p.dtype)
        same = first.setdefault(key, i)
        out.append({"name": names[i] if names[i] is not None else f"tensor{i}",
                    "requires_grad": p.requires_grad, "same_as": same if same != i else None})
    return out


def _capture(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor]
             ) -> tuple[Captured, torch.nn.Module | None]:
    """`capture`, or for a program with Python control flow on tensor values (HF models
    read `.item()`s), `capture` of what `torch.export` (non-strict) makes of it: one
    graph for the whole program, as an artifact needs (`fusegrad.compile` splits such
    programs at Dynamo's graph breaks instead). Also returns torch.export's module (None
    when capture alone did), whose tensors are the ones lifted."""
    try:
        return capture(module, example_inputs), None
    except CaptureError as direct:
        try:
            gm = trace(module, example_inputs)
        except Exception as e:  # torch.export fails in many ways; report both attempts
            raise ExportError(f"fusegrad.export: cannot trace the program to one graph: "
                              f"{direct}; torch.export: {type(e).__name__}: {e}") from e
        log.info("export: traced with torch.export (%s)", direct)
        return capture(gm, example_inputs), gm


class _Closure(torch.nn.Module):
    """A function of tensors as a module: the modules and tensors it reads from outside
    (its closure cells, the globals its code names) registered under their names, so
    that tracing lifts them as the module's parameters and buffers (named
    `<variable>.<name in the module>`; a weight tied across modules stays one tensor).
    While it runs, the function's cells and globals hold the module's current tensors:
    what tracing put in their place."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.__dict__["_fn"] = fn  # not a submodule, not in the state
        self.__dict__["_slots"] = []  # (where: cell or globals dict, key, name)
        for where, key, name, value in read_from_outside(fn):
            if name in self._modules or name in self._parameters or name in self._buffers:
                continue
            if isinstance(value, torch.nn.Module):
                self._modules[name] = value
            elif isinstance(value, torch.Tensor):
                if isinstance(value, torch.nn.Parameter):
                    self._parameters[name] = value
                elif value.requires_grad and value.is_floating_point():
                    self._parameters[name] = torch.nn.Parameter(value.detach())
                else:
                    self._buffers[name] = value
                self._slots.append((where, key, name))

    def _current(self, name: str) -> torch.Tensor:
        return self._parameters[name] if name in self._parameters else self._buffers[name]

    def forward(self, *args: torch.Tensor) -> Any:
        saved = []
        try:
            for where, key, name in self._slots:
                if key is None:
                    saved.append(where.cell_contents)
                    where.cell_contents = self._current(name)
                else:
                    saved.append(where[key])
                    where[key] = self._current(name)
            return self._fn(*args)
        finally:
            for (where, key, _), value in zip(self._slots, saved):
                if key is None:
                    where.cell_contents = value
                else:
                    where[key] = value


def _parameter_names(lifted: Sequence[torch.Tensor],
                     modules: Sequence[torch.nn.Module | None]) -> list[str | None]:
    """The name of each lifted tensor in `modules` (the first that holds it), a tensor
    tied under several names taking them in order; None for a tensor none holds."""
    names: dict[int, list[str]] = {}
    for module in modules:
        if module is None:
            continue
        for name, t in [*module.named_parameters(remove_duplicate=False),
                        *module.named_buffers(remove_duplicate=False)]:
            names.setdefault(id(t), [])
            if name not in names[id(t)]:
                names[id(t)].append(name)
    out: list[str | None] = []
    for t in lifted:
        free = [n for n in names.get(id(t), ()) if n not in out]
        out.append(free[0] if free else None)
    return out


def _dumper(program: Program, suffix: str) -> Callable[[str, str, ir.Module], None]:
    """The lowering's `on_stage`: each stage dumped as `<stage>-<suffix>` (FUSEGRAD_DUMP)."""
    def on_stage(stage: str, pipeline: str, module: ir.Module) -> None:
        program.dump(f"{stage}-{suffix}", module, pipeline)
    return on_stage


def _build_cpu(program: Program, module: ir.Module, directory: str, part: str) -> None:
    """Compile `module` into a shared library and its metadata in `directory`."""
    from .codegen.cpu.compile import compile_cpu
    from .runtime import cpu_library

    os.makedirs(directory)
    dump = _dumper(program, part)
    with module.context, ir.Location.unknown():
        cpu = compile_cpu(module, os.path.join(directory, cpu_library.LIBRARY),
                          on_stage=lambda stage, *rest: dump(f"cpu-{stage}", *rest))
    cpu_library.write(directory, cpu)


def _cuda_builder(chips: Sequence[str] | None
                  ) -> Callable[[Program, ir.Module, str, str], None]:
    from .codegen.cuda.compile import compile_cuda
    from .pipelines import DEFAULT_CHIPS

    def build(program: Program, module: ir.Module, directory: str, part: str) -> None:
        """Lower `module` to a launch plan with its kernel images, saved in `directory`."""
        with module.context, ir.Location.unknown():
            plan = compile_cuda(module, tuple(chips or DEFAULT_CHIPS),
                                on_stage=_dumper(program, part))
        plan.save(directory)
    return build

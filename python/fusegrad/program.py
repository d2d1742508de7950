"""A dg function and everything derived from it, built lazily and cached.

A `Program` owns one public dg function `@name` in its own module. From it
it derives, on first use, the executables the runtime needs: the plain
forward, the `@name_fwd`/`@name_bwd` pair for a set of wrt inputs, the joint
`@name_vjp` (itself a Program, so it can be differentiated again: double
backward) and the forward-mode `@name_jvp` (also a Program). Each derivation
works on a copy of the module, so stages never disturb each other, and each
stage can be dumped as a `.mlir` file that `fusegrad-opt` reads back. On
CPU, the compiled forward and fwd/bwd pairs come from the persistent compile
cache (`compile_cache.py`) when an earlier compile of the same module stored
them: no pass runs then.
"""
from __future__ import annotations

import hashlib
import itertools
import logging
import os
import time
import weakref
from dataclasses import dataclass, field, replace
from typing import Callable, Hashable, Iterable, Protocol, Sequence

import torch
from mlir import ir

from .runtime import autograd
from .runtime.autograd import Training

log = logging.getLogger(__name__)


class Executable(autograd.Executable, Protocol):
    """A compiled function of tensors (`runtime.cpu.CpuFunction`, `runtime.cuda.CudaFunction`,
    `_Interpreted`) that says whether it hands arguments back."""

    returns_arguments: bool  # may some results be arguments handed back (others are fresh)?


_EXECUTORS = ("cpu", "reference")
_labels = itertools.count()
# A graph of this many ops or fewer compiles its training backward with its forward: a
# second compile costs ~70 ms (a JIT, a link), more than a small backward that a
# backward may not use. A larger one compiles each backward at its first use, for the
# outputs that got a gradient there: an HF language model's loss, not its logits (GPT-2
# with labels, first step 21.8 -> 14.2 s of CPU: no backward for the logits compiled).
PAIRED_BACKWARD_MAX_OPS = 64
SLOW_COMPILE_SECONDS = 2.0  # a compile this long gets an INFO line with its stages


@dataclass(frozen=True)
class CompileOptions:
    """How fusegrad compiles a captured graph.

    `double_backward`: keep the inputs of a compiled function alive until its
    backward, so that backward with `create_graph=True` can differentiate the
    joint `@f_vjp`; costs the memory of inputs the backward would not otherwise
    save (usually small: parameters are alive anyway). With False, such a
    backward raises.

    `target`: "cpu" or "cuda", or None to compile for the device the graph's
    tensors are on (`devices.select_target`). `executor="cpu"` runs the code
    compiled for the target; "reference" runs the dg interpreter instead.

    `channels_last`: on the CPU, run 2-D convolutions, and the ops between them, on
    channels-last activations (dg-channels-last), as oneDNN runs fastest.

    `cuda_graphs`: on CUDA, replay each compiled forward and backward from a CUDA
    graph after its first call (`runtime/cuda_graphs.py`): True for every function,
    False for none, "auto" for those holding at most `runtime.cuda.AUTO_GRAPH_MAX_BYTES`
    (small batches, where launching kernels from Python costs more than running them;
    a graph keeps its memory between calls).

    `specialize_shapes`: where Dynamo makes sizes dynamic (after a shape changes, or
    with `dynamic=True`), fusegrad compiles one program for every value of them; True
    compiles one per shape instead (a compile for each new shape; library calls such as
    PyTorch's flash attention are used at static shapes only).
    """

    fusion: bool = True
    remat: bool = True
    executor: str = "cpu"
    dump_dir: str | None = field(default_factory=lambda: os.environ.get("FUSEGRAD_DUMP") or None)
    double_backward: bool = True
    target: str | None = None
    cuda_graphs: bool | str = "auto"
    channels_last: bool = True
    specialize_shapes: bool = False

    def __post_init__(self) -> None:
        from .devices import TARGETS

        if self.executor not in _EXECUTORS:
            raise ValueError(f"fusegrad: executor={self.executor!r} is not one of {_EXECUTORS}")
        from .runtime.cuda import GRAPH_MODES

        if self.cuda_graphs not in GRAPH_MODES:
            raise ValueError(f"fusegrad: cuda_graphs={self.cuda_graphs!r} is not one of "
                             f"{GRAPH_MODES}")
        if self.target is not None and self.target not in TARGETS:
            raise ValueError(f"fusegrad: target={self.target!r} is not one of {TARGETS} "
                             "(or None: the device of the inputs)")

    def with_(self, **changes: object) -> "CompileOptions":
        return replace(self, **changes)


def _i64s(fn: ir.Operation, attr: str) -> tuple[int, ...]:
    return tuple(ir.DenseI64ArrayAttr(fn.attributes[attr]))


def _public_functions(module: ir.Module) -> dict[str, ir.Operation]:
    from .dialects.core import is_public

    out = {}
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func":
            continue
        if is_public(op):
            out[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return out


class Program:
    """One public dg function `@name` in its own module (see module docstring)."""

    def __init__(self, module: ir.Module, name: str, options: CompileOptions,
                 label: str | None = None, *, stage: str = "imported") -> None:
        self.module = module
        self.name = name
        self.options = options
        self.label = label or f"graph{next(_labels)}"
        fn = self.function
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        self.num_inputs = len(ftype.inputs)
        self.num_results = len(ftype.results)
        # the outputs a backward may take a cotangent for (training's `constant` are among them)
        from .transforms.autodiff.common import float_indices
        self.float_outputs = tuple(float_indices(ftype.results))
        self.seed_input: int | None = (ir.IntegerAttr(fn.attributes["dg.seed_input"]).value
                                       if "dg.seed_input" in fn.attributes else None)
        self._forward: Executable | None = None
        # by (wrt, constant outputs)
        self._training: dict[tuple[tuple[int, ...], tuple[int, ...]], Training] = {}
        # each training variant's module before fusion (text, and its dump lineage), until
        # its first backward compiles
        self._before_fusion: dict[tuple[tuple[int, ...], tuple[int, ...]],
                                  tuple[str, tuple | None]] = {}
        self._joint: dict[tuple[tuple[int, ...], tuple[int, ...] | None], Program] = {}
        self._jvp: dict[tuple[int, ...], Program] = {}
        self.seconds: dict[str, float] = {}  # compile time per stage, summed over variants
        self._dumped = self.dump(stage, module)  # the file copies of `module` start from

    @classmethod
    def from_graph(cls, gm: torch.fx.GraphModule, options: CompileOptions,
                   label: str | None = None) -> "Program":
        """Import a functional core-ATen graph (raises importer.UnsupportedOp)."""
        from .context import make_context
        from .frontend.importer import import_graph

        label = label or f"graph{next(_labels)}"
        if options.dump_dir:
            dump_text(options.dump_dir, label, "aten", "txt", gm.print_readable(
                print_output=False, include_stride=False, include_device=False))
        with make_context(), ir.Location.unknown():
            module = import_graph(gm, name="main")
        return cls(module, "main", options, label)

    @classmethod
    def from_text(cls, text: str, options: CompileOptions) -> "Program":
        """The Program of a module `from_graph` imported in an earlier process, as `text`
        (`frontend.graph_cache`)."""
        from .context import make_context

        with make_context(), ir.Location.unknown():
            module = ir.Module.parse(text)
        return cls(module, "main", options)

    @property
    def text(self) -> str:
        """The module as text, locations included."""
        return self._text()

    @property
    def function(self) -> ir.Operation:
        try:
            return _public_functions(self.module)[self.name]
        except KeyError:
            raise KeyError(f"no public function @{self.name} in {self.label}") from None

    # ------------------------------------------------------------ derivations
    def _text(self) -> str:
        return _asm(self.module)

    def _copy(self) -> ir.Module:
        copy = ir.Module.parse(self._text(), self.module.context)
        if self._dumped is not None:
            _LINEAGE.set(copy, self._dumped, [])
        return copy

    def _timed(self, stage: str, since: float) -> float:
        """Add the time since `since` to `stage` (its name before any '-wrt' suffix)."""
        now = time.perf_counter()
        stage = stage.split("-wrt")[0]
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - since
        log.debug("%s: %s took %.3f s", self.label, stage, now - since)
        return now

    def _run(self, module: ir.Module, pipeline: str, stage: str) -> None:
        from .pass_manager import run_pipeline

        start = time.perf_counter()
        with module.context, ir.Location.unknown():
            run_pipeline(module, pipeline)
        self._timed(stage, start)
        self.dump(stage, module, pipeline)

    def _optimize(self, module: ir.Module, suffix: str = "",
                  drop_cotangents: Sequence[int] = (), *, part: str = "all") -> None:
        """`dg-optimize` for the target, stage by stage as the options enable them (each
        dumped as its stage name + suffix; `pipelines.optimize_stages`). With
        `drop_cotangents`, the backward is specialized to zero cotangents for those
        outputs before fusion (dg-drop-cotangents). `part`: "all", or the stages
        "before-fusion" (they decide the saved values, so a forward and its backward go
        through them together) or from "fusion" on (it works on each function alone)."""
        from .pipelines import optimize_stages

        stages = optimize_stages(self.options.target or "cpu", remat=self.options.remat,
                                 channels_last=self.options.channels_last,
                                 fusion=self.options.fusion)
        at = next((k for k, (stage, _) in enumerate(stages) if stage == "fused"), len(stages))
        if drop_cotangents:
            stages.insert(at, ("cotangents-dropped",
                               f"dg-drop-cotangents{{outputs={_csv(drop_cotangents)}}}"))
        if part != "all":
            stages = stages[:at] if part == "before-fusion" else stages[at:]
        for stage, pipeline in stages:
            self._run(module, pipeline, stage + suffix)

    def _keep_only(self, module: ir.Module, names: Sequence[str]) -> None:
        """Erase the public functions not in `names` (nothing calls them):
        dg-keep-functions, run in place (a pass manager would verify the module again)."""
        from .codegen.common.entries import keep_functions

        keep_functions(module.operation, ",".join(names))
        _LINEAGE.ran(module, f"dg-keep-functions{{names={','.join(names)}}}")

    def _load(self, derivation: str, derive: Callable[[], tuple[ir.Module, dict]],
              names: Sequence[str], stage: str) -> tuple[list[Executable], dict]:
        """Executables for the public functions `names` of the module `derive()` returns,
        with the metadata it returns (JSON data). Both come from the compile cache when
        it holds `derivation` of this module for the target: no pass runs then."""
        if self.options.executor == "reference":
            module, meta = derive()
            return [_Interpreted(module, n) for n in names], meta
        if self.options.target == "cuda":
            return self._load_cuda(derivation, derive, names, stage)
        from .compile_cache import compiled
        from .runtime.cpu_library import LIBRARY

        def build(directory: str | None) -> tuple[object, dict]:
            from .codegen.cpu.compile import compile_cpu  # not on a cache hit: 0.3 s

            module, meta = derive()
            since = [time.perf_counter()]

            def on_stage(name: str, pipeline: str, lowered: ir.Module) -> None:
                since[0] = self._timed(f"cpu-{name}", since[0])
                self.dump(stage.replace("lowered", f"cpu-{name}"), lowered, pipeline)
            library = os.path.join(directory, LIBRARY) if directory else None
            with module.context, ir.Location.unknown():
                cpu = compile_cpu(module, library, on_stage=on_stage)
            self._timed("llvm-codegen", since[0])
            return cpu, meta

        cpu, meta = compiled(self._text(), derivation, self.options, build,
                             label=self.label)
        return [cpu.function(n) for n in names], meta

    @property
    def compiled_forward(self) -> Executable | None:
        """The plain forward if it is compiled already (None before `forward()`)."""
        return self._forward

    def _load_cuda(self, derivation: str, derive: Callable[[], tuple[ir.Module, dict]],
                   names: Sequence[str], stage: str) -> tuple[list[Executable], dict]:
        """`_load` for the CUDA target: a launch plan (from the compile cache when it has
        it) run on the current CUDA device."""
        from .compile_cache import compiled
        from .codegen.cuda.compile import compile_cuda
        from .runtime.cuda import CudaProgram
        chips = _chips_to_build()

        def build(directory: str | None) -> tuple[object, dict]:
            module, meta = derive()
            start = time.perf_counter()
            def on_stage(name: str, pipeline: str, lowered: ir.Module) -> None:
                self.dump(stage.replace("lowered", name), lowered, pipeline)
            with module.context, ir.Location.unknown():
                plan = compile_cuda(module, chips, on_stage=on_stage)
            self._timed("cuda", start)
            return plan, meta

        plan, meta = compiled(self._text(), f"{derivation} for {','.join(chips)}",
                              self.options, build, label=self.label)
        program = CudaProgram(plan, graphs=self.options.cuda_graphs)
        return [program.function(n) for n in names], meta

    def forward(self) -> Executable:
        """The compiled plain forward (no autodiff)."""
        if self._forward is None:
            (self._forward,), _ = self._load("forward", self.forward_module, [self.name],
                                             "lowered")
        return self._forward

    def forward_module(self) -> tuple[ir.Module, dict]:
        """A copy of the module holding only `@name`, optimized (no metadata)."""
        module = self._copy()
        self._optimize(module)
        self._keep_only(module, [self.name])
        return module, {}

    def training(self, wrt: Sequence[int], constant: Sequence[int] = ()) -> Training:
        """The compiled fwd/bwd pair differentiating the inputs `wrt` (non-empty), whose
        outputs `constant` never take a gradient (autograd's constants: a BatchNorm's
        running statistics written back to its buffers). A graph of
        PAIRED_BACKWARD_MAX_OPS ops or fewer compiles both now, a larger one its forward
        now and each backward at its first use (`Training.backward_for`)."""
        wrt, constant = tuple(wrt), tuple(i for i in self.float_outputs if i in constant)
        if len(constant) == len(self.float_outputs):  # nothing to differentiate: take all
            constant = ()
        variant = (wrt, constant)
        if not wrt:
            raise ValueError(f"fusegrad: {self.label}: training needs at least one wrt input")
        if variant in self._training:
            return self._training[variant]
        bwd = None
        derivation, key = _training_names(wrt, constant)
        if self._num_ops() <= PAIRED_BACKWARD_MAX_OPS:
            (fwd, bwd), meta = self._load(derivation,
                                          lambda: self.training_module(wrt, constant=constant),
                                          self.training_names, f"lowered-{key}")
        else:
            def derive() -> tuple[ir.Module, dict]:
                module, meta = self._differentiated(wrt, constant)
                self._before_fusion[variant] = (_asm(module), _LINEAGE.get(module))
                self._fused(module, key, self.training_names[:1])
                return module, meta

            (fwd,), meta = self._load(f"{derivation} forward", derive,
                                      self.training_names[:1], f"lowered-{key}-fwd")
        self._training[variant] = Training.from_metadata(
            fwd, meta, bwd, compile_backward=lambda missing: self._backward(variant, missing))
        return self._training[variant]

    def _num_ops(self) -> int:
        return sum(1 for _ in self.function.regions[0].blocks[0].operations)

    def _backward(self, variant: tuple[tuple[int, ...], tuple[int, ...]],
                  missing: tuple[int, ...]) -> Executable:
        """`@name_bwd` of `training(*variant)` for zero cotangents of the outputs
        `missing`, taking the other cotangents (`drop_cotangents`); same saved values.
        Without `missing`, from the module the forward was compiled from, when this
        process made it."""
        start = time.perf_counter()
        wrt, constant = variant
        derivation, key = _training_names(wrt, constant)
        without = "-" + _key(missing, "without") if missing else ""

        def derive() -> tuple[ir.Module, dict]:
            # kept for the first backward only (a later one, for other cotangents, is rare)
            saved = self._before_fusion.pop(variant, None)
            if saved is None:  # the forward came from the compile cache, or a later backward
                module, meta = self._differentiated(wrt, constant)
            else:
                module, meta = ir.Module.parse(saved[0], self.module.context), {}
                if saved[1] is not None:
                    _LINEAGE.set(module, *saved[1])
            self._fused(module, key, self.training_names[1:], missing)
            return module, meta

        (bwd,), _ = self._load(f"{derivation} backward" + (f" without {list(missing)}"
                                                           if missing else ""),
                               derive, self.training_names[1:], f"lowered-{key}-bwd{without}")
        took = time.perf_counter() - start
        log.log(logging.INFO if missing or took >= SLOW_COMPILE_SECONDS else logging.DEBUG,
                "%s: backward%s ready in %.2f s", self.label,
                f" for {_outputs(missing)} without gradient" if missing else "", took)
        return bwd

    @property
    def training_names(self) -> list[str]:
        """The public functions of `training_module`: `@name_fwd` and `@name_bwd`."""
        return [f"{self.name}_fwd", f"{self.name}_bwd"]

    def training_module(self, wrt: Sequence[int], without: Sequence[int] = (),
                        constant: Sequence[int] = ()) -> tuple[ir.Module, dict]:
        """A copy of the module holding only `@name_fwd`/`@name_bwd` for the inputs `wrt`,
        optimized, and their metadata: num_outputs, wrt, ct_outputs (JSON data). The
        outputs `constant` take no cotangent at all. With `without` (outputs), only
        `@name_bwd`, for zero cotangents of those outputs (dropped after dg-remat, so
        the forward and its saved values stay the same)."""
        module, meta = self._differentiated(wrt, constant)
        names = self.training_names[1:] if without else self.training_names
        self._fused(module, _training_names(wrt, constant)[1], names, without)
        return module, meta

    def _differentiated(self, wrt: Sequence[int],
                        constant: Sequence[int] = ()) -> tuple[ir.Module, dict]:
        """A copy of the module holding `@name_fwd`/`@name_bwd` for the inputs `wrt`
        (outputs `constant` take no cotangent) through the stages before fusion, and
        their metadata (`training_module`)."""
        from .transforms.autodiff.common import get_reached_by

        _, key = _training_names(wrt, constant)
        options = f"wrt={_csv(wrt)}"
        if constant:
            options += f" ct_outputs={_csv(i for i in self.float_outputs if i not in constant)}"
        module = self._copy()
        self._run(module, f"dg-autodiff{{{options}}}", f"autodiff-{key}")
        # the plain function would be optimized for nothing (GoogLeNet: 0.7 s of dg-fuse)
        self._keep_only(module, self.training_names)
        self._optimize(module, f"-{key}", part="before-fusion")
        fns = _public_functions(module)
        fwd_op, bwd_op = fns[f"{self.name}_fwd"], fns[f"{self.name}_bwd"]
        return module, {"num_outputs": ir.IntegerAttr(fwd_op.attributes["dg.num_outputs"]).value,
                        "wrt": list(_i64s(bwd_op, "dg.wrt")),
                        "ct_outputs": list(_i64s(bwd_op, "dg.ct_outputs")),
                        "reached_by": get_reached_by(bwd_op)}

    def _fused(self, module: ir.Module, key: str, names: Sequence[str],
               without: Sequence[int] = ()) -> None:
        """`_differentiated`'s `module` in place: only the functions `names`, the backward
        for zero cotangents of the outputs `without`, through fusion. Each function fuses
        alone, so a forward compiled now and a backward compiled at its first use (for
        the cotangents it gets then) fuse once each."""
        self._keep_only(module, names)
        if len(names) == 1:
            key += "-fwd" if names[0] == self.training_names[0] else "-bwd"
        self._optimize(module, f"-{key}" + (f"-{_key(without, 'without')}" if without else ""),
                       drop_cotangents=without, part="fusion")

    def _derived(self, cache: dict, key: Hashable, pipeline: str, suffix: str,
                 variant: str) -> "Program":
        """A Program for `@name_<suffix>`, made by `pipeline`; `variant` names it in labels."""
        if key not in cache:
            module = self._copy()
            self._run(module, pipeline, f"{suffix}-{variant}")
            name = f"{self.name}_{suffix}"
            self._keep_only(module, [name])
            cache[key] = Program(module, name, self.options, f"{self.label}.{suffix}-{variant}",
                                 stage="derived")
        return cache[key]

    def joint(self, wrt: Sequence[int], ct_outputs: Sequence[int] | None = None) -> "Program":
        """`@name_vjp(inputs..., cts...) -> (outputs..., grads...)` as a Program; with
        `ct_outputs`, cotangents of those outputs only (default: of every float output)."""
        wrt = tuple(wrt)
        cts = None if ct_outputs is None else tuple(ct_outputs)
        pipeline = f"dg-autodiff{{joint=true wrt={_csv(wrt)}"
        variant = _key(wrt)
        if cts is not None:
            pipeline += f" ct_outputs={_csv(cts)}"
            variant += "-" + _key(cts, "cts")
        return self._derived(self._joint, (wrt, cts), pipeline + "}", "vjp", variant)

    def jvp(self, wrt: Sequence[int]) -> "Program":
        """`@name_jvp(inputs..., tangents...) -> (outputs..., tangents...)` as a Program."""
        wrt = tuple(wrt)
        return self._derived(self._jvp, wrt, f"dg-jvp{{wrt={_csv(wrt)}}}", "jvp", _key(wrt))

    # ------------------------------------------------------------ observability
    def dump(self, stage: str, module: ir.Module, pipeline: str | None = None) -> str | None:
        """Write `module` to `<dump_dir>/<label>.<stage>.mlir` when dumping is on, listed
        with the dump it was made from and the pipeline that made it from that one (which
        `fusegrad-opt -p` reruns). `pipeline`: what just ran on `module`. Returns the
        file's name (None when not dumping)."""
        if not self.options.dump_dir:
            return None
        if pipeline:
            _LINEAGE.ran(module, pipeline)
        source, since = _LINEAGE.get(module) or (None, [])
        pipeline = ",".join(since) or None
        if source and pipeline:
            header = (f"// fusegrad dump of {self.label}, stage {stage}: made from {source} by\n"
                      f"//   fusegrad-opt {source} -p '{pipeline}' --mlir-print-debuginfo\n")
        else:
            header = f"// fusegrad dump of {self.label}, stage {stage}: {_ORIGINS.get(stage, '')}\n"
        name = dump_text(self.options.dump_dir, self.label, stage, "mlir",
                         header + module.operation.get_asm(enable_debug_info=True),
                         source=source, pipeline=pipeline)
        _LINEAGE.set(module, name, [])
        return name


# how the dumps that no pipeline made came about
_ORIGINS = {"imported": "the captured ATen graph (.aten.txt) imported into dg",
            "derived": "a derived function (dg-autodiff joint or dg-jvp) kept alone"}


class _Lineage:
    """Per module, the dump it was last written as and the pipelines run on it since:
    the provenance each dump lists. Only tracked while dumping (`Program.dump`). Keyed
    by identity: `ir.Module`'s hash follows its contents (it changed across a lowering)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[weakref.ref, str | None, list[str]]] = {}

    def get(self, module: ir.Module) -> tuple[str | None, list[str]] | None:
        entry = self._by_id.get(id(module))
        if entry is None or entry[0]() is not module:
            return None
        return entry[1], entry[2]

    def set(self, module: ir.Module, source: str | None, since: list[str]) -> None:
        self._by_id = {k: e for k, e in self._by_id.items() if e[0]() is not None}
        self._by_id[id(module)] = (weakref.ref(module), source, since)

    def ran(self, module: ir.Module, pipeline: str) -> None:
        """Note that `pipeline` ran on `module` since its last dump (if it is tracked)."""
        known = self.get(module)
        if known is not None:
            self.set(module, known[0], [*known[1], pipeline])


_LINEAGE = _Lineage()


def dump_text(dump_dir: str, label: str, stage: str, ext: str, text: str, *,
              source: str | None = None, pipeline: str | None = None) -> str:
    """Write `<dump_dir>/<label>.<stage>.<ext>` and list it in `<dump_dir>/index.txt`
    (one line per file, in the order written, tab-separated: file, graph, stage, the
    dump it was made from and the pipeline that made it, `-` where it was not made by
    passes). A file that cannot be written is a warning: the dump is for looking at,
    the compile goes on. Returns the file's name."""
    name = f"{label}.{stage}.{ext}"
    try:
        os.makedirs(dump_dir, exist_ok=True)
        with open(os.path.join(dump_dir, name), "w") as f:
            f.write(text)
        with open(os.path.join(dump_dir, "index.txt"), "a") as f:
            f.write(f"{name}\t{label}\t{stage}\t{source or '-'}\t{pipeline or '-'}\n")
    except OSError as e:
        log.warning("FUSEGRAD_DUMP: cannot write %s (%s); the compile goes on without it",
                    name, e)
        return name
    log.info("wrote %s", os.path.join(dump_dir, name))
    return name


class _Interpreted:
    """`@name` of `module` run by the reference interpreter (keeps the module alive)."""

    returns_arguments = True  # the interpreter may hand an input back as a result

    def __init__(self, module: ir.Module, name: str) -> None:
        self.module, self.name = module, name

    def __call__(self, *tensors: torch.Tensor,
                 sizes: dict[str, int] | None = None) -> list[torch.Tensor]:
        from .dialects.interpreter import run_function

        return run_function(_public_functions(self.module)[self.name], tensors, sizes)

    def sizes_of(self, tensors: Sequence[torch.Tensor],
                 sizes: dict[str, int] | None = None) -> dict[str, int]:
        """The values of its symbolic sizes in a call (what its backward takes)."""
        from .dialects.interpreter import bound_sizes

        return bound_sizes(_public_functions(self.module)[self.name], tensors, sizes)


def _asm(module: ir.Module) -> str:
    """`module` as text, locations included (index-error messages name them)."""
    return module.operation.get_asm(enable_debug_info=True)


def _training_names(wrt: Sequence[int], constant: Sequence[int]) -> tuple[str, str]:
    """The cache derivation and the stage key of `training(wrt, constant)`."""
    if not constant:
        return f"training {_wrt(wrt)}", _key(wrt)
    return (f"training {_wrt(wrt)} {_wrt(constant, 'constant')}",
            f"{_key(wrt)}-{_key(constant, 'constant')}")


def _outputs(indices: Sequence[int]) -> str:
    """'outputs [1, 2]', or the count and the first few where there are many."""
    if len(indices) <= 8:
        return f"outputs {list(indices)}"
    return f"{len(indices)} outputs ({', '.join(map(str, indices[:6]))}, ...)"


def _csv(indices: Iterable[int]) -> str:
    return ",".join(map(str, indices))


def _wrt(wrt: Sequence[int], name: str = "wrt") -> str:
    """`wrt` exactly, runs of consecutive indices as ranges: "wrt1-28_30"."""
    runs: list[list[int]] = []
    for i in wrt:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return name + "_".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _key(wrt: Sequence[int], name: str = "wrt") -> str:
    """`_wrt`, or where that is long (a file name must fit in 255 bytes) its count and
    hash: labels and dump file names only, never a cache key."""
    exact = _wrt(wrt, name)
    if len(exact) <= 48:
        return exact
    return f"{name}{len(wrt)}-{hashlib.sha256(exact.encode()).hexdigest()[:12]}"


def _chips_to_build() -> tuple[str, ...]:
    """The chips a program compiled in this process gets images for: the current CUDA
    device's alone where it is one `DEFAULT_CHIPS` names (half the NVVM and ptxas work of
    both; the compile cache keys on them), else all of them (a newer chip JIT-compiles
    the newest PTX not above it)."""
    from .pipelines import DEFAULT_CHIPS
    if torch.cuda.is_available():
        from .runtime.cuda import device_chip
        chip = device_chip(torch.device("cuda", torch.cuda.current_device()))
        if chip in DEFAULT_CHIPS:
            return (chip,)
    return DEFAULT_CHIPS

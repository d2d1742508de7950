"""Run an artifact that `fusegrad.export` wrote, with torch alone (plus cuda-bindings for CUDA).

An artifact is a folder:

| file | holds |
| --- | --- |
| `export.json` | format and version, target (`cpu`/`cuda`), the user inputs' signatures (a dynamic dim as its dg size name, `"s0"`), the dynamic dims (`sizes`: per size name its user-given `name`, `min` and `max`, null where unbounded; absent or empty for a static artifact), per parameter its name (the module's, `<variable>.<name>` for a function's closure), whether it requires grad and which earlier parameter it is (tied weights), the inputs the program mutates, the seed input (random ops), the output structure (a pytree spec) with its constant leaves, the forward's function name, and the training pair's names, `num_outputs`, `wrt` and `ct_outputs` when there is one |
| `parameters.pt` | the module's parameters and buffers, in the program's input order (`torch.save`; loaded with `weights_only=True`) |
| `forward/` | the plain forward: a `runtime.cpu_library` folder (`lib.so` + `meta.json`) for `cpu`, a `runtime.cuda.LaunchPlan` folder (`plan.json` + PTX/cubin images) for `cuda` |
| `training/` | `@f_fwd` and `@f_bwd`, the same way, when the export had inputs requiring grad |

`load(path)` returns an `ExportedProgram`: called like the exported function,
it checks each input (rank, dtype, device, fixed dims) against what was exported
and its dynamic dims (one size per name, within its range), runs
the forward, or with grad mode on and inputs requiring grad the fwd/bwd pair
as one autograd node (`runtime.autograd`), so `backward()` fills the `.grad`
of its `parameters`. A second differentiation is not available from an
artifact (it holds no joint program). `trains` says whether it has the fwd/bwd
pair; `state_dict()` gives the parameters and buffers by name.
"""
from __future__ import annotations

import json
import logging
import os
from typing import Any, Callable, Optional, Sequence

import torch
import torch.utils._pytree as pytree

from .abi import TensorSig, dg_dtype, parse_dim, torch_dtype
from .autograd import CompiledFunction, Training, fresh_seed, unaliased

log = logging.getLogger(__name__)

FORMAT = "fusegrad-export"
VERSION = 1
METADATA = "export.json"
PARAMETERS = "parameters.pt"
FORWARD = "forward"
TRAINING = "training"


class ArtifactError(RuntimeError):
    """An artifact folder is missing, of another format or version, or called wrongly."""


def signature_json(x: torch.Tensor, sizes: dict[int, str] | None = None) -> dict[str, Any]:
    """The JSON signature of a tensor: shape and dg dtype name; `sizes`: the dims that are
    dg's sizes, by name (`{0: "s0"}`)."""
    name = dg_dtype(x.dtype)
    if name is None:
        raise ArtifactError(f"dtype {x.dtype} has no compiled equivalent")
    shape = tuple(parse_dim(sizes[k]) if sizes and k in sizes else n
                  for k, n in enumerate(x.shape))
    return TensorSig(shape, name).to_json()


def load(path: str | os.PathLike, *, device: Any = None, driver: Any = None,
         stream: Optional[Callable[[], int]] = None, chip: Optional[str] = None,
         cuda_graphs: bool | str = "auto") -> "ExportedProgram":
    """Load the artifact folder `path` (see the module docstring).

    CUDA artifacts run on `device` (default: the current CUDA device); `driver`,
    `stream` and `chip` go to `runtime.cuda.CudaProgram` (tests pass a fake driver);
    `cuda_graphs`: replay each function from a CUDA graph after its first call (True),
    never (False), or where the function is small enough that launching it from Python
    costs more than running it ("auto": `runtime.cuda.AUTO_GRAPH_MAX_BYTES`).
    """
    return ExportedProgram(path, device=device, driver=driver, stream=stream, chip=chip,
                           cuda_graphs=cuda_graphs)


class ExportedProgram:
    """A loaded artifact, called like the exported function (see the module docstring).

    `parameters`: the module's parameters and buffers, on the artifact's device, in the
    program's input order (a tied weight appears once per name, the same tensor); those
    exported as requiring grad require grad again, and receive `.grad`.
    `parameter_names`: their names (`state_dict()` pairs them).
    `inputs`: each input's `(shape, dtype)`, a dynamic dim by its name (`("batch", 8)`);
    `dynamic_dims`: `{name: (min, max)}` of those dims (max None: unbounded).
    `trains`: whether the artifact holds the fwd/bwd pair, i.e. whether calling it with
    grad enabled on inputs or parameters that require grad builds a backward.
    `training`: that pair's record (`runtime.autograd.Training`: the compiled `fwd` and
    `bwd` and their metadata), None without it. Not nn.Module's train/eval flag: an
    artifact runs in the mode it was exported in."""

    def __init__(self, path: str | os.PathLike, *, device: Any = None, driver: Any = None,
                 stream: Optional[Callable[[], int]] = None, chip: Optional[str] = None,
                 cuda_graphs: bool | str = "auto") -> None:
        self.path = os.path.abspath(os.fspath(path))
        meta = self._metadata()
        self.target: str = meta["target"]
        if self.target == "cpu":
            if device is not None and torch.device(device).type != "cpu":
                raise ArtifactError(f"{self.path}: a cpu artifact runs on the CPU, not {device}")
            self.device = torch.device("cpu")
        else:
            self.device = torch.device(device if device is not None else "cuda")
        self._cuda = {"driver": driver, "stream": stream, "chip": chip, "device": self.device,
                      "graphs": cuda_graphs}
        # dg's size name (`s0`) -> the dim's name and range; the inputs' dims of those names
        # take any size in it, the others are fixed
        self._sizes: dict[str, dict[str, Any]] = meta.get("sizes") or {}
        self._shapes = [(tuple(s["shape"]), torch_dtype(s["dtype"])) for s in meta["inputs"]]
        self.dynamic_dims: dict[str, tuple[int, int | None]] = {
            d["name"]: (d["min"], d["max"]) for d in self._sizes.values()}
        self.inputs = [(tuple(self._sizes[d]["name"] if isinstance(d, str) else d
                              for d in shape), dtype) for shape, dtype in self._shapes]
        saved = torch.load(os.path.join(self.path, PARAMETERS), weights_only=True)
        self.parameters: list[torch.Tensor] = []
        self.parameter_names: list[str] = [info.get("name") or f"tensor{i}"
                                           for i, info in enumerate(meta["parameters"])]
        for p, info in zip(saved, meta["parameters"]):  # a tied one is the same tensor again
            same = info.get("same_as")
            self.parameters.append(self.parameters[same] if same is not None else
                                   p.to(self.device).requires_grad_(bool(info["requires_grad"])))
        self.mutated = tuple(int(i) for i in meta["mutated"])
        self.seed_input: int | None = meta["seed_input"]
        self._out_spec = pytree.treespec_loads(meta["out_spec"])
        self._template = meta["out_template"]
        (self._forward,) = self._executables(FORWARD, [meta["forward"]["function"]])
        training = meta.get("training")
        self.training: Training | None = None
        if training:
            fwd, bwd = self._executables(TRAINING, [training["fwd"], training["bwd"]])
            self.training = Training.from_metadata(fwd, training, bwd=bwd)
        log.info("loaded %s (%s, %d parameters%s)", self.path, self.target,
                 len(self.parameters), ", with training" if self.training else "")

    @property
    def trains(self) -> bool:
        """Does the artifact hold a backward (was some input or parameter requiring grad
        at export)?"""
        return self.training is not None

    def state_dict(self, *, keep_vars: bool = False) -> dict[str, torch.Tensor]:
        """The parameters and buffers by name, as `nn.Module.state_dict()` gives them
        (detached unless `keep_vars`; a tied weight under each of its names). The names
        are the exported module's (`<variable>.<name>` for what an exported function
        closed over); artifacts written before names were recorded use `tensor<i>`."""
        return {name: p if keep_vars else p.detach()
                for name, p in zip(self.parameter_names, self.parameters)}

    def _metadata(self) -> dict[str, Any]:
        try:
            with open(os.path.join(self.path, METADATA)) as f:
                meta = json.load(f)
        except (OSError, ValueError) as e:
            raise ArtifactError(f"{self.path} is not a fusegrad artifact: {e}") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ArtifactError(f"{self.path}: {METADATA} is not a {FORMAT} description")
        if meta.get("version") != VERSION:
            raise ArtifactError(f"{self.path}: artifact version {meta.get('version')}, this "
                                f"runtime reads version {VERSION}; export it again")
        return meta

    def _executables(self, folder: str, names: Sequence[str]) -> list[Callable[..., list]]:
        directory = os.path.join(self.path, folder)
        if self.target == "cpu":
            from .cpu_library import read
            cpu, _ = read(directory)
            return [cpu.function(n) for n in names]
        from .cuda import CudaProgram
        program = CudaProgram.load(directory, **self._cuda)
        return [program.function(n) for n in names]

    def __call__(self, *inputs: torch.Tensor) -> Any:
        self._check(inputs)
        full = [*self.parameters, *inputs]
        if self.seed_input is not None:
            full.append(fresh_seed(self.device))
        needs_grad = [i for i, x in enumerate(full) if x.requires_grad]
        if torch.is_grad_enabled() and needs_grad:
            outputs = list(CompiledFunction.apply(self._training_for(needs_grad), self.mutated,
                                                  (), None, self.path, None, *full))
        else:
            outputs = unaliased(self._forward(*full), full)
        n = len(self.mutated)
        with torch.no_grad():
            for index, value in zip(self.mutated, outputs[:n]):
                full[index].copy_(value)
        tensors = iter(outputs[n:])
        leaves = [next(tensors) if leaf is None else leaf["value"] for leaf in self._template]
        return pytree.tree_unflatten(leaves, self._out_spec)

    def _training_for(self, needs_grad: Sequence[int]) -> Training:
        if self.training is None:
            raise ArtifactError(f"{self.path} was exported without training (no input or "
                                "parameter required grad); call it under torch.no_grad(), or "
                                "export with inputs that require grad")
        extra = sorted(set(needs_grad) - set(self.training.wrt))
        if extra:
            first = extra[0] - len(self.parameters)
            what = f"parameter #{extra[0]}" if first < 0 else f"input #{first}"
            raise ArtifactError(f"{self.path}: {what} requires grad, but the artifact "
                                "differentiates only what required grad at export; export "
                                "again with it requiring grad")
        return self.training

    def _on_device(self, x: torch.Tensor) -> bool:
        """`cuda` without an index is the current device (a tensor's device has its index)."""
        if self.device.type == "cuda" and self.device.index is None:
            return x.device.type == "cuda" and x.device.index == torch.cuda.current_device()
        return x.device == self.device

    def _check(self, inputs: Sequence[Any]) -> None:
        if len(inputs) != len(self.inputs):
            raise ArtifactError(f"{self.path} takes {len(self.inputs)} inputs, got {len(inputs)}")
        for i, (x, (shape, dtype)) in enumerate(zip(inputs, self._shapes)):
            expected = _shape_text(self.inputs[i][0])
            if not isinstance(x, torch.Tensor):
                raise ArtifactError(f"{self.path}: input #{i} is a {type(x).__name__}, "
                                    f"expected a {expected} {dtype} tensor on {self.device}")
            if (x.dim() != len(shape) if self._sizes else tuple(x.shape) != shape) \
                    or x.dtype != dtype or not self._on_device(x):
                raise ArtifactError(
                    f"{self.path}: input #{i} is {tuple(x.shape)} {x.dtype} on {x.device}, "
                    f"expected {expected} {dtype} on {self.device} (as exported)")
        if self._sizes:
            self._check_dims(inputs)

    def _check_dims(self, inputs: Sequence[torch.Tensor]) -> None:
        """Each fixed dim as exported; each dynamic dim within its range, and one size
        for the dims of one name. (The compiled code checks sizes too, but its errors
        name dg's sizes and its arguments, not the user's dims and inputs.)"""
        bound: dict[str, tuple[int, int, int]] = {}  # size name -> (size, input, dim)
        for i, (x, (shape, _)) in enumerate(zip(inputs, self._shapes)):
            for k, (want, got) in enumerate(zip(shape, x.shape)):
                if isinstance(want, int):
                    if got != want:
                        raise ArtifactError(
                            f"{self.path}: input #{i} dim {k} is {got}, expected {want} (a "
                            f"fixed dim: input #{i} is {tuple(x.shape)}, expected "
                            f"{_shape_text(self.inputs[i][0])})")
                    continue
                dim = self._sizes[want]
                size, j, m = bound.setdefault(want, (got, i, k))
                if got != size:
                    raise ArtifactError(
                        f"{self.path}: input #{i} dim {k} is {got}, expected {dim['name']} = "
                        f"{size}, its size at input #{j} dim {m}")
                if got < dim["min"] or (dim["max"] is not None and got > dim["max"]):
                    raise ArtifactError(
                        f"{self.path}: input #{i} dim {k} is {got}, outside {dim['name']}'s "
                        f"range [{dim['min']}, {'inf' if dim['max'] is None else dim['max']}] "
                        "(as exported)")


def _shape_text(shape: Sequence[int | str]) -> str:
    """A shape with its dynamic dims by name: `(batch, 8)`."""
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"

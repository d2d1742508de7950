"""Captures of Dynamo graphs on disk, keyed on what Dynamo hands the backend.

The compile cache is keyed on the imported dg module, so a warm process would still
capture each graph (AOT export with decompositions: ~0.35 s of HF GPT-2's first step)
and import it before it could look its code up. Here the key is Dynamo's graph itself,
as Inductor's FX graph cache keys it: its code, each node's source location, the example
inputs' metadata (shapes, symbolic sizes, strides, dtypes, devices, requires_grad, the
numbers baked in), its tensor attributes, torch's global state as Dynamo guards it (grad
mode, autocast, default dtype, ...), the compile options and every version the compile
cache's key holds. A hit gives the `Captured` (its functional graph
left out: nothing after the import reads it) and the imported dg module's text, so a
warm first call parses that module and loads its code, with no capture and no import.

Entries live in the compile cache's directory (`compile_cache.active`), under the same
size cap and eviction; `FUSEGRAD_CACHE=0` turns both off, and so does dumping
(`FUSEGRAD_DUMP`: a hit would skip the stages being dumped). Not cached: graphs read
through a wrapper other than `_NumbersBakedIn` or a GraphModule, graphs calling a custom
op or function of the user's (its code may change under the same name), lifted tensors
that are not the graph's own parameters or buffers, and captures for every size whose
trace added a guard to Dynamo's (a hit could not add it again).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import pickle
from typing import Any, Sequence

import torch
import torch.utils._pytree as pytree

from .. import compile_cache
from ..program import CompileOptions
from .capture import Captured

log = logging.getLogger(__name__)

FORMAT = 1  # of keys and entries
ENTRY_FILE = "capture.pkl"


@dataclasses.dataclass(frozen=True)
class CachedCapture:
    """A capture from an earlier process: `captured.gm` is None, its lifted tensors are
    this process's; `module` is the imported dg module's text; `target` the one chosen."""

    captured: Captured
    module: str
    target: str


def graph_key(fn: Any, example_inputs: Sequence[Any], options: CompileOptions,
              for_every_size: bool) -> str | None:
    """The key of `fn`'s capture for `example_inputs` (None: not cached). `fn` is a
    Dynamo graph, or a `_NumbersBakedIn` around one."""
    if options.dump_dir or compile_cache.active(compile_cache.target_of(options)) is None:
        return None
    gm = getattr(fn, "gm", fn)
    if not isinstance(gm, torch.fx.GraphModule) or (fn is not gm and not hasattr(fn, "numbers")):
        return None
    graphs = [(name, m) for name, m in gm.named_modules() if isinstance(m, torch.fx.GraphModule)]
    if any(not _known(node.target) for _, m in graphs for node in m.graph.nodes
           if node.op == "call_function"):
        return None
    parts = {
        "format": FORMAT, "for_every_size": for_every_size,
        "code": [(name, m.code) for name, m in graphs],  # with higher-order ops' bodies
        "locations": [node.meta.get("stack_trace") for _, m in graphs for node in m.graph.nodes],
        "inputs": [_describe(x) for x in _traced_values(gm, example_inputs)],
        "numbers": [_describe(x) for x in getattr(fn, "numbers", ())],
        "attributes": _attributes(gm),
        "torch_state": _torch_state(),
        "options": repr(dataclasses.replace(options, dump_dir=None)),
        "versions": compile_cache.versions(), "host_cpu": compile_cache.host_cpu(),
    }
    return "graph-" + hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def load(key: str | None, fn: Any, options: CompileOptions) -> CachedCapture | None:
    """The capture stored under `key`, its lifted tensors taken from `fn`; None when there
    is none or it is unusable (a stale one is discarded)."""
    if key is None:
        return None
    cache = compile_cache.active(compile_cache.target_of(options))
    data = cache.read_blob(key, ENTRY_FILE) if cache is not None else None
    if data is None:
        return None
    try:
        entry = pickle.loads(data)
        state = _named_tensors(fn)
        lifted = tuple(state[name] for name in entry["lifted"])
        captured = dataclasses.replace(entry["captured"], lifted=lifted,
                                       out_spec=pytree.treespec_loads(entry["out_spec"]))
    except Exception as e:  # noqa: BLE001 - an unusable entry is a miss
        log.info("graph cache entry %s is unusable (%s: %s); capturing again",
                 key, type(e).__name__, e)
        cache.discard(key)
        return None
    compile_cache.STATS.graph_hits += 1
    log.debug("graph cache hit: %s", key)
    return CachedCapture(captured, entry["module"], entry["target"])


def store(key: str | None, fn: Any, captured: Captured, module: str, target: str,
          options: CompileOptions) -> None:
    """Keep `captured` (of `fn`) with its imported dg module's text under `key`."""
    cache = compile_cache.active(compile_cache.target_of(options)) if key else None
    if cache is None or (captured.symbolic is not None and captured.symbolic.guards_added):
        return
    ids = {id(t): name for name, t in _named_tensors(fn).items()}
    if any(id(t) not in ids for t in captured.lifted):
        return
    try:
        # pytree's own format for the output structure (pickling a TreeSpec is deprecated)
        data = pickle.dumps({"lifted": [ids[id(t)] for t in captured.lifted],
                             "out_spec": pytree.treespec_dumps(captured.out_spec),
                             "captured": dataclasses.replace(captured, gm=None, lifted=(),
                                                             out_spec=None),
                             "module": module, "target": target})
    except Exception as e:  # noqa: BLE001 - an output structure that cannot be saved
        log.debug("graph cache: not storing %s (%s: %s)", key, type(e).__name__, e)
        return
    cache.write_blob(key, ENTRY_FILE, data)


def _torch_state() -> Any:
    """What Dynamo's global-state guard holds (grad mode, autocast per device and its
    dtype, default dtype, deterministic algorithms, TF32 and reduced-precision reductions,
    torch function), which the capture traces under: a graph Dynamo made under bf16
    autocast captures other ops than the same graph under fp16. Not the thread count."""
    state = json.loads(torch._C._dynamo.guards.GlobalStateGuard().__getstate__())
    state.pop("num_threads", None)
    state.update(inference_mode=torch.is_inference_mode_enabled(),
                 functorch_level=torch._C._functorch.maybe_current_level(),
                 forward_ad=torch.autograd.forward_ad._current_level)
    return state


# code whose meaning the key holds: torch's (its version), fusegrad's (its sources),
# Python's operators. A user's custom op or function called in the graph may change
# between processes under the same name, so such graphs are not cached.
_KNOWN_NAMESPACES = frozenset({"aten", "prims", "fusegrad", "higher_order"})
_KNOWN_MODULES = ("torch", "operator", "_operator", "math", "builtins", "fusegrad")


def _known(target: Any) -> bool:
    """Is the graph's callee `target` code the key covers?"""
    if isinstance(target, torch._ops.OpOverload):
        return target.namespace in _KNOWN_NAMESPACES
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target._qualified_op_name.split("::")[0] in _KNOWN_NAMESPACES
    if isinstance(target, torch._ops.HigherOrderOperator):
        return True  # its bodies are the graph's submodules, keyed with it
    module = getattr(target, "__module__", None) or ""
    return module.split(".")[0] in _KNOWN_MODULES


def _named_tensors(fn: Any) -> dict[str, torch.Tensor]:
    module = fn if isinstance(fn, torch.nn.Module) else None
    if module is None:
        return {}
    state = dict(module.named_parameters(remove_duplicate=False))
    state.update(module.named_buffers(remove_duplicate=False))
    return state


def _traced_values(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[Any]:
    """The inputs as Dynamo traced them: a placeholder's example value where it has one
    (symbolic sizes; Dynamo hands real tensors of one size as the example inputs)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return list(example_inputs)
    return [n.meta.get("example_value", x) for n, x in zip(placeholders, example_inputs)]


def _describe(x: Any) -> Any:
    """What a capture depends on of an example input (a symbolic size as its expression)."""
    if isinstance(x, torch.Tensor):
        return ["tensor", [str(d) for d in x.shape], [str(s) for s in x.stride()],
                str(x.dtype), str(x.device), x.requires_grad, isinstance(x, torch.nn.Parameter),
                str(x.storage_offset())]
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ["symbolic", type(x).__name__, str(x.node.expr)]
    return [type(x).__name__, repr(x)]


def _attributes(gm: torch.fx.GraphModule) -> list[Any]:
    """The graph's tensor attributes: parameters and buffers by their metadata (the program
    takes them as inputs), other tensors (constants) by value too."""
    state = _named_tensors(gm)
    described = [[name, _describe(t)] for name, t in sorted(state.items())]
    for node in gm.graph.nodes:
        if node.op != "get_attr" or node.target in state:
            continue
        value = gm
        for part in str(node.target).split("."):
            value = getattr(value, part, None)
        if isinstance(value, torch.Tensor):
            digest = hashlib.sha256(value.detach().cpu().reshape(-1).view(torch.uint8)
                                    .numpy().tobytes()).hexdigest() if value.numel() else ""
            described.append([node.target, _describe(value), digest])
        elif value is not None and not isinstance(value, torch.nn.Module):
            described.append([node.target, repr(value)])
    return described

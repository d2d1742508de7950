"""`fusegrad.compile`: torch.compile with the fusegrad backend and its options."""
from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from .backend import fusegrad_backend
from .program import CompileOptions


def compile(model_or_fn: Callable[..., Any], *, fusion: bool = True, remat: bool = True,
            executor: str = "cpu", dynamic: bool | None = None, fullgraph: bool = False,
            dump_dir: str | None = None, double_backward: bool = True,
            target: str | None = None, cuda_graphs: bool = False) -> Callable[..., Any]:
    """Compile an nn.Module or function of tensors with fusegrad.

    Works like `torch.compile(model_or_fn, backend="fusegrad")`: Dynamo captures
    graphs (graph breaks run eagerly), each graph is compiled for the shapes
    and dtypes seen, and new shapes recompile. Training works: `backward()`
    runs fusegrad's compiled backward. `executor="reference"` runs the dg IR
    in the reference interpreter (slow; a debugging aid). `dump_dir` (or the
    `FUSEGRAD_DUMP` environment variable) writes every stage's IR there.
    Graphs compile for the device their tensors are on (CPU or CUDA); `target`
    ("cpu" or "cuda") insists on one, and tensors elsewhere raise
    `devices.DeviceError` naming the tensor, as do tensors on several devices.
    `cuda_graphs=True` replays CUDA code from CUDA graphs after a function's first
    call: for small batches, whose steps are bound by launching kernels.
    `dynamic` goes to Dynamo as in torch.compile: a graph Dynamo makes
    dynamic (from the start with True, after a shape change with None) is
    compiled once per concrete shape by fusegrad itself, so new shapes never
    reach Dynamo's recompile limit. `dynamic=False` makes Dynamo recompile per
    shape instead, and costs about 4 us per call (Dynamo patches its config
    around every call of such a function).
    """
    options = CompileOptions(fusion=fusion, remat=remat, executor=executor,
                             double_backward=double_backward, target=target,
                             cuda_graphs=cuda_graphs,
                             **({"dump_dir": dump_dir} if dump_dir is not None else {}))
    backend = functools.partial(fusegrad_backend, **vars(options))
    return torch.compile(model_or_fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph)

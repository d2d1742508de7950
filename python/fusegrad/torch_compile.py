"""`fusegrad.compile`: torch.compile with the fusegrad backend and its options."""
from __future__ import annotations

import functools
import logging
import warnings
from typing import Any, Callable

import torch

from .frontend.backend import (FusegradEagerOpWarning, backend_options, fusegrad_backend,
                               warn_at_recompile_limit)

log = logging.getLogger(__name__)


def compile(model_or_fn: Callable[..., Any], *, fusion: bool = True, remat: bool = True,
            executor: str = "cpu", dynamic: bool | None = None, fullgraph: bool = False,
            dump_dir: str | None = None, double_backward: bool = True,
            target: str | None = None, cuda_graphs: bool | str | None = None,
            channels_last: bool = True, specialize_shapes: bool = False,
            mode: str | None = None) -> Callable[..., Any]:
    """Compile an nn.Module or function of tensors with fusegrad.

    Works like `torch.compile(model_or_fn, backend="fusegrad")`: Dynamo captures
    graphs (graph breaks run eagerly), each graph is compiled for the shapes
    and dtypes seen; a new shape recompiles once, for every size (see `dynamic`). Training works: `backward()`
    runs fusegrad's compiled backward. `executor="reference"` runs the dg IR
    in the reference interpreter (slow; a debugging aid). `dump_dir` (or the
    `FUSEGRAD_DUMP` environment variable) writes every stage's IR there.
    Graphs compile for the device their tensors are on (CPU or CUDA); `target`
    ("cpu" or "cuda") insists on one, and tensors elsewhere raise
    `devices.DeviceError` naming the tensor, as do tensors on several devices.
    On CUDA, a compiled function replays from a CUDA graph after its first call when
    it is small (`cuda_graphs="auto"`: at most `runtime.cuda.AUTO_GRAPH_MAX_BYTES` of
    temporaries and outputs, where launching kernels from Python costs more than running
    them); `cuda_graphs=True` replays every function, False none. `mode` is
    torch.compile's (`backend.TORCH_COMPILE_MODES`: "reduce-overhead" and "max-autotune"
    replay every function unless `cuda_graphs` says otherwise; an unknown mode raises).
    `channels_last=False` keeps convolutions NCHW on the CPU (by default they run, with
    the ops between them, on channels-last activations: dg-channels-last).
    `dynamic` goes to Dynamo as in torch.compile: a graph Dynamo makes
    dynamic (from the start with True, after a shape change with None) is
    compiled once for every value of its dynamic sizes (docs/usage.md, "Dynamic
    shapes"), so new shapes neither compile nor reach Dynamo's recompile limit;
    `specialize_shapes=True` compiles such a graph per concrete shape instead. A graph
    whose ops a program for every size cannot serve yet compiles per shape too (its
    reason is logged at INFO). `dynamic=False` makes Dynamo recompile per shape, and
    costs about 4 us per call (Dynamo patches its config around every call of such a
    function).
    """
    options = backend_options(None, mode, fusion=fusion, remat=remat, executor=executor,
                              double_backward=double_backward, target=target,
                              channels_last=channels_last,
                              specialize_shapes=specialize_shapes,
                              **({"cuda_graphs": cuda_graphs} if cuda_graphs is not None else {}),
                              **({"dump_dir": dump_dir} if dump_dir is not None else {}))
    backend = functools.partial(fusegrad_backend, **vars(options))
    warn_at_recompile_limit()
    compiled = torch.compile(model_or_fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph)
    if isinstance(model_or_fn, torch.nn.Module):
        own_top_frame(compiled)
        trace_or_warn_rnns(model_or_fn, compiled)
    return compiled


def trace_or_warn_rnns(model: torch.nn.Module, compiled: torch.nn.Module) -> None:
    """Dynamo does not trace nn.RNN/GRU/LSTM (`allow_rnn` is off by default) and gives up
    on the whole function that calls one: the model ran eagerly. An nn.LSTM traces to
    one op, PyTorch's LSTM kernel, which runs inside the compiled graph with the rest
    compiled around it (a 2-layer LSTM over 32 steps: first call 1.8 s), so the calls of
    a model whose recurrent modules are all LSTMs run with `allow_rnn` on (that model's
    only: a config patch per call, a few us). nn.GRU and nn.RNN trace to their time steps
    unrolled, compile time growing with layers x steps (a GRU, 2 layers of 32 over 32
    steps: first call 16.5 s, then 1.1 ms a step against eager's 9.2 ms; 64 steps: 33.5 s):
    they stay eager, with a warning saying how to trace them."""
    if torch._dynamo.config.allow_rnn:
        return
    rnns = [(name or "the model", m) for name, m in model.named_modules()
            if isinstance(m, torch.nn.RNNBase)]
    if not rnns:
        return
    if all(isinstance(m, torch.nn.LSTM) for _, m in rnns):
        log.info("tracing the model's nn.LSTM modules (torch._dynamo.config.allow_rnn on in "
                 "its calls): PyTorch's LSTM kernel runs inside the compiled graph")
        forward = compiled.forward

        @functools.wraps(forward)
        def tracing_lstms(*args: Any, **kwargs: Any) -> Any:
            with torch._dynamo.config.patch(allow_rnn=True):
                return forward(*args, **kwargs)
        compiled.forward = tracing_lstms
        return
    names = ", ".join(f"{name} (nn.{type(m).__name__})" for name, m in rnns)
    message = (f"fusegrad does not compile {names}: Dynamo does not trace recurrent modules "
               "and then runs the whole model eagerly. Set "
               "torch._dynamo.config.allow_rnn = True before the first call to trace them: "
               "each time step of a GRU or RNN is then compiled into the graph (a GRU of 2 "
               "layers over 32 steps: a 16 s first call, then about 8x faster than eager)")
    log.warning("%s", message)
    warnings.warn(message, FusegradEagerOpWarning, stacklevel=3)


def own_top_frame(compiled: torch.nn.Module) -> None:
    """Give the frame Dynamo compiles for this module a code object of its own.

    Dynamo enters torch.nn modules (`Sequential`, `Linear`, `TransformerEncoderLayer`)
    through `external_utils.wrap_inline`, whose `inner` code object all of them share,
    and it keeps compiled graphs, the recompile limit (8) and "won't convert" per code
    object: after eight compiled `nn.Sequential`s, or one `nn.LSTM` (which Dynamo gives
    up on), every torch.nn module compiled afterwards in the process ran eagerly with
    only a torch warning. A copy of the code per compiled module keeps them apart."""
    from torch._dynamo import external_utils

    shared = external_utils.wrap_inline(len).__code__
    for attr in ("forward", "_forward"):  # `_forward`: lazy modules' deferred forward
        inner = getattr(compiled.__dict__.get(attr), "__wrapped__", None)
        if getattr(inner, "__code__", None) is shared:
            inner.__code__ = shared.replace()
    # A decorated forward is entered through its decorator's wrapper, one code object
    # for every forward it decorates: after HuggingFace's `can_return_tuple` wrapper had
    # compiled eight models, the ninth model ran eagerly. The class's wrapper function
    # gets a copy of its own (the same code), once: another copy for each model of the
    # class would recompile the models compiled before.
    forward = getattr(type(compiled._orig_mod), "forward", None)
    if hasattr(forward, "__wrapped__") and hasattr(forward, "__code__") and \
            not getattr(forward, "_fusegrad_own_code", False):
        forward.__code__ = forward.__code__.replace()
        forward._fusegrad_own_code = True

"""Benchmark suite: eager PyTorch vs torch.compile (Inductor) vs fusegrad, CPU, float32.

    .venv/bin/python benchmarks/suite.py [--quick] [--only NAME[,NAME]] [--threads N]
        [--no-inductor] [--dynamic] [--regimes default,keep] [--budget SECONDS]
        [--output FILE]

Every workload runs in its own subprocess, once per allocator regime (the
regime is a set of glibc malloc environment variables, so it has to be set
before the process starts). Inside that process:

1. a throwaway Dynamo compile (backend "eager") so that no backend pays for
   Dynamo's own first-use cost;
2. per backend (eager, Inductor, fusegrad, in that order): build a private
   copy of the model and inputs, time the first call (for the compiled
   backends this includes capture and code generation; Inductor's caches are
   disabled and fusegrad's compile cache starts empty, so both compile cold),
   compare its result (output or loss, and the gradients) with eager's, then
   one untimed warm-up call;
3. steady state: rounds in which each backend runs one iteration, in a fresh
   random order per round, so machine noise hits all of them alike and none
   runs twice in a row on inputs still in cache from its previous call; the
   loop stops after --budget seconds once every backend has --min-iters
   iterations (a slow backend finishes its minimum alone, or just one
   iteration after 6x the budget);
4. for memory-bound workloads, the copy bandwidth of this process
   (`dst.copy_(src)` of a large buffer);
5. peak memory per backend: before a step, drop the previous step's
   gradients, garbage-collect, empty fusegrad's output pool, `malloc_trim(0)`
   and reset the kernel's resident-set high-water mark; after it, VmHWM minus
   the RSS before the step is the memory the step needed on top of what was
   already live (the max over two steps).

`--dynamic` adds a backend, fusegrad-dynamic: `fusegrad.compile(f, dynamic=True)`,
every input size symbolic from the first call, so each graph compiles one program for
all sizes; it runs at the same shapes, and the report gives its step over the static
program's per workload.

A fusegrad graph that falls back to eager (`FusegradFallbackWarning`) makes the
workload's fusegrad row "fallback", never a fusegrad timing. Errors are caught
per backend and per workload and reported in the table.
"""
from __future__ import annotations

import argparse
import collections
import copy
import ctypes
import dataclasses
import datetime
import gc
import json
import logging
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from typing import Any, Callable

REGIMES: dict[str, dict[str, str]] = {
    # glibc defaults: large blocks are mmapped and returned to the OS on free. fusegrad's
    # runtime would otherwise switch to (about) `keep` at its first compiled module
    # (runtime/host_memory.keep_freed_memory), midway through a workload's process.
    "default": {"FUSEGRAD_MALLOC": "default"},
    # freed memory stays in the heap: no mmapped blocks, no trimming.
    "keep": {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "1099511627776"},
}
MALLOC_VARS = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
               "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX", "FUSEGRAD_MALLOC")
BACKENDS = ("eager", "inductor", "fusegrad", "fusegrad-dynamic")
F32 = 4  # bytes per element


# --------------------------------------------------------------------------- workloads

class Step:
    """One iteration of a workload for one backend. Calling it runs the iteration and
    returns the tensors compared with eager after the first call; `release()` drops
    what the previous iteration left (gradients), which the next one drops anyway."""

    def __init__(self, run: Callable[[], list], release: Callable[[], None] = lambda: None):
        self.run, self.release = run, release

    def __call__(self) -> list:
        return self.run()


@dataclasses.dataclass
class Case:
    """One built workload: `make(wrap)` returns the `Step` of a backend.

    `wrap` compiles a function or module (identity for eager). `min_bytes` is the
    traffic a perfect implementation needs (memory-bound workloads)."""
    make: Callable[[Callable], Step]
    min_bytes: int | None = None
    shape: str = ""


@dataclasses.dataclass
class Workload:
    name: str          # "family:variant"
    build: Callable[[bool], Case]
    memory_bound: bool = False

    @property
    def family(self) -> str:
        return self.name.split(":")[0]


def _gelu(x, w, b):
    import torch
    return torch.nn.functional.gelu(x * w + b) * torch.sigmoid(x)


def _layer_norm(x, w, b):
    import torch
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)


def _softmax_sq(x):
    import torch
    y = torch.softmax(x, dim=-1)
    return (y * y).sum()


def _pointwise_case(fn, quick: bool, backward: bool, affine: bool) -> Case:
    """fn(x[, w, b]) on an n x d input; backward with a fixed upstream gradient
    (or loss.backward() when fn returns a scalar)."""
    import torch
    n, d = (64, 256) if quick else ((4096, 1024) if fn is _gelu else (8192, 1024))
    torch.manual_seed(0)
    base = [torch.randn(n, d)] + ([torch.randn(d), torch.randn(d)] if affine else [])
    gy = torch.randn(n, d)
    scalar = fn is _softmax_sq

    def make(wrap):
        f = wrap(fn)
        args = [t.clone().requires_grad_(backward) for t in base]
        if not backward:
            def fwd():
                with torch.no_grad():
                    return [f(*args)]
            return Step(fwd)

        def release():
            for a in args:
                a.grad = None

        def fwd_bwd():
            release()
            y = f(*args)
            if scalar:
                y.backward()
            else:
                y.backward(gy)
            return [y.detach()] + [a.grad for a in args]
        return Step(fwd_bwd, release)

    big = n * d * F32
    small = d * F32 if affine else 0
    if scalar:  # read x (+ write dx)
        nbytes = big * (2 if backward else 1)
    else:       # read x, write y (+ read dy, write dx); w, b (+ dw, db)
        nbytes = big * (4 if backward else 2) + small * (4 if backward else 2)
    return Case(make, nbytes, f"{n}x{d}")


def _with_loss(model, loss):
    """`model + loss` as one module, compiled as one: the loss is part of the compiled
    graph for every model, as it is for the HuggingFace ones."""
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x, y):
            return loss(self.model(x), y)
    return Wrapped()


def language_model_loss(model):
    """A HuggingFace language model as one module returning its loss on `ids` (the labels
    are the inputs), what a training step compiles."""
    import torch

    class LanguageModelLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, labels=ids).loss
    return LanguageModelLoss()


def _train_case(build_model: Callable, x, y, loss, optimizer: str, shape: str,
                autocast: bool = False) -> Case:
    """Training step: zero_grad, loss = compiled(model+loss)(x, y), backward, optimizer step
    (the optimizer runs eagerly for every backend); `autocast`: the forward under bf16
    autocast (mixed precision)."""
    import torch
    torch.manual_seed(0)
    base = build_model()
    base.train()

    def make(wrap):
        model = copy.deepcopy(base)
        params = list(model.parameters())
        opt = (torch.optim.SGD(params, lr=0.01) if optimizer == "sgd"
               else torch.optim.AdamW(params, lr=1e-4))
        step = wrap(_with_loss(model, loss) if loss is not None else model)

        def release():
            opt.zero_grad(set_to_none=True)

        def train_step():
            release()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                out = step(x, y) if loss is not None else step(input_ids=x, labels=y)
            l = out if loss is not None else out.loss
            l.backward()
            opt.step()
            return [l.detach()] + [p.grad for p in params]  # grads of this step
        return Step(train_step, release)
    return Case(make, None, shape)


def _forward_case(build_model: Callable, x, shape: str, hf: bool = False) -> Case:
    import torch
    torch.manual_seed(0)
    base = build_model()
    base.eval()

    def make(wrap):
        model = wrap(copy.deepcopy(base))

        def fwd():
            with torch.no_grad():
                out = model(input_ids=x) if hf else model(x)
            return [out.logits if hf else out]
        return Step(fwd)
    return Case(make, None, shape)


def _mlp(quick: bool):
    import torch
    d, h, batch = (64, 128, 16) if quick else (1024, 4096, 256)
    torch.manual_seed(0)
    x, y = torch.randn(batch, d), torch.randn(batch, d)

    def build():
        nn = torch.nn
        return nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, h), nn.GELU(), nn.Linear(h, d))
    return build, x, y, f"{d}-{h}-{h}-{d}, batch {batch}"


def mlp_fwd(quick: bool) -> Case:
    build, x, _, shape = _mlp(quick)
    return _forward_case(build, x, shape)


def mlp_fwd_bf16(quick: bool) -> Case:
    import torch
    build, x, _, shape = _mlp(quick)
    return _forward_case(lambda: build().to(torch.bfloat16), x.to(torch.bfloat16),
                         shape + ", bf16")


def mlp_train(quick: bool) -> Case:
    import torch
    build, x, y, shape = _mlp(quick)
    return _train_case(build, x, y, torch.nn.functional.mse_loss, "sgd", shape)


def _cnn(quick: bool):
    import torch
    nn = torch.nn
    batch, hw, c1, c2 = (4, 8, 4, 8) if quick else (32, 32, 32, 64)
    torch.manual_seed(0)
    x, y = torch.randn(batch, 3, hw, hw), torch.randint(0, 10, (batch,))

    def build():
        return nn.Sequential(
            nn.Conv2d(3, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(c2 * (hw // 4) ** 2, 10))
    return build, x, y, f"{batch}x3x{hw}x{hw}, conv {c1},{c2}"


def cnn_train(quick: bool) -> Case:
    import torch
    build, x, y, shape = _cnn(quick)
    return _train_case(build, x, y, torch.nn.functional.cross_entropy, "sgd", shape)


def _transformer(quick: bool):
    import torch
    d, heads, ff, b, s = (32, 4, 64, 2, 16) if quick else (256, 4, 1024, 8, 128)
    torch.manual_seed(0)
    x, y = torch.randn(b, s, d), torch.randn(b, s, d)

    def build():
        return torch.nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
    return build, x, y, f"d={d} heads={heads} ff={ff} on {b}x{s}x{d}"


def transformer_train(quick: bool, autocast: bool = False) -> Case:
    import torch
    build, x, y, shape = _transformer(quick)
    return _train_case(build, x, y, torch.nn.functional.mse_loss, "sgd",
                       shape + (", bf16 autocast" if autocast else ""), autocast)


def _hf(kind: str, quick: bool):
    """A small randomly initialised HuggingFace model (no download), dropout off."""
    import torch
    import transformers as tf
    layers, hidden, heads, inter, vocab, pos = (
        (1, 32, 2, 64, 128, 32) if quick else (2, 256, 4, 1024, 2048, 256))
    batch, seq = (2, 16) if quick else (8, 128)
    if kind == "gpt2":
        cfg = tf.GPT2Config(n_layer=layers, n_embd=hidden, n_head=heads, n_inner=inter,
                            vocab_size=vocab, n_positions=pos, resid_pdrop=0.0, embd_pdrop=0.0,
                            attn_pdrop=0.0, use_cache=False)
        cls = tf.GPT2LMHeadModel
    elif kind == "bert":
        cfg = tf.BertConfig(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                            intermediate_size=inter, vocab_size=vocab, max_position_embeddings=pos,
                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        cls = tf.BertForMaskedLM
    else:
        cfg = tf.LlamaConfig(num_hidden_layers=layers, num_attention_heads=heads,
                             num_key_value_heads=max(1, heads // 2), hidden_size=hidden,
                             intermediate_size=inter // 2, vocab_size=vocab,
                             max_position_embeddings=pos, attention_dropout=0.0, use_cache=False)
        cls = tf.LlamaForCausalLM
    torch.manual_seed(0)
    ids = torch.randint(0, vocab, (batch, seq))

    def build():
        torch.manual_seed(0)
        return cls(cfg)
    shape = f"{layers} layers, hidden {hidden}, vocab {vocab}, {batch}x{seq} tokens"
    return build, ids, shape


def hf_train(kind: str, autocast: bool = False) -> Callable[[bool], Case]:
    def case(quick: bool) -> Case:
        build, ids, shape = _hf(kind, quick)
        return _train_case(build, ids, ids, None, "adamw",
                           shape + (", bf16 autocast" if autocast else ""), autocast)
    return case


def gpt2_fwd(quick: bool) -> Case:
    build, ids, shape = _hf("gpt2", quick)
    return _forward_case(build, ids, shape, hf=True)


WORKLOADS = {w.name: w for w in [
    Workload("gelu:fwd", lambda q: _pointwise_case(_gelu, q, False, True), True),
    Workload("gelu:fwd+bwd", lambda q: _pointwise_case(_gelu, q, True, True), True),
    Workload("layer_norm:fwd", lambda q: _pointwise_case(_layer_norm, q, False, True), True),
    Workload("layer_norm:fwd+bwd", lambda q: _pointwise_case(_layer_norm, q, True, True), True),
    Workload("softmax:fwd", lambda q: _pointwise_case(_softmax_sq, q, False, False), True),
    Workload("softmax:fwd+bwd", lambda q: _pointwise_case(_softmax_sq, q, True, False), True),
    Workload("mlp:fwd", mlp_fwd),
    Workload("mlp:train", mlp_train),
    Workload("cnn:train", cnn_train),
    Workload("transformer_layer:train", transformer_train),
    Workload("gpt2:fwd", gpt2_fwd),
    Workload("gpt2:train", hf_train("gpt2")),
    Workload("bert:train", hf_train("bert")),
    Workload("llama:train", hf_train("llama")),
    # bf16: a model in bf16, and training under bf16 autocast (mixed precision)
    Workload("mlp:fwd-bf16", mlp_fwd_bf16),
    Workload("transformer_layer:train-bf16", lambda q: transformer_train(q, autocast=True)),
    Workload("llama:train-bf16", hf_train("llama", autocast=True)),
]}


def select(only: str | None) -> list[str]:
    """Workload names for --only: full names ("gelu:fwd") or families ("gelu")."""
    if not only:
        return list(WORKLOADS)
    names = []
    for item in only.split(","):
        item = item.strip()
        hits = [n for n in WORKLOADS if n == item or n.split(":")[0] == item]
        if not hits:
            raise SystemExit(f"unknown workload {item!r}; known: {', '.join(WORKLOADS)} "
                             f"(or a family: {', '.join(sorted({n.split(':')[0] for n in WORKLOADS}))})")
        names += [n for n in hits if n not in names]
    return names


# --------------------------------------------------------------------------- measuring

def _proc_status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _malloc_trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def step_peak_mib(step: Step, repeats: int = 2) -> float | None:
    """Peak resident memory one step needs above what is live before it (MiB): the
    previous step's gradients are released first, freed memory is given back to the
    OS (fusegrad's output pool, then malloc_trim), then the kernel's high-water mark
    is reset."""
    best = None
    for _ in range(repeats):
        step.release()
        gc.collect()
        host_memory = sys.modules.get("fusegrad.runtime.host_memory")
        if host_memory is not None:  # the pool keeps dead outputs' memory, as glibc may
            host_memory.POOL.clear()
        _malloc_trim()
        before = _proc_status_kib("VmRSS")
        if before is None or not _reset_peak_rss():
            return None
        out = step()
        peak = _proc_status_kib("VmHWM")
        del out
        if peak is None:
            return None
        delta = max(0, peak - before) / 1024
        best = delta if best is None else max(best, delta)
    return best


def copy_bandwidth(quick: bool) -> float:
    """Bytes/s of dst.copy_(src) on a buffer far larger than the caches (read + write)."""
    import torch
    n = (4 if quick else 64) * 2 ** 20  # float32 elements: 16 MiB / 256 MiB
    src, dst = torch.rand(n), torch.empty(n)
    for _ in range(2):
        dst.copy_(src)
    times = []
    for _ in range(5 if quick else 10):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    del src, dst
    return 2 * n * F32 / statistics.median(times)


def interleave(steps: dict[str, Callable], budget: float, min_iters: int, max_iters: int,
               on_error: Callable[[str, BaseException], None],
               failed: Callable[[str], bool]) -> dict[str, list[float]]:
    """Rounds in which every backend runs once, in a fresh random order each round.

    Equal turns, never the same backend twice in a row within a round: a backend
    that ran twice in a row would find its own inputs still in the last-level cache
    (the memory-bound workloads' inputs are about its size), which favoured whichever
    backend was already faster when the fastest one ran most often."""
    times: dict[str, list[float]] = {b: [] for b in steps}
    live = dict(steps)
    order = random.Random(0)
    start = time.perf_counter()
    while live:
        elapsed = time.perf_counter() - start
        # After the budget only a backend short of min_iters runs (of 1 after 6x the budget).
        least = min_iters if elapsed < 6 * budget else 1
        candidates = [b for b in live if len(times[b]) < max_iters and
                      (elapsed < budget or len(times[b]) < least)]
        if not candidates:
            break
        order.shuffle(candidates)
        for b in candidates:
            try:
                t0 = time.perf_counter()
                out = live[b]()
                dt = time.perf_counter() - t0
                del out
            except Exception as e:  # noqa: BLE001 - reported per backend
                on_error(b, e)
                del live[b]
                continue
            if failed(b):  # fell back to eager during the run: stop timing it
                del live[b]
                continue
            times[b].append(dt)
    return times


def rel_errors(got: list, want: list) -> tuple[float, float | None]:
    """(output error, gradient error) of a backend's first call against eager's.

    The output (or loss) is the first tensor: max|got - want| / max|want|. The
    gradients are the rest, compared as one vector: ||got - want|| / ||want||
    (a global norm, so a gradient that is zero in exact arithmetic, like a conv
    bias before BatchNorm, does not turn rounding noise into a huge ratio)."""
    if len(got) != len(want) or any((g is None) != (w is None) for g, w in zip(got, want)):
        return float("inf"), float("inf")
    pairs = [(g.detach().double(), w.detach().double())
             for g, w in zip(got, want) if g is not None]
    if any(g.shape != w.shape for g, w in pairs):
        return float("inf"), float("inf")
    (g0, w0), grads = pairs[0], pairs[1:]
    out = (g0 - w0).abs().max().item() / max(w0.abs().max().item(), 1e-30) if w0.numel() else 0.0
    if not grads:
        return out, None
    num = sum(((g - w) ** 2).sum().item() for g, w in grads)
    den = sum((w ** 2).sum().item() for _, w in grads)
    return out, (num ** 0.5) / max(den ** 0.5, 1e-30)


def _short(text: str) -> str:
    """A message without long absolute paths (site-packages/, the checkout)."""
    text = re.sub(r"/\S*/site-packages/", "", text)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    return text.replace(root, "").strip().rstrip(";").strip()


def _first_line(e: BaseException, limit: int = 160) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    line = text[0] if text else type(e).__name__
    # Dynamo wraps backend errors; the interesting part is often the last line.
    if len(text) > 1 and "BackendCompilerFailed" in line:
        line = text[0] + " " + " ".join(t.strip() for t in text[1:3])
    return _short(line)[:limit]


def run_worker(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Measure one workload with every backend in this process; a JSON-able dict."""
    import torch
    import torch._dynamo
    if args.threads:
        torch.set_num_threads(args.threads)
    import fusegrad
    from fusegrad.frontend.backend import FusegradFallbackWarning

    fallbacks: list[str] = []
    show = warnings.showwarning

    def record(message, category, *rest, **kw):
        if issubclass(category, FusegradFallbackWarning):
            fallbacks.append(str(message))
            print(f"    fusegrad fallback: {str(message).splitlines()[0][:200]}", flush=True)
            return
        show(message, category, *rest, **kw)
    warnings.showwarning = record
    warnings.simplefilter("always", FusegradFallbackWarning)
    warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")

    wraps: dict[str, Callable] = {"eager": lambda f: f}
    if not args.no_inductor:
        import torch._inductor.config as inductor_config
        inductor_config.force_disable_caches = True  # cold compile, like fusegrad's
        inductor_config.fx_graph_cache = False
        wraps["inductor"] = lambda f: torch.compile(f, backend="inductor")
    wraps["fusegrad"] = fusegrad.compile
    programs = _ProgramKinds()
    if args.dynamic:
        # every size of the inputs symbolic from the first call: one program for all sizes,
        # timed at the same shape as the static one
        wraps["fusegrad-dynamic"] = lambda f: fusegrad.compile(f, dynamic=True)
        logging.getLogger("fusegrad.frontend.backend").addHandler(programs)
        logging.getLogger("fusegrad.frontend.backend").setLevel(logging.INFO)
    # an empty compile cache (removed when this returns), so fusegrad's first call is a
    # cold compile like Inductor's
    fusegrad_cache = tempfile.TemporaryDirectory(prefix="fusegrad-cache-")
    os.environ["FUSEGRAD_CACHE_DIR"] = fusegrad_cache.name

    # Dynamo's own first use (imports, tracer warm-up) is paid here, not by one backend.
    torch.compile(lambda t: t * 2 + 1, backend="eager")(torch.ones(4))
    torch._dynamo.reset()

    wl = WORKLOADS[name]
    out: dict[str, Any] = {"workload": name, "threads": torch.get_num_threads(), "backends": {},
                           "versions": {"torch": torch.__version__}}
    if "transformers" in sys.modules:
        out["versions"]["transformers"] = sys.modules["transformers"].__version__
    case = wl.build(args.quick)
    out["shape"] = case.shape
    res = out["backends"]
    steps: dict[str, Callable] = {}
    eager_first = None
    for b, wrap in wraps.items():
        r = res[b] = {"status": "ok"}
        n_fb = len(fallbacks)
        try:
            step = case.make(wrap)
            t0 = time.perf_counter()
            first = step()
            r["first_s"] = time.perf_counter() - t0
            if b == "eager":
                eager_first = first
            elif eager_first is not None:
                r["out_err"], r["grad_err"] = rel_errors(first, eager_first)
            del first
            step()  # warm-up (a lazily compiled variant, optimizer state, ...)
        except Exception as e:  # noqa: BLE001 - one backend's failure is a table entry
            r["status"] = "error: " + _first_line(e)
            print(f"    {b}: {r['status']}", flush=True)
            traceback.print_exc(limit=3)
            continue
        if b.startswith("fusegrad") and len(fallbacks) > n_fb:
            r["status"] = "fallback: " + _short(fallbacks[n_fb].splitlines()[0])
            continue
        print(f"    {b}: first call {r['first_s']:.2f} s"
              + (f", error vs eager: output {r['out_err']:.1e}, gradients {_fmt(r['grad_err'], '.1e')}"
               if "out_err" in r else ""),
              flush=True)
        steps[b] = step
    if "eager" not in steps:
        out["error"] = res["eager"]["status"]
        return out

    n_fb_run = len(fallbacks)

    def on_error(b, e):
        res[b]["status"] = "error: " + _first_line(e)
        print(f"    {b}: {res[b]['status']}", flush=True)

    def failed(b):
        if b.startswith("fusegrad") and len(fallbacks) > n_fb_run:
            res[b]["status"] = "fallback: " + _short(fallbacks[n_fb_run].splitlines()[0])
            return True
        return False

    times = interleave(steps, args.budget, args.min_iters, args.max_iters, on_error, failed)
    for b, ts in times.items():
        if res[b]["status"] == "ok" and ts:
            res[b]["median_s"] = statistics.median(ts)
            res[b]["iters"] = len(ts)
            print(f"    {b}: median {res[b]['median_s'] * 1e3:.3f} ms over {len(ts)} iterations",
                  flush=True)
    if wl.memory_bound:
        out["copy_Bps"] = copy_bandwidth(args.quick)
        out["min_bytes"] = case.min_bytes
    for b, step in steps.items():
        if res[b]["status"] == "ok":
            try:
                res[b]["peak_mib"] = step_peak_mib(step)
            except Exception as e:  # noqa: BLE001
                res[b]["status"] = "error: " + _first_line(e)
    if "fusegrad-dynamic" in res:
        res["fusegrad-dynamic"].update(for_every_size=programs.for_every_size,
                                       per_shape=programs.per_shape)
    if "fusegrad" in steps:
        from fusegrad.runtime.cpu import workspace_bytes
        res["fusegrad"]["workspace_mib"] = workspace_bytes() / 2**20
    return out


class _ProgramKinds(logging.Handler):
    """Counts the backend's programs compiled for every size, and the graphs it compiles
    per shape instead (its INFO records)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.for_every_size = self.per_shape = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.for_every_size += "compiled once for every size" in str(record.msg)
        self.per_shape += str(record.msg).startswith("a graph compiles per shape")


# --------------------------------------------------------------------------- driver

def run_subprocess(name: str, regime: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run one workload in a fresh process with the regime's malloc settings."""
    env = {k: v for k, v in os.environ.items() if k not in MALLOC_VARS}
    env.update(REGIMES[regime])
    env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        result_path = tmp.name
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--result", result_path,
           "--budget", str(args.budget), "--min-iters", str(args.min_iters),
           "--max-iters", str(args.max_iters)]
    cmd += ["--quick"] * args.quick + ["--no-inductor"] * args.no_inductor
    cmd += ["--dynamic"] * args.dynamic
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    tail: collections.deque[str] = collections.deque(maxlen=15)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    timer = threading.Timer(args.timeout, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            tail.append(line.rstrip())
            if args.verbose or line.startswith("    "):
                print(line.rstrip(), flush=True)
        rc = proc.wait()
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    try:
        with open(result_path) as f:
            result = json.load(f)
    except (OSError, ValueError):
        why = (f"timed out after {args.timeout:.0f} s" if wall >= args.timeout
               else f"worker exited with status {rc}")
        last = next((l for l in reversed(tail) if l.strip()), "")
        result = {"workload": name, "error": f"{why}: {last[:160]}" if last else why,
                  "backends": {}}
        print("\n".join(tail), flush=True)
    finally:
        if os.path.exists(result_path):
            os.unlink(result_path)
    result["wall_s"] = wall
    return result


def _fmt(v: float | None, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


HEADER = ("| workload | backend | first call (s) | median (ms) | iters | vs eager | vs inductor "
          "| step peak (MiB) | workspace (MiB) | GB/s | % of copy | out err | grad err | status |\n"
          "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
          "| --- |")


def table_rows(result: dict[str, Any], backends: list[str]) -> list[str]:
    name = result["workload"]
    if "error" in result and not result.get("backends"):
        return [f"| {name} | all |" + " — |" * 11 + f" {_cell('error: ' + result['error'])} |"]
    res = result["backends"]
    med = {b: res.get(b, {}).get("median_s") for b in backends}
    rows = []
    for b in backends:
        r = res.get(b)
        if r is None:
            continue
        ok = r["status"] == "ok" and med[b]
        m = med[b] if ok else None
        vs_e = med["eager"] / m if m and med.get("eager") else None
        vs_i = med["inductor"] / m if m and med.get("inductor") else None
        gbs = pct = None
        if m and result.get("min_bytes"):
            gbs = result["min_bytes"] / m / 1e9
            pct = 100 * result["min_bytes"] / m / result["copy_Bps"]
        fallback = r["status"].startswith("fallback")
        first = None if fallback else r.get("first_s")
        rows.append(
            f"| {name} | {b} | {_fmt(first, '.2f')} | {_fmt(m and m * 1e3, '.3f')} | "
            f"{r.get('iters', '—') if ok else '—'} | {_fmt(vs_e, '.2f')}{'x' if vs_e else ''} | "
            f"{_fmt(vs_i, '.2f')}{'x' if vs_i else ''} | {_fmt(r.get('peak_mib') if ok else None, '.1f')} | "
            f"{_fmt(r.get('workspace_mib') if ok else None, '.1f')} | {_fmt(gbs, '.1f')} | {_fmt(pct, '.0f')}{'%' if pct is not None else ''} | "
            f"{_fmt(None if fallback else r.get('out_err'), '.1e')} | "
            f"{_fmt(None if fallback else r.get('grad_err'), '.1e')} | {_cell(r['status'][:200])} |")
    return rows


def _dynamic_summary(rs: list[dict]) -> str:
    """Per workload: the program for every size's step over the static program's, and how
    many of its graphs compiled for every size / per shape."""
    cells = []
    for r in rs:
        static = r.get("backends", {}).get("fusegrad", {})
        dynamic = r.get("backends", {}).get("fusegrad-dynamic", {})
        if static.get("median_s") and dynamic.get("median_s"):
            cells.append(f"{r['workload']} {dynamic['median_s'] / static['median_s']:.2f}x "
                         f"({dynamic.get('for_every_size', 0)} for every size, "
                         f"{dynamic.get('per_shape', 0)} per shape)")
    return ("fusegrad-dynamic step / fusegrad step (its graphs compiled for every size, per "
            "shape): " + "; ".join(cells) + ".")


def markdown(results: dict[str, list[dict]], args: argparse.Namespace, backends: list[str],
             meta: dict[str, str]) -> str:
    lines = ["# fusegrad benchmark suite", ""]
    lines.append(", ".join(f"{k} {v}" for k, v in meta.items()))
    lines.append("")
    for regime, rs in results.items():
        env = " ".join(f"{k}={v}" for k, v in REGIMES[regime].items()) or "glibc defaults"
        lines += [f"## Allocator regime `{regime}` ({env})", "", HEADER]
        for r in rs:
            lines += table_rows(r, backends)
        lines.append("")
        if "fusegrad-dynamic" in backends:
            lines += [_dynamic_summary(rs), ""]
        notes = [f"{r['workload']} ({r['shape']})" for r in rs if r.get("shape")]
        lines.append("Sizes: " + "; ".join(notes) + ".")
        copies = [f"{r['workload']} {r['copy_Bps'] / 1e9:.1f}" for r in rs if r.get("copy_Bps")]
        if copies:
            lines.append("")
            lines.append("Copy bandwidth measured in each memory-bound workload's process (GB/s): "
                         + ", ".join(copies) + ".")
        lines.append("")
    return "\n".join(lines)


def _meta(args: argparse.Namespace, results: dict[str, list[dict]]) -> dict[str, str]:
    done = [r for rs in results.values() for r in rs if r.get("versions")]
    versions: dict[str, str] = {}
    for r in done:
        versions.update(r["versions"])
    threads = next((r["threads"] for r in done), None)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        rev = ""
    meta = {"date": datetime.date.today().isoformat(), "fusegrad": rev or "?", **versions}
    meta.update({"CPU": f"{cpu} ({os.cpu_count()} cores)", "threads": str(threads or "?"),
                 "float32, budget": f"{args.budget:g} s per workload",
                 "mode": "quick" if args.quick else "full"})
    return meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes and few iterations (smoke test)")
    ap.add_argument("--only", help="comma-separated workloads or families (e.g. gelu,mlp:train)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--dynamic", action="store_true",
                    help="also time fusegrad's program for every size (dynamic=True) at the "
                         "same shapes, against its static program")
    ap.add_argument("--regimes", default="default,keep",
                    help=f"allocator regimes, comma-separated from {','.join(REGIMES)}")
    ap.add_argument("--output", help="write the markdown report to this file")
    ap.add_argument("--budget", type=float, help="steady-state seconds per workload "
                    "(default 4, --quick 0.3)")
    ap.add_argument("--min-iters", type=int, help="steady-state iterations at least (default 15)")
    ap.add_argument("--max-iters", type=int, help="steady-state iterations at most (default 1000)")
    ap.add_argument("--timeout", type=float, help="seconds per workload process (default 900)")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the workers' whole output")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.budget is None:
        args.budget = 0.3 if args.quick else 4.0
    if args.min_iters is None:
        args.min_iters = 2 if args.quick else 15
    if args.max_iters is None:
        args.max_iters = 20 if args.quick else 1000
    if args.timeout is None:
        args.timeout = 120.0 if args.quick else 900.0

    if args.worker:
        try:
            result = run_worker(args.worker, args)
        except Exception as e:  # noqa: BLE001 - the driver reports it as a table row
            traceback.print_exc()
            result = {"workload": args.worker, "error": _first_line(e), "backends": {}}
        with open(args.result, "w") as f:
            json.dump(result, f)
        sys.stdout.flush()
        os._exit(0)  # skip interpreter teardown (Inductor's worker pools, JIT engines)

    if args.list:
        for n, w in WORKLOADS.items():
            print(n + ("  (memory-bound)" if w.memory_bound else ""))
        return 0
    names = select(args.only)
    regimes = [r.strip() for r in args.regimes.split(",") if r.strip()]
    unknown = [r for r in regimes if r not in REGIMES]
    if unknown or not regimes:
        ap.error(f"unknown regime(s) {unknown}; known: {', '.join(REGIMES)}")
    backends = [b for b in BACKENDS if not (b == "inductor" and args.no_inductor)
                and not (b == "fusegrad-dynamic" and not args.dynamic)]

    results: dict[str, list[dict]] = {r: [] for r in regimes}
    t_start = time.perf_counter()
    # Workloads outer, regimes inner: slow drift of the machine hits both regimes alike.
    for name in names:
        for regime in regimes:
            print(f"[{regime}] {name}", flush=True)
            r = run_subprocess(name, regime, args)
            if "error" in r:
                print(f"    error: {r['error']}", flush=True)
            print(f"    ({r['wall_s']:.1f} s)", flush=True)
            results[regime].append(r)
    report = markdown(results, args, backends, _meta(args, results))
    print()
    print(report)
    print(f"suite took {time.perf_counter() - t_start:.0f} s")
    if args.output:
        with open(args.output, "w") as f:
            f.write(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

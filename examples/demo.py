"""The `bash scripts/dev.sh demo` job: what fusegrad is for, in about two minutes of CPU.

First a look at the compiler: `fusegrad-opt` differentiates and fuses the dg function in
examples/softmax.mlir, the dg -> dg stages every graph `fusegrad.compile` captures goes
through. Then the point of it: AdamW steps of a small, randomly initialised HuggingFace
GPT-2 (the loss computed inside the model), trained by eager PyTorch, by `torch.compile`
(Inductor, default mode) and by `fusegrad.compile`.

Each backend trains in a process of its own (this file run with `--backend NAME`), so
that its peak RSS is its own and no backend inherits another's compiled code or
allocator state. Each process builds the same initial model from the same seed and
trains on the same batches, so the losses must agree. The parent steps the processes in
turn, one training step each, so that a busy machine slows every backend alike. It
prints one table and exits non-zero when fusegrad failed, fell back to eager PyTorch or
left eager's losses by more than a tolerance; Inductor failing (no C++ compiler, say)
is reported, not fatal.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

EXAMPLE = Path(__file__).with_name("softmax.mlir")
OPT = Path(sys.executable).with_name("fusegrad-opt")
PIPELINE = "dg-autodiff,dg-optimize"

# Every choice the numbers depend on, in one place; the header prints them.
SEED = 0  # torch.manual_seed before building the model; also seeds the batches' generator
# One thread: on a machine where other processes run, OpenMP teams whose threads wait on
# a descheduled thread multiply step times unevenly across backends (the repository's
# benchmarks measure at one thread as well).
THREADS = 1
GPT2 = dict(n_layer=2, n_embd=256, n_head=4, n_inner=1024, vocab_size=2048, n_positions=128,
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
BATCH, SEQ = 8, 128
LR = 1e-3
WARMUP, TIMED = 2, 8  # steps after the first: not timed, then timed (their median)
STEPS = 1 + WARMUP + TIMED
REL_TOL = 1e-4  # largest relative loss difference from eager that fusegrad may show
BACKENDS = ("eager", "inductor", "fusegrad")
# Cold compiles, so that the first step shows the whole compile on every run: neither
# fusegrad's nor Inductor's on-disk cache is read or written.
COLD_ENV = {"FUSEGRAD_CACHE": "0", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
# Seconds to wait for a backend's process (starting, first step, any later step): a
# compile that hangs must not hang the demo.
START_TIMEOUT_S, FIRST_STEP_TIMEOUT_S, STEP_TIMEOUT_S = 120, 150, 60


@dataclass
class Run:
    """One backend's training, as its process reported it."""

    times: list[float]  # seconds per step; the first includes compiling
    losses: list[float]
    rss_start_mib: float  # peak RSS once the model is built, before the first step
    rss_peak_mib: float
    graphs: int  # graphs Dynamo captured and handed to the backend
    graph_breaks: int
    fallbacks: list[str]  # fusegrad's warnings that something ran in eager PyTorch

    @property
    def step_ms(self) -> float:
        """The steady step: the median, so that a stall of a busy machine does not count."""
        return statistics.median(self.times[1 + WARMUP:]) * 1e3


def peak_rss_mib() -> float:
    """This process's peak resident set size: a high-water mark the kernel keeps, so it
    sees short peaks (compiling, the backward pass) that sampling would miss."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10  # bytes vs KiB


def build_model() -> Any:
    """A small GPT-2 with random weights (nothing downloaded), dropout off so that
    training is deterministic and the backends' losses comparable."""
    import torch
    import transformers

    torch.manual_seed(SEED)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**GPT2))
    # the loss transformers falls back to for GPT-2, named: left unset, every forward
    # logs a warning, a call Dynamo cannot trace, which splits the graph in two
    model.loss_type = "ForCausalLM"
    return model.train()


def make_batches() -> Any:
    """One batch of token ids per step, from a generator of its own so that every backend
    trains on the same tokens."""
    import torch

    generator = torch.Generator().manual_seed(SEED)
    return torch.randint(0, GPT2["vocab_size"], (STEPS, BATCH, SEQ), generator=generator)


def wrapper(backend: str) -> Callable[[Any], Any]:
    """The one line a user changes to switch backends."""
    import torch

    if backend == "inductor":
        return torch.compile
    if backend == "fusegrad":
        import fusegrad
        return fusegrad.compile
    return lambda model: model


def serve(backend: str) -> None:
    """A backend's process: build the model, say so with its RSS, then run one training
    step (zero_grad, forward, backward, AdamW step, reading the loss) per line the parent
    sends, answering each with a JSON line: the step's time and loss and what the
    process has seen so far. Ends when the batches run out or the parent goes away."""
    import torch
    from torch._dynamo.utils import counters

    from fusegrad import FusegradFallbackWarning

    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not reach the parent
    torch.set_num_threads(THREADS)
    model, batches = build_model(), make_batches()
    run_model = wrapper(backend)(model)
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    channel.write(json.dumps({"rss_start_mib": peak_rss_mib()}) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FusegradFallbackWarning)
        for ids in batches:
            if not sys.stdin.readline():
                return
            start = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss = run_model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            value = loss.item()
            seconds = time.perf_counter() - start
            fallbacks = [str(w.message) for w in caught
                         if issubclass(w.category, FusegradFallbackWarning)]
            channel.write(json.dumps({
                "seconds": seconds, "loss": value, "rss_peak_mib": peak_rss_mib(),
                "graphs": counters["stats"]["unique_graphs"],
                "graph_breaks": sum(counters["graph_break"].values()),
                "fallbacks": fallbacks}) + "\n")


class Worker:
    """The parent's handle on one backend's process: steps it and collects its replies,
    or records why it failed (it then takes no further steps)."""

    def __init__(self, backend: str) -> None:
        self.stderr = tempfile.TemporaryFile("w+")  # a file: a full pipe would stall it
        self.proc = subprocess.Popen([sys.executable, __file__, "--backend", backend],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True,
                                     env={**os.environ, **COLD_ENV})
        self.error: str | None = None
        self.start: dict[str, Any] = {}
        self.replies: list[dict[str, Any]] = []

    def wait_ready(self) -> None:
        """Wait until the model is built, so that no process's imports overlap a step."""
        self.start = self.reply(START_TIMEOUT_S) or {}

    def step(self, timeout: float) -> None:
        """One training step in the process, waited for."""
        if self.error:
            return
        try:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            self.fail(None)
            return
        reply = self.reply(timeout)
        if reply:
            self.replies.append(reply)

    def reply(self, timeout: float) -> dict[str, Any] | None:
        """The process's next JSON line, or None when it died or took too long."""
        if self.error:
            return None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        self.fail(None if ready else f"no answer within {timeout:.0f} s")
        return None

    def fail(self, reason: str | None) -> None:
        """End the process and keep why it failed: `reason`, or its own last error."""
        self.proc.kill()
        self.proc.wait()
        self.stderr.seek(0)
        self.error = (reason or error_line(self.stderr.read())
                      or f"exit status {self.proc.returncode}")

    def result(self) -> Run | str:
        """The finished run, or why there is none."""
        if not self.error:
            self.proc.stdin.close()
            self.proc.wait()
        if self.error:
            return self.error
        last = self.replies[-1]
        return Run(times=[r["seconds"] for r in self.replies],
                   losses=[r["loss"] for r in self.replies],
                   rss_start_mib=self.start["rss_start_mib"],
                   **{k: last[k] for k in ("rss_peak_mib", "graphs", "graph_breaks",
                                           "fallbacks")})


def error_line(stderr: str) -> str | None:
    """The exception a failed process died of (the last `SomethingError: ...` line; what
    torch prints after it is advice), shortened to fit a table cell."""
    errors = re.findall(r"^[\w.]*(?:Error|Exception)\b.*$", stderr, re.MULTILINE)
    lines = errors or stderr.strip().splitlines()
    return lines[-1][:160] if lines else None


def train_all() -> dict[str, Run | str]:
    """Start a process per backend, time each one's first step alone (it compiles), then
    step them in turn, one step each."""
    print("  starting a process per backend ...", flush=True)
    workers = {backend: Worker(backend) for backend in BACKENDS}
    for worker in workers.values():
        worker.wait_ready()
    for backend, worker in workers.items():
        worker.step(FIRST_STEP_TIMEOUT_S)
        outcome = worker.error or f"{worker.replies[0]['seconds']:.1f} s"
        print(f"  first step with {backend}: {outcome}", flush=True)
    print(f"  {STEPS - 1} more steps, the backends taking turns ...", flush=True)
    for _ in range(STEPS - 1):
        for worker in workers.values():
            worker.step(STEP_TIMEOUT_S)
    return {backend: worker.result() for backend, worker in workers.items()}


def show_compiler() -> None:
    """The MLIR side, as a user would run it: fusegrad-opt differentiates the softmax
    (forward, forward saving for backward, backward) and fuses each into regions."""
    print(f"$ fusegrad-opt examples/{EXAMPLE.name} -p '{PIPELINE}'")
    out = subprocess.run([str(OPT), str(EXAMPLE), "-p", PIPELINE], check=True,
                         capture_output=True, text=True).stdout
    funcs = re.split(r"\n(?=  func\.func )", out.split("\n", 1)[1])
    print(funcs[0].rstrip())
    for func in funcs[1:]:
        name = re.search(r"@(\w+)", func).group(1)
        ops, regions = len(re.findall(r'"dg\.', func)), func.count("{dg.fusion}")
        saved = re.search(r"dg\.saved_bytes = (\d+).*dg\.saved_bytes_before = (\d+)", func)
        note = (f", saves {saved[1]} B for the backward ({saved[2]} B before dg-remat)"
                if saved else "")
        print(f"  ... @{name}: {ops} dg ops in {regions} fused region(s){note}")


def header() -> str:
    """The settings every number below depends on (versions read without importing
    torch or transformers: only the backends' processes need them)."""
    version = importlib.metadata.version
    config = ", ".join(f"{k}={v}" for k, v in GPT2.items() if not k.endswith("pdrop"))
    return "\n".join([
        f"GPT-2 training on the CPU: transformers {version('transformers')} GPT2LMHeadModel, "
        "random weights, dropout 0,",
        f"  {config}",
        f"{BATCH}x{SEQ} tokens per step (labels=input_ids), AdamW lr={LR}, torch "
        f"{version('torch')},",
        f"  torch.manual_seed({SEED}), torch.set_num_threads({THREADS})",
        f"{STEPS} steps per backend: the first (it compiles; on-disk caches off), {WARMUP} "
        f"warm-up, {TIMED} timed (median);",
        "  the backends take turns, each in a process of its own",
        "peak RSS: the process's ru_maxrss (child processes such as C++ compilers not "
        "counted);",
        "  RSS growth: that peak minus the one before the first step (Python, torch, "
        "transformers, the model)"])


def table(runs: dict[str, Run | str], eager: Run) -> list[str]:
    """A markdown table of the runs; a failed backend's row says why."""
    inductor = runs.get("inductor")
    rows = ["| backend | first step (s) | step (ms) | vs eager | vs inductor | "
            "peak RSS (MiB) | RSS growth (MiB) | loss max rel diff vs eager |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for backend, run in runs.items():
        if isinstance(run, str):
            rows.append(f"| {backend} | failed: {run} | | | | | | |")
            continue
        vs_inductor = (f"{inductor.step_ms / run.step_ms:.2f}x"
                       if isinstance(inductor, Run) else "n/a")
        diff = ("(reference)" if run is eager
                else f"{max_rel_diff(run.losses, eager.losses):.1e}")
        rows.append(f"| {backend} | {run.times[0]:.1f} | {run.step_ms:.0f} | "
                    f"{eager.step_ms / run.step_ms:.2f}x | {vs_inductor} | "
                    f"{run.rss_peak_mib:.0f} | {run.rss_peak_mib - run.rss_start_mib:.0f} | "
                    f"{diff} |")
    return rows


def max_rel_diff(losses: list[float], reference: list[float]) -> float:
    """The largest relative difference between two runs' losses, step by step."""
    return max(abs(a - b) / abs(b) for a, b in zip(losses, reference))


def check_fusegrad(fused: Run | str, eager: Run) -> str | None:
    """Why the fusegrad run does not show what it should, or None: it must have trained,
    compiled at least one graph with nothing in eager PyTorch, and matched eager."""
    if isinstance(fused, str):
        return f"fusegrad training failed: {fused}"
    if fused.graphs == 0 or fused.fallbacks:
        return f"fusegrad fell back to eager PyTorch: {fused.fallbacks or 'no graph compiled'}"
    diff = max_rel_diff(fused.losses, eager.losses)
    if diff > REL_TOL:
        return f"fusegrad's losses differ from eager's by {diff:.1e} (relative) > {REL_TOL:.0e}"
    return None


def demo() -> int:
    """The parent: compiler look, one process per backend, table, verdict."""
    show_compiler()
    print()
    print(header())
    runs = train_all()
    eager, fused = runs["eager"], runs["fusegrad"]
    if isinstance(eager, str):
        print(f"demo failed: eager training failed: {eager}", file=sys.stderr)
        return 1
    print()
    print("\n".join(table(runs, eager)))
    print()
    print("losses (eager):    " + " ".join(f"{x:.4f}" for x in eager.losses))
    if isinstance(fused, Run):
        print("losses (fusegrad): " + " ".join(f"{x:.4f}" for x in fused.losses))
        print(f"fusegrad: {fused.graphs} graph(s) compiled, {fused.graph_breaks} graph "
              f"break(s), {len(fused.fallbacks)} fallback(s) to eager PyTorch")
    problem = check_fusegrad(fused, eager)
    if problem:
        print(f"demo failed: {problem}", file=sys.stderr)
        return 1
    print(f"ok: fusegrad trained GPT-2 with eager's losses (within {REL_TOL:.0e} relative)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=BACKENDS,
                        help="be that backend's training process, stepped through stdin "
                             "(what the demo starts for each backend)")
    args = parser.parse_args()
    if args.backend is None:
        return demo()
    serve(args.backend)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

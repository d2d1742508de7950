"""Dynamic shapes: wall time including the compiles when the shapes change between calls.

    .venv/bin/python benchmarks/dynamic_shapes.py [--only train,generate]
        [--backends eager,dynamo,inductor,fusegrad] [--threads 1] [--steps 16] [--dynamic]
        [--json FILE]

The model is a small randomly initialised HuggingFace GPT-2 (2 layers, width 128, 4
heads, vocabulary 512, 256 positions; dropout off so that every backend computes the
same losses), built after `torch.manual_seed(0)`, so every backend gets the same weights.
Each workload runs once per backend, each in a fresh process of this script (`--child`)
with fresh caches: `FUSEGRAD_CACHE=0`, and for Inductor an empty `TORCHINDUCTOR_CACHE_DIR`
with its FX graph and AOTAutograd caches off. Dynamo's limits are left at their defaults.

- train: AdamW (lr 1e-3), `--steps` steps (16) of batch 4 at sequence lengths cycling
  through 24, 40, ..., 120, 128; `model(input_ids=ids, labels=ids).loss`, backward, step,
  zero_grad. The total runs from just before `torch.compile(model)` (eager: the first
  call) to the end of the last step; the per-step times and the losses are kept too.
- generate: greedy `model.generate` of 32 new tokens (KV cache on) from an 8-token
  prompt, twice, with `model.forward = torch.compile(model.forward, ...)` (what HF
  users do); the total runs from just before that compile to the end of the second
  generate.

The totals include Dynamo's and the backend's first use in the process (loading their
modules), which a user pays too. The parent checks each backend against eager: the
largest difference of a step's loss (a row fails above 1e-3) and the generated tokens
(must be identical). "compiles" counts Dynamo's graphs (`counters["stats"]["unique_graphs"]`)
and, for fusegrad, the programs it compiled (one per graph and shape: its `compile_graph`
log records); "fallbacks" counts fusegrad's warnings (a graph or op run eagerly).

The `dynamo` backend is Dynamo with a backend that runs each graph as traced
(`gm.forward`): what every backend's total holds of Dynamo's traces (and recompiles on
new shapes) before it compiles anything itself. `--dynamic` passes `dynamic=True` to
every `torch.compile`: the sizes are symbolic from the first call, so Dynamo traces and
each backend compiles once per graph (what a user who knows the shapes vary can ask for).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

MARKER = "@@dynamic_shapes result@@ "
WORKLOADS = ("train", "generate")
BACKENDS = ("eager", "dynamo", "inductor", "fusegrad")
LENGTHS = (24, 40, 56, 72, 88, 104, 120, 128)
BATCH, VOCAB, PROMPT, NEW_TOKENS = 4, 512, 8, 32
LOSS_TOLERANCE = 1e-3


class FusegradLog(logging.Handler):
    """Counts fusegrad's compiled programs (`compile_graph`'s "compiled in" record, at
    INFO or DEBUG by its duration), new-shape compiles of dynamic graphs, and warnings."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.programs = self.new_shapes = self.warnings = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.programs += record.msg == "%s: compiled in %.1f s (%s)"
        self.new_shapes += str(record.msg).startswith("compiling a graph for the inputs")
        self.warnings += record.levelno >= logging.WARNING


def _train(model: Any, wrap: Callable[[Any], Any], steps: int) -> dict[str, Any]:
    import torch
    batches = [torch.randint(0, VOCAB, (BATCH, LENGTHS[s % len(LENGTHS)]),
                             generator=torch.Generator().manual_seed(s)) for s in range(steps)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times, losses = [], []
    start = time.perf_counter()
    step_fn = wrap(model)
    for ids in batches:
        t = time.perf_counter()
        loss = step_fn(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        times.append(time.perf_counter() - t)
        losses.append(loss.item())
    return {"total_s": time.perf_counter() - start, "step_s": times, "losses": losses,
            "lengths": [ids.shape[1] for ids in batches]}


def _generate(model: Any, wrap: Callable[[Any], Any]) -> dict[str, Any]:
    import torch
    model.eval()
    prompt = torch.randint(0, VOCAB, (1, PROMPT), generator=torch.Generator().manual_seed(0))
    times, tokens = [], []
    start = time.perf_counter()
    model.forward = wrap(model.forward)
    for _ in range(2):
        t = time.perf_counter()
        out = model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
        times.append(time.perf_counter() - t)
        tokens.append(out[0].tolist())
    return {"total_s": time.perf_counter() - start, "generate_s": times, "tokens": tokens}


def child(workload: str, backend: str, steps: int, threads: int,
          dynamic: bool | None = None) -> dict[str, Any]:
    """One workload on one backend, in this (fresh) process; `dynamic`: torch.compile's."""
    import torch
    import transformers as tf
    from torch._dynamo.utils import counters

    torch.set_num_threads(threads)
    log = FusegradLog()
    wrap: Callable[[Any], Any] = lambda f: f
    if backend == "dynamo":  # Dynamo's traces alone: a backend running the graph as traced
        wrap = lambda f: torch.compile(f, backend=lambda gm, example_inputs: gm.forward,
                                       dynamic=dynamic)
    elif backend == "inductor":
        wrap = lambda f: torch.compile(f, dynamic=dynamic)
    elif backend == "fusegrad":
        import fusegrad  # noqa: F401  (registers the backend)
        logging.getLogger("fusegrad").addHandler(log)
        # "compiled in" is a DEBUG record below 2 s: let this module's records through
        logging.getLogger("fusegrad.frontend.backend").setLevel(logging.DEBUG)
        wrap = lambda f: torch.compile(f, backend="fusegrad", dynamic=dynamic)
    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(
        n_layer=2, n_embd=128, n_head=4, vocab_size=VOCAB, n_positions=256,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    result = _train(model, wrap, steps) if workload == "train" else _generate(model, wrap)
    result["dynamo_graphs"] = counters["stats"]["unique_graphs"]
    result["graph_breaks"] = sum(counters["graph_break"].values())
    if backend == "fusegrad":
        result.update(fusegrad_programs=log.programs, fusegrad_new_shapes=log.new_shapes,
                      fusegrad_fallbacks=log.warnings)
    return result


def run_fresh(script: str, args: list[str], backend: str, marker: str) -> dict[str, Any]:
    """Runs `script args` in a fresh process with fresh caches (`FUSEGRAD_CACHE=0`; for
    Inductor an empty `TORCHINDUCTOR_CACHE_DIR`, FX graph and AOTAutograd caches off), so
    every backend compiles cold; the JSON its stdout prints after `marker`, or
    {"error": ...}."""
    env = dict(os.environ, FUSEGRAD_CACHE="0")
    cache_dir = tempfile.mkdtemp(prefix="fresh_inductor_") if backend == "inductor" else None
    if cache_dir:
        env.update(TORCHINDUCTOR_CACHE_DIR=cache_dir, TORCHINDUCTOR_FX_GRAPH_CACHE="0",
                   TORCHINDUCTOR_AUTOGRAD_CACHE="0")
    try:
        proc = subprocess.run([sys.executable, script, *args], env=env, capture_output=True,
                              text=True)
    finally:
        if cache_dir:
            shutil.rmtree(cache_dir, ignore_errors=True)
    results = [line[len(marker):] for line in proc.stdout.splitlines() if line.startswith(marker)]
    if proc.returncode != 0 or len(results) != 1:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        return {"error": f"exit code {proc.returncode}: " + "\n".join(tail)}
    return json.loads(results[0])


def spawn(workload: str, backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """Runs `child` in a fresh process; its result, or {"error": ...}."""
    return run_fresh(os.path.abspath(__file__), [
        "--child", f"{workload}:{backend}", "--steps", str(args.steps),
        "--threads", str(args.threads), *(["--dynamic"] if args.dynamic else [])],
        backend, MARKER)


def check(result: dict[str, Any], eager: dict[str, Any] | None) -> tuple[str, bool]:
    """The correctness cell against eager's result, and whether the row passes; records
    the comparison in `result` (for --json)."""
    if "error" in result:
        return "error", False
    if eager is None or "error" in eager:
        return "no eager reference", True
    if "losses" in result:
        diff = max(abs(a - b) for a, b in zip(result["losses"], eager["losses"]))
        result["max_loss_diff"] = diff
        ok = diff <= LOSS_TOLERANCE
        return f"{diff:.2e}" + ("" if ok else f" FAIL (> {LOSS_TOLERANCE:g})"), ok
    ok = result["tokens"] == eager["tokens"]
    result["tokens_equal"] = ok
    return ("tokens equal" if ok else "tokens DIFFER"), ok


def compiles(backend: str, result: dict[str, Any]) -> str:
    if backend == "eager" or "error" in result:
        return "-"
    cell = f"{result['dynamo_graphs']} Dynamo graphs"
    if backend == "fusegrad":
        cell += (f", {result['fusegrad_programs']} fusegrad programs"
                 f" ({result['fusegrad_fallbacks']} fallbacks)")
    return cell


def markdown(results: dict[str, dict[str, dict[str, Any]]]) -> tuple[str, bool]:
    lines = ["| workload | backend | total s | compiles | max loss diff / tokens equal "
             "| / Inductor total |", "|---|---|---|---|---|---|"]
    passed = True
    for workload, by_backend in results.items():
        inductor = by_backend.get("inductor", {}).get("total_s")
        for backend, result in by_backend.items():
            cell, ok = check(result, by_backend.get("eager"))
            passed &= ok
            total = result.get("total_s")
            ratio = f"{total / inductor:.2f}x" if backend in ("dynamo", "fusegrad") and total \
                and inductor else "-"
            lines.append(f"| {workload} | {backend} | "
                         f"{'-' if total is None else f'{total:.2f}'} | "
                         f"{compiles(backend, result)} | {cell} | {ratio} |")
    return "\n".join(lines), passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(WORKLOADS), help="train,generate")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="eager,dynamo,inductor,fusegrad")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--steps", type=int, default=16, help="training steps (default 16)")
    parser.add_argument("--dynamic", action="store_true",
                        help="torch.compile(..., dynamic=True): sizes symbolic from the first call")
    parser.add_argument("--json", help="also write the raw results to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        workload, backend = args.child.split(":")
        print(MARKER + json.dumps(child(workload, backend, args.steps, args.threads,
                                        True if args.dynamic else None)),
              flush=True)
        return 0
    workloads, backends = args.only.split(","), args.backends.split(",")
    unknown = sorted(set(workloads) - set(WORKLOADS)) + sorted(set(backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown workload(s)/backend(s) {unknown}; "
                     f"known: {WORKLOADS}, {BACKENDS}")
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for workload in workloads:
        for backend in backends:
            result = results.setdefault(workload, {})[backend] = spawn(workload, backend, args)
            print(f"{workload} {backend}: " + (f"{result['total_s']:.2f} s" if "error" not in
                                               result else result["error"]), flush=True)
    table, passed = markdown(results)
    print(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "steps": args.steps, "results": results}, f,
                      indent=1)
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""First training step of a small HF GPT-2 with an empty and with a warm compile cache.

    .venv/bin/python benchmarks/compile_cache.py [--threads 1]

Runs one training step (call + backward) and a second one in three fresh processes:
Dynamo alone (a backend returning the graph's own `forward`: Dynamo's share of a
first step, the step's eager work included), then `fusegrad.compile(model)` twice
sharing a new cache directory: the first compiles (and fills the cache), the second
loads what the first wrote. Per fusegrad process it reports the first step and its
parts: the graph cache's key and lookup (`frontend.graph_cache`), fusegrad's capture
to core ATen, import to dg (or, on a graph cache hit, parsing the stored dg module),
compile (or cache load), the steady-state step (the second step), and Dynamo (the
rest of the first step: bytecode tracing, guards, the autograd graph). The last
column is the first step less Dynamo alone's. Prints a markdown table.
"""
from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any, Callable


def _timed(totals: dict[str, float], name: str, fn: Callable) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[name] += time.perf_counter() - t0
    return wrapper


def worker(threads: int, dynamo_only: bool) -> dict[str, Any]:
    """One cold process: the first and second training steps, timed by part."""
    import torch
    import transformers as tf

    import fusegrad
    from fusegrad.frontend import backend, graph_cache
    from fusegrad import compile_cache
    from fusegrad.program import Program

    torch.set_num_threads(threads)
    warnings.simplefilter("error", fusegrad.FusegradFallbackWarning)  # eager would not count
    totals: dict[str, float] = collections.defaultdict(float)
    backend.capture = _timed(totals, "capture", backend.capture)
    for name in ("graph_key", "load"):
        setattr(graph_cache, name, _timed(totals, "lookup", getattr(graph_cache, name)))
    for name in ("from_graph", "from_text"):
        setattr(Program, name, classmethod(_timed(totals, "import",
                                                  getattr(Program, name).__func__)))
    Program.training = _timed(totals, "compile", Program.training)
    Program.forward = _timed(totals, "compile", Program.forward)

    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=2048,
                                             n_positions=256))
    ids = torch.randint(0, 2048, (8, 128))
    compiled = torch.compile(model, backend=lambda gm, _: gm.forward) if dynamo_only \
        else fusegrad.compile(model)
    steps = []
    for _ in range(2):
        t0 = time.perf_counter()
        compiled(ids, labels=ids).loss.backward()
        steps.append(time.perf_counter() - t0)
        if not totals and not dynamo_only:
            raise SystemExit("fusegrad compiled nothing")
        if len(steps) == 1:
            parts = {name: totals.get(name, 0.0) for name in PARTS}
    return {"first_s": steps[0], "step_s": steps[1], **parts, "stats": compile_cache.stats()}


PARTS = ("lookup", "capture", "import", "compile")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dynamo-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.threads, args.dynamo_only)))
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="fusegrad-cache-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "FUSEGRAD_CACHE"}
        env["FUSEGRAD_CACHE_DIR"] = cache
        for label in ("Dynamo alone", "empty cache", "warm cache"):
            cmd = [sys.executable, __file__, "--worker", "--threads", str(args.threads)]
            done = subprocess.run(cmd + (["--dynamo-only"] if label == "Dynamo alone" else []),
                                  env=env, capture_output=True, text=True)
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            r = json.loads(done.stdout.strip().splitlines()[-1])
            if label == "Dynamo alone":
                alone = r["first_s"]
                rows.append(f"| {label} | {alone:.2f} | - | - | - | - | - | {r['step_s']:.2f} "
                            "| - | - |")
                continue
            dynamo = r["first_s"] - sum(r[p] for p in PARTS) - r["step_s"]
            s = r["stats"]
            rows.append(f"| {label} | {r['first_s']:.2f} | {dynamo:.2f} | "
                        + " | ".join(f"{r[p]:.2f}" for p in PARTS)
                        + f" | {r['step_s']:.2f} | {s['graph_hits']}/{s['hits']}/{s['misses']} "
                        f"| {r['first_s'] - alone:+.2f} |")
    print(f"GPT2LMHeadModel(n_layer=2, n_embd=256, n_head=4, vocab_size=2048, n_positions=256), "
          f"8x128 tokens, {args.threads} thread(s)\n")
    print("| process | first step (s) | Dynamo (s) | graph cache lookup (s) | capture (s) | "
          "import or parse (s) | compile or load (s) | second step (s) | "
          "graph hits / code hits / misses | first step - Dynamo alone's (s) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

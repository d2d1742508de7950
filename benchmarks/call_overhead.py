"""Per-call cost of a compiled function on a tiny model, next to eager and Dynamo alone.

    .venv/bin/python benchmarks/call_overhead.py [--calls 5000]

One `nn.Linear(16, 16)` on a 16x16 input, one thread, called in a loop: eager,
`torch.compile(backend="eager")` (Dynamo's own frame and guard cost, no
compiler), fusegrad and Inductor, with and without autograd (a forward that
records the backward). Reports the best of five timed loops per row, in
microseconds per call, as a markdown table.
"""
from __future__ import annotations

import argparse
import time
from typing import Callable

import torch

import fusegrad


def per_call_us(fn: Callable, x: torch.Tensor, calls: int) -> float:
    for _ in range(200):
        fn(x)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn(x)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    layer = torch.nn.Linear(16, 16)
    x = torch.randn(16, 16)
    backends = {
        "eager": layer,
        "dynamo (eager backend)": torch.compile(layer, backend="eager"),
        "fusegrad": fusegrad.compile(layer),
        "inductor": torch.compile(layer),
    }
    print("| backend | no_grad (us/call) | with autograd (us/call) |")
    print("| --- | ---: | ---: |")
    for name, fn in backends.items():
        with torch.no_grad():
            inference = per_call_us(fn, x, args.calls)
        training = per_call_us(fn, x, args.calls)
        print(f"| {name} | {inference:.1f} | {training:.1f} |")


if __name__ == "__main__":
    main()

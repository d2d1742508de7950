"""Scans (cumsum, cumprod, cummax, logcumsumexp) under eager and fusegrad, forward and backward.

    .venv/bin/python benchmarks/scans.py [--threads 1] [--ops cumsum] [--calls 200]

Each op runs on [4, 32000] and [1024, 1024] float32 inputs along dim 1 (rows) and dim 0
(columns). Forward: the call under no_grad. Backward: `y.backward(g)` alone, after a
forward that records it (the input's gradient reset each time). Each number is the
median of `--calls` calls, and each row takes the middle of three rounds that alternate
the backends. Prints a markdown table in milliseconds.
"""
from __future__ import annotations

import argparse
import time
from typing import Callable

import torch

import fusegrad

OPS: dict[str, Callable] = {
    "cumsum": lambda t, d: torch.cumsum(t, d),
    "cumprod": lambda t, d: torch.cumprod(t, d),
    "cummax": lambda t, d: torch.cummax(t, d)[0],
    "logcumsumexp": lambda t, d: torch.logcumsumexp(t, d),
}
SHAPES = ((4, 32000), (1024, 1024))


def median_ms(run: Callable[[], float], calls: int) -> float:
    """Median of `calls` runs of `run`, which times itself (seconds)."""
    for _ in range(10):
        run()
    times = sorted(run() for _ in range(calls))
    return times[calls // 2] * 1e3


def forward(fn: Callable, x: torch.Tensor) -> Callable[[], float]:
    def run() -> float:
        with torch.no_grad():
            start = time.perf_counter()
            fn(x)
            return time.perf_counter() - start
    return run


def backward(fn: Callable, x: torch.Tensor, g: torch.Tensor) -> Callable[[], float]:
    leaf = x.clone().requires_grad_()

    def run() -> float:
        y = fn(leaf)
        leaf.grad = None
        start = time.perf_counter()
        y.backward(g)
        return time.perf_counter() - start
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}; medians in ms")
    print("| op | shape | dim | eager fwd | fusegrad fwd | eager bwd | fusegrad bwd |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for name in args.ops.split(","):
        op = OPS[name]
        for shape in SHAPES:
            for dim in (1, 0):
                x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
                g = torch.randn(shape, generator=torch.Generator().manual_seed(1))
                eager = lambda t, dim=dim: op(t, dim)  # noqa: E731
                torch._dynamo.reset()  # one code object for every case: stay under the limit
                compiled = fusegrad.compile(lambda t, dim=dim: op(t, dim), dynamic=False)
                runs = [forward(eager, x), forward(compiled, x), backward(eager, x, g),
                        backward(compiled, x, g)]
                rounds = [[median_ms(r, args.calls) for r in runs] for _ in range(3)]
                middle = [sorted(column)[1] for column in zip(*rounds)]
                print(f"| {name} | {list(shape)} | {dim} | " +
                      " | ".join(f"{v:.3f}" for v in middle) + " |")


if __name__ == "__main__":
    main()

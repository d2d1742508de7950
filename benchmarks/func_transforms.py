"""torch.func workloads compiled whole: eager vs fusegrad vs torch.compile (Inductor), CPU.

- per_sample_grads: `vmap(grad(loss))` over a batch (Opacus-style per-example
  gradients of an MLP),
- maml_step: the outer loss after one inner SGD step taken with `grad`, and its
  gradient (second order),
- hessian: `hessian` of a small MLP's scalar output with respect to its input.

Each backend's first call is timed (compile included), then the median of the
following calls (the backends take turns, one call each), and the largest
difference from eager's results.

    .venv/bin/python benchmarks/func_transforms.py [--calls 30] [--threads 1] [--no-inductor]
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch
from torch.func import functional_call, grad, hessian, vmap

import fusegrad


def _mlp(n_in: int, hidden: int, n_out: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(n_in, hidden), torch.nn.Tanh(),
                               torch.nn.Linear(hidden, n_out))


def per_sample_grads() -> tuple[Callable, tuple]:
    model = _mlp(128, 256, 10)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, x, t):
        out = functional_call(model, p, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, t.unsqueeze(0))

    def fn(p, x, t):
        return vmap(grad(loss), in_dims=(None, 0, 0))(p, x, t)
    return fn, (params, torch.randn(64, 128), torch.randint(0, 10, (64,)))


def maml_step() -> tuple[Callable, tuple]:
    model = _mlp(64, 128, 5)
    params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}

    def loss(p, x, t):
        return torch.nn.functional.cross_entropy(functional_call(model, p, (x,)), t)

    def fn(p, x, t):
        g = grad(loss)(p, x[0], t[0])
        outer = loss({k: p[k] - 0.1 * g[k] for k in p}, x[1], t[1])
        return torch.autograd.grad(outer, list(p.values()))
    return fn, (params, torch.randn(2, 32, 64), torch.randint(0, 5, (2, 32)))


def input_hessian() -> tuple[Callable, tuple]:
    model = _mlp(32, 64, 1)

    def fn(x):
        return hessian(lambda y: model(y).sum())(x)
    return fn, (torch.randn(32),)


WORKLOADS = {"per_sample_grads": per_sample_grads, "maml_step": maml_step,
             "hessian": input_hessian}


def _leaves(out) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def measure(name: str, calls: int, inductor: bool) -> list[str]:
    torch.manual_seed(0)
    fn, args = WORKLOADS[name]()
    backends = {"eager": fn, "fusegrad": fusegrad.compile(fn)}
    if inductor:
        backends["inductor"] = torch.compile(fn)
    first, times, results = {}, {b: [] for b in backends}, {}
    for backend, f in backends.items():
        start = time.perf_counter()
        results[backend] = f(*args)
        first[backend] = time.perf_counter() - start
    for _ in range(calls):
        for backend, f in backends.items():
            start = time.perf_counter()
            f(*args)
            times[backend].append(time.perf_counter() - start)
    eager_ms = statistics.median(times["eager"]) * 1e3
    rows = []
    for backend in backends:
        ms = statistics.median(times[backend]) * 1e3
        diff = max((a - b).abs().max().item() for a, b in
                   zip(_leaves(results[backend]), _leaves(results["eager"])))
        rows.append(f"| {name} | {backend} | {first[backend]:.2f} | {ms:.3f} | "
                    f"{eager_ms / ms:.2f}x | {diff:.1e} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-inductor", action="store_true")
    parser.add_argument("--only", nargs="*", choices=sorted(WORKLOADS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print("| workload | backend | first call (s) | median call (ms) | vs eager | max abs diff |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.only or WORKLOADS:
        for row in measure(name, args.calls, not args.no_inductor):
            print(row, flush=True)


if __name__ == "__main__":
    main()

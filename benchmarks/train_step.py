"""Training-step benchmark: eager vs fusegrad vs torch.compile (Inductor), CPU.

For each model: compile time (first step, including capture and codegen;
Inductor's on-disk caches are disabled and fusegrad's compile cache starts
empty, so both compile cold),
median step time over the following steps (forward + backward + SGD; the backends
take turns, one step each), and the
largest loss/parameter difference from eager after the same steps.

    .venv/bin/python benchmarks/train_step.py [--steps 30] [--threads 1] [--no-inductor]

Prints a markdown table; the numbers quoted in the README/notes come from it.
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
import warnings
from typing import Callable

import torch

import fusegrad


def mlp() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 10))
    return model, torch.randn(128, 256), torch.randn(128, 10)


def transformer() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    model = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128,
                                             dropout=0.0, batch_first=True)
    return model, torch.randn(8, 32, 64), torch.randn(8, 32, 64)


def cnn() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 32, 3, padding=1),
                                torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(32 * 8 * 8, 10))
    return model, torch.randn(16, 3, 16, 16), torch.randn(16, 10)


MODELS = {"mlp": mlp, "transformer-layer": transformer, "cnn": cnn}


class Trainer:
    """SGD steps of mse_loss(step(x), y) for one backend's copy of the model."""

    def __init__(self, model: torch.nn.Module, step: Callable, x, y) -> None:
        self.model, self.step, self.x, self.y = model, step, x, y
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01)
        self.times: list[float] = []
        self.losses: list[float] = []

    def __call__(self) -> None:
        t0 = time.perf_counter()
        self.opt.zero_grad()
        loss = torch.nn.functional.mse_loss(self.step(self.x), self.y)
        loss.backward()
        self.opt.step()
        self.times.append(time.perf_counter() - t0)
        self.losses.append(loss.item())


def backends(inductor: bool = True) -> dict[str, Callable]:
    out = {"eager": lambda m: m, "fusegrad": fusegrad.compile}
    if inductor:
        import torch._inductor.config as inductor_config
        inductor_config.force_disable_caches = True  # cold compiles, like fusegrad's
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
        out["inductor"] = lambda m: torch.compile(m, backend="inductor")
    return out


def compare(name: str, make: Callable, steps: int, wraps: dict[str, Callable]) -> list[str]:
    """Train copies of one model with each backend, one step of each in turn (so a slow
    stretch of the machine hits all backends alike); markdown rows of the results table."""
    torch.manual_seed(0)
    base, x, y = make()
    trainers = {}
    # once, not per backend: a reset would drop the code compiled for the backends before
    torch._dynamo.reset()
    for backend, wrap in wraps.items():
        model = copy.deepcopy(base)
        try:
            trainer = Trainer(model, wrap(model), x, y)
            trainer()  # the first step: capture and compile
            trainers[backend] = trainer
        except Exception as e:  # e.g. Inductor without a working C++ toolchain
            print(f"{name}/{backend}: unavailable ({type(e).__name__}: {e})".splitlines()[0])
    for _ in range(steps - 1):
        for trainer in trainers.values():
            trainer()
    eager = trainers["eager"]
    eager_med = statistics.median(eager.times[1:])
    rows = []
    for backend, t in trainers.items():
        med = statistics.median(t.times[1:])
        diff = max([abs(a - b) for a, b in zip(t.losses, eager.losses)] +
                   [(p - q).abs().max().item()
                    for p, q in zip(t.model.parameters(), eager.model.parameters())])
        rows.append(f"| {name} | {backend} | {t.times[0]:.2f} | {med * 1e3:.2f} | "
                    f"{eager_med / med:.2f}x | {diff:.1e} |")
    return rows


HEADER = ("| model | backend | first step (s) | median step (ms) | vs eager | "
          "max abs diff vs eager |\n| --- | --- | --- | --- | --- | --- |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.steps} SGD steps\n")
    print(HEADER)
    # an empty compile cache, so fusegrad compiles cold, as Inductor does
    with tempfile.TemporaryDirectory(prefix="fusegrad-cache-") as cache:
        os.environ["FUSEGRAD_CACHE_DIR"] = cache
        for name in args.models.split(","):
            for row in compare(name, MODELS[name], args.steps, backends(not args.no_inductor)):
                print(row, flush=True)


if __name__ == "__main__":
    main()

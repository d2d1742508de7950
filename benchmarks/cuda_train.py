"""Training steps of the suite's models on a GPU: fusegrad against eager and Inductor.

    .venv/bin/python benchmarks/cuda_train.py build DIR    # needs MLIR (no GPU)
    python benchmarks/cuda_train.py run DIR                 # needs a GPU
    python benchmarks/cuda_train.py profile DIR             # where a step's time goes

`build` writes, per model (the suite's `mlp:train`, `cnn:train`,
`transformer_layer:train`, `gpt2:train`, `bert:train`, `llama:train` at the suite's
sizes, the loss inside): `fusegrad/`, the model's training program from
`fusegrad.export(..., target=TARGET)`; `reference.pt`, the model's initial
state; and `inputs.pt`. `run` rebuilds each model from `suite.py` (so it needs
transformers, not MLIR), loads that state for eager and Inductor, loads the
artifact twice (as loaded by default, which replays functions of at most
`AUTO_GRAPH_MAX_BYTES` from CUDA graphs, and with `cuda_graphs=False`), compares the
first step's loss, then times SGD steps (loss, backward, update) interleaved in
rounds, synchronizing the device around each, and prints the medians as a
markdown table. `--target cpu` artifacts run on the CPU, which checks this
script without a GPU.

On a GPU machine without MLIR, build here and carry DIR: at the suite's sizes
the mlp folder holds 190 MB of weights, the others 4-26 MB.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import sys
import time
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("mlp", "cnn", "transformer_layer", "gpt2", "bert", "llama")
LR = 0.01


# ---------------------------------------------------------------- build (here)

def _loss_module(name: str, quick: bool) -> tuple[Any, tuple, str]:
    """(module computing the scalar loss, its inputs, a description), from suite.py."""
    import torch
    import suite  # benchmarks/ is the script's folder, first on sys.path

    if name in ("gpt2", "bert", "llama"):
        build, ids, shape = suite._hf(name, quick)
        return suite.language_model_loss(build()).train(), (ids,), shape
    spec = {"mlp": (suite._mlp, torch.nn.functional.mse_loss),
            "cnn": (suite._cnn, torch.nn.functional.cross_entropy),
            "transformer_layer": (suite._transformer, torch.nn.functional.mse_loss)}
    make, loss = spec[name]
    build, x, y, shape = make(quick)
    return suite._with_loss(build(), loss).train(), (x, y), shape


def build(directory: str, models: list[str], target: str, quick: bool) -> None:
    import torch

    import fusegrad
    for name in models:
        out = os.path.join(directory, name)
        os.makedirs(out, exist_ok=True)
        module, inputs, shape = _loss_module(name, quick)
        start = time.perf_counter()
        fusegrad.export(copy.deepcopy(module), *inputs, path=os.path.join(out, "fusegrad"),
                        target=target)
        exported = time.perf_counter() - start
        torch.save(module.state_dict(), os.path.join(out, "reference.pt"))
        torch.save(list(inputs), os.path.join(out, "inputs.pt"))
        with open(os.path.join(out, "info.json"), "w") as f:
            json.dump({"shape": shape, "target": target, "export_s": exported, "quick": quick}, f)
        print(f"{name}: {shape}, exported for {target} in {exported:.1f} s", flush=True)


# ---------------------------------------------------------------- run (on the device)

def _sgd_step(loss_fn: Callable[[], Any], params: list) -> Any:
    import torch
    for p in params:
        p.grad = None
    loss = loss_fn()
    loss.backward()
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(LR * p.grad)
    return loss.detach()


def _backends(out: str, device: Any, inductor: bool) -> dict[str, Callable[[], Any]]:
    """name -> one training step, each on its own copy of the same initial weights."""
    import torch

    from fusegrad.runtime import load
    inputs = [x.to(device) for x in torch.load(os.path.join(out, "inputs.pt"))]
    with open(os.path.join(out, "info.json")) as f:
        info = json.load(f)
    eager = _loss_module(os.path.basename(out), info["quick"])[0]
    eager.load_state_dict(torch.load(os.path.join(out, "reference.pt")))
    eager = eager.to(device)
    programs = {"fusegrad": load(os.path.join(out, "fusegrad"), device=device)}
    if device.type == "cuda":  # the default replays small functions from CUDA graphs
        programs["fusegrad (no graphs)"] = load(os.path.join(out, "fusegrad"),
                                                device=device, cuda_graphs=False)
    steps = {"eager": (eager, list(eager.parameters()))}
    if inductor:
        twin = copy.deepcopy(eager)
        steps["inductor"] = (torch.compile(twin), list(twin.parameters()))
    backends = {n: (lambda m=m, ps=ps: _sgd_step(lambda: m(*inputs), ps))
                for n, (m, ps) in steps.items()}
    for n, program in programs.items():
        trainable = [p for p in program.parameters if p.requires_grad]
        backends[n] = (lambda pr=program, ps=trainable: _sgd_step(lambda: pr(*inputs), ps))
    return backends


def _sync(device: Any) -> None:
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run(directory: str, models: list[str], rounds: int, inductor: bool) -> int:
    import torch
    rows = ["| model | backend | first step (s) | median step (ms) | vs eager | vs inductor "
            "| first loss |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    status = 0
    for name in models:
        out = os.path.join(directory, name)
        with open(os.path.join(out, "info.json")) as f:
            info = json.load(f)
        device = torch.device("cuda" if info["target"] == "cuda" else "cpu")
        backends = _backends(out, device, inductor)
        first, losses = {}, {}
        for n, step in backends.items():
            _sync(device)
            start = time.perf_counter()
            losses[n] = float(step())
            _sync(device)
            first[n] = time.perf_counter() - start
        if abs(losses["fusegrad"] - losses["eager"]) > 1e-3 * max(1.0, abs(losses["eager"])):
            print(f"{name}: first loss {losses['fusegrad']} differs from eager's "
                  f"{losses['eager']}", file=sys.stderr)
            status = 1
        times: dict[str, list[float]] = {n: [] for n in backends}
        names = list(backends)
        for _ in range(rounds):
            random.shuffle(names)
            for n in names:
                _sync(device)
                start = time.perf_counter()
                backends[n]()
                _sync(device)
                times[n].append(time.perf_counter() - start)
        median = {n: statistics.median(t) * 1e3 for n, t in times.items()}
        for n in backends:
            vs_ind = f"{median['inductor'] / median[n]:.2f}x" if "inductor" in median else "—"
            rows.append(f"| {name} ({info['shape']}) | {n} | {first[n]:.2f} | {median[n]:.3f} "
                        f"| {median['eager'] / median[n]:.2f}x | {vs_ind} | {losses[n]:.5f} |")
        print(f"{name}: " + ", ".join(f"{n} {median[n]:.3f} ms" for n in backends), flush=True)
    print("\n".join(rows))
    return status


def profile(directory: str, models: list[str]) -> None:
    """Where a step's time goes: host time to issue it, kernels per step, GPU busy time
    (torch.profiler's CUDA activity, which sees the runtime's driver-API launches too),
    and the kernels taking most of it."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile
    for name in models:
        device = torch.device("cuda")
        for backend, step in _backends(os.path.join(directory, name), device, False).items():
            for _ in range(3):
                step()
            _sync(device)
            start = time.perf_counter()
            for _ in range(10):
                step()
            issued = (time.perf_counter() - start) / 10
            _sync(device)
            wall = (time.perf_counter() - start) / 10
            with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    step()
                _sync(device)
            events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            kernels = [e for e in events if not e.name.startswith(("Memcpy", "Memset"))]
            busy = sum(e.device_time for e in events) / 5 / 1e3
            print(f"{name} / {backend}: {wall * 1e3:.3f} ms per step, issued in "
                  f"{issued * 1e3:.3f} ms, {len(kernels) / 5:.0f} kernels, GPU busy "
                  f"{busy:.3f} ms")
            by_name: dict[str, list] = {}
            for e in events:
                n = by_name.setdefault(e.name[:70], [0, 0.0])
                n[0] += 1
                n[1] += e.device_time
            for k, (count, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:8]:
                print(f"    {t / 5 / 1e3:8.3f} ms  {count / 5:5.1f}x  {k}")
        _slowest_launches(os.path.join(directory, name), device)


def _slowest_launches(out: str, device: Any, top: int = 12) -> None:
    """The plain program's slowest kernel launches in one training step, each named by
    its plan step (module, grid, block): fusegrad's kernels all carry their function's
    name, so the profiler alone cannot tell them apart; they run in plan order."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from fusegrad.runtime import load
    program = load(os.path.join(out, "fusegrad"), device=device, cuda_graphs=False)
    inputs = [x.to(device) for x in torch.load(os.path.join(out, "inputs.pt"))]
    trainable = [p for p in program.parameters if p.requires_grad]
    for _ in range(2):
        _sgd_step(lambda: program(*inputs), trainable)
    _sync(device)
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        _sgd_step(lambda: program(*inputs), trainable)
        _sync(device)
    plan = program.training.fwd.program.plan
    steps = [(f, n, s) for f in (program.training.fwd.name, program.training.bwd.name)
             for n, s in enumerate(plan.functions[f].steps) if s["op"] == "launch"]
    kernels = sorted((e for e in prof.events()
                      if e.device_type == torch.autograd.DeviceType.CUDA
                      and e.name in {s["kernel"] for _, _, s in steps}),
                     key=lambda e: e.time_range.start)
    if len(kernels) != len(steps):
        print(f"    ({len(kernels)} kernels profiled for {len(steps)} launch steps: "
              "not matched)")
        return
    timed = sorted(zip(kernels, steps), key=lambda ks: -ks[0].device_time)
    total = sum(e.device_time for e in kernels)
    print(f"    fusegrad's {len(kernels)} kernels: {total / 1e3:.3f} ms; the slowest:")
    for e, (f, n, s) in timed[:top]:
        print(f"    {e.device_time:8.1f} us  @{f} step {n}: {s['module']} grid={s['grid']} "
              f"block={s['block']} args={len(s['args'])}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["build", "run", "profile"])
    p.add_argument("dir")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--target", default="cuda", choices=["cuda", "cpu"],
                   help="build: what to export for (cpu: check this script without a GPU)")
    p.add_argument("--quick", action="store_true", help="build: the suite's tiny sizes")
    p.add_argument("--rounds", type=int, default=30, help="run: timed steps per backend")
    p.add_argument("--no-inductor", action="store_true", help="run: eager and fusegrad only")
    args = p.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(models) - set(MODELS))
    if unknown:
        p.error(f"unknown models {unknown}; choose from {', '.join(MODELS)}")
    if args.mode == "build":
        build(args.dir, models, args.target, args.quick)
        return 0
    if args.mode == "profile":
        profile(args.dir, models)
        return 0
    return run(args.dir, models, args.rounds, not args.no_inductor)


if __name__ == "__main__":
    sys.exit(main())

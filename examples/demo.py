"""The `bash scripts/dev.sh demo` job.

An end-to-end run of the `fusegrad-opt` command on the shipped
`softmax.mlir`, the same function evaluated by the reference interpreter,
then `fusegrad.compile()` on a small MLP: a few SGD steps compiled vs eager
(max differences) and step times of eager, fusegrad and torch.compile
(Inductor, when it works on this machine).
"""
from __future__ import annotations

import copy
import subprocess
import sys
import time
from pathlib import Path

import torch
from mlir import ir

from fusegrad.context import make_context
from fusegrad.dialects.interpreter import run_function

EXAMPLE = Path(__file__).with_name("softmax.mlir")
OPT = Path(sys.executable).with_name("fusegrad-opt")
PIPELINE = "dg-verify,func.func(canonicalize,cse)"


def show_cli() -> None:
    """Run the mlir-opt style tool on the example, as a user would."""
    cmd = [str(OPT), str(EXAMPLE), "-p", PIPELINE]
    print(f"$ fusegrad-opt {EXAMPLE.name} -p '{PIPELINE}'")
    subprocess.run(cmd, check=True)


def check_reference() -> None:
    """Evaluate the example with the reference interpreter and compare with torch."""
    with make_context():
        module = ir.Module.parse(EXAMPLE.read_text())
        func = next(op for op in module.body.operations if op.operation.name == "func.func")
        x = torch.randn(4, 8)
        (y,) = run_function(func, [x])
    err = (y - torch.softmax(x, dim=1)).abs().max().item()
    print(f"reference interpreter vs torch.softmax: max abs error {err:.2e}")
    if err > 1e-6:
        raise SystemExit("demo failed: softmax mismatch")


def train(model: torch.nn.Module, step_fn, x: torch.Tensor, y: torch.Tensor, steps: int):
    """`steps` SGD steps; returns (losses, seconds per step after the first)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses, times = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(step_fn(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return losses, sum(times[1:]) / (steps - 1)


def compile_demo(steps: int = 20) -> None:
    """Train an MLP eagerly and compiled, compare losses/parameters and step times."""
    import fusegrad

    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 16))
    x, y = torch.randn(32, 64), torch.randn(32, 16)
    runs = {}
    for name, wrap in [("eager", lambda m: m), ("fusegrad", fusegrad.compile),
                       ("inductor", lambda m: torch.compile(m, backend="inductor"))]:
        model = copy.deepcopy(base)
        try:
            runs[name] = (model, *train(model, wrap(model), x, y, steps))
        except Exception as e:  # Inductor needs a working C++ toolchain
            print(f"{name}: unavailable ({type(e).__name__}: {str(e).splitlines()[0][:100]})")
    eager_model, eager_losses, _ = runs["eager"]
    for name, (model, losses, step_s) in runs.items():
        dloss = max(abs(a - b) for a, b in zip(losses, eager_losses))
        dparam = max((p - q).abs().max().item()
                     for p, q in zip(model.parameters(), eager_model.parameters()))
        print(f"{name:>9}: {step_s * 1e3:7.2f} ms/step   max |loss - eager| {dloss:.1e}   "
              f"max |param - eager| {dparam:.1e}")
    if "fusegrad" not in runs:
        raise SystemExit("demo failed: fusegrad.compile did not run")


def main() -> None:
    show_cli()
    check_reference()
    compile_demo()


if __name__ == "__main__":
    main()

"""The `bash scripts/dev.sh demo` job.

An end-to-end run of the `fusegrad-opt` command on the shipped
`softmax.mlir`, the same function evaluated by the reference interpreter,
then `fusegrad.compile()` on a small MLP: a few SGD steps compiled vs eager
(max differences) and step times of eager, fusegrad and torch.compile
(Inductor, when it works on this machine).
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import torch
from mlir import ir

from fusegrad.context import make_context
from fusegrad.dialects.interpreter import run_function

EXAMPLE = Path(__file__).with_name("softmax.mlir")
BENCHMARK = Path(__file__).parents[1] / "benchmarks" / "train_step.py"
OPT = Path(sys.executable).with_name("fusegrad-opt")
PIPELINE = "dg-autodiff,dg-fuse"


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


def compile_demo(steps: int = 20) -> None:
    """Train an MLP eagerly, with fusegrad and with Inductor: the benchmark's table."""
    spec = importlib.util.spec_from_file_location("train_step", BENCHMARK)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    print(f"\n{steps} SGD steps of an MLP (benchmarks/train_step.py --models mlp):")
    print(bench.HEADER)
    rows = bench.compare("mlp", bench.mlp, steps, bench.backends())
    print("\n".join(rows))
    if not any("| fusegrad |" in r for r in rows):
        raise SystemExit("demo failed: fusegrad.compile did not run")


def main() -> None:
    show_cli()
    check_reference()
    compile_demo()


if __name__ == "__main__":
    main()

"""The `bash scripts/dev.sh demo` job.

For now: an end-to-end run of the `fusegrad-opt` command on the shipped
`softmax.mlir` (parse, dg-verify, a pipeline, print), then the same function
evaluated by the reference interpreter and checked against torch.softmax.
Replace `main()` by a `fusegrad.compile()` demo once compile() lands.
"""
from __future__ import annotations

import subprocess
import sys
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


def main() -> None:
    show_cli()
    check_reference()


if __name__ == "__main__":
    main()

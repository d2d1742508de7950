"""Calls of PyTorch's C shim from compiled CPU code check their error codes: a failing
call (a convolution, attention or 16-bit matmul kernel) raises LibraryCallError from the
runtime, naming the call and PyTorch's reason, instead of leaving its outputs unwritten
(or, with a result handle never made, crashing the process)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mlir import ir

from fusegrad.context import make_context
from fusegrad.pass_manager import run_pipeline
from fusegrad.runtime.cpu import (LIBRARY_CALLS, CompiledErrors, LibraryCallError,
                                  OutOfRangeIndex)

LIT_TEST = Path(__file__).parents[2] / "Target" / "CPU" / "library-call-errors.mlir"
LIBRARY_PASSES = ("dg-cpu-linalg,dg-cpu-bufferize,dg-conv-to-torch{layout=nchw},"
                  "dg-attention-to-torch,dg-matmul-to-blas")

# A convolution's input gradient whose outlined function's tag (what dg-conv-to-torch
# passes the library) says stride 2 where the shapes are those of stride 1: PyTorch's
# convolution_backward rejects the grad_output. Before its code was checked, the copy of
# the result that was never made crashed the process.
_REJECTED = """
func.func private @grad(%g: tensor<1x4x4x4xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
    attributes {dg.conv2d_backward = {dilation = array<i64: 1, 1>, groups = 1 : i64,
                input_shape = array<i64: 1, 4, 6, 6>, op = "conv2d_input_grad",
                padding = array<i64: 0, 0>, stride = array<i64: 2, 2>}} {
  %0 = "dg.conv2d_input_grad"(%g, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64,
      input_shape = array<i64: 1, 4, 6, 6>, padding = array<i64: 0, 0>,
      stride = array<i64: 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}
func.func @rejected(%g: tensor<1x4x4x4xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %0 = call @grad(%g, %w) : (tensor<1x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}
func.func @fine(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "dg.neg"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""

_SCRIPT = f"""
import torch
from mlir import ir
from fusegrad.context import make_context
from fusegrad.codegen.cpu.compile import compile_cpu
from fusegrad.runtime.cpu import LibraryCallError

with make_context():
    cm = compile_cpu(ir.Module.parse({_REJECTED!r}))
for attempt in range(2):
    try:
        cm.function("rejected")(torch.randn(1, 4, 4, 4), torch.randn(4, 4, 3, 3))
    except LibraryCallError as e:
        print("raised:", e)
x = torch.randn(3)
assert torch.equal(cm.function("fine")(x)[0], -x)  # the flag was cleared
print("fine")
"""


def test_a_rejected_convolution_raises_naming_the_call():
    """A real failure of PyTorch's kernel, called from compiled code, on each call; the
    module's other entries still run. (A subprocess: a crash fails the test, not the run.)"""
    run = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    raised = [line for line in run.stdout.splitlines() if line.startswith("raised:")]
    assert len(raised) == 2, run.stdout
    assert ("@rejected: PyTorch's convolution backward kernel failed in a compiled "
            "convolution's gradient (aoti_torch_cpu_convolution_backward returned 1)") in raised[0]
    assert "Expected a tensor of dimension 4" in raised[0]  # PyTorch's own reason
    assert run.stdout.rstrip().endswith("fine")


def test_every_shim_call_is_checked():
    """Every `aoti_torch_*` call's code reaches its checker, but those of the calls of
    mkldnn's in-place convolution (zeroing the output, adding the convolution into it),
    whose failure falls back to at::convolution."""
    with make_context():
        module = ir.Module.parse(LIT_TEST.read_text())
        run_pipeline(module, LIBRARY_PASSES)
        calls: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "llvm.call" and "callee" in op.attributes and \
                    ir.FlatSymbolRefAttr(op.attributes["callee"]).value.startswith("aoti_torch_"):
                calls.append(op)
            return ir.WalkResult.ADVANCE
        module.operation.walk(visit)
        checked = set()
        for call in calls:
            callee = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            users = [u.owner for u in call.results[0].uses]
            if callee in ("aoti_torch_zero_",
                          "aoti_torch_cpu_mkldnn__convolution_pointwise_binary_"):
                assert [u.name for u in users] == ["llvm.icmp"]
                continue
            assert [ir.FlatSymbolRefAttr(u.attributes["callee"]).value for u in users] == \
                [f"__fusegrad_check_{callee}"], callee
            checked.add(callee)
    assert checked == {name for name, _ in LIBRARY_CALLS}


class _Flag:
    """A take function that returns a given flag."""

    def __init__(self, flag: int) -> None:
        self.flag = flag

    def __call__(self) -> list[torch.Tensor]:
        return [torch.tensor(self.flag, dtype=torch.int32)]


def test_the_runtime_reads_the_flag():
    """Low 16 bits: the site; above: 0 for an index, else the failed call's number and its
    code."""
    sites = ["dg.gather at model.py:3:4", "a compiled convolution"]
    assert CompiledErrors(_Flag(0), sites).raise_if_set("f") is None
    with pytest.raises(OutOfRangeIndex, match="@f: index out of range in dg.gather at model"):
        CompiledErrors(_Flag(1), sites).raise_if_set("f")
    number = [name for name, _ in LIBRARY_CALLS].index("aoti_torch_cpu_convolution")
    with pytest.raises(LibraryCallError) as e:
        CompiledErrors(_Flag(2 | (number | 1 << 8) << 16), sites).raise_if_set("f")
    assert str(e.value).startswith("@f: PyTorch's convolution kernel failed in a compiled "
                                   "convolution (aoti_torch_cpu_convolution returned 1)")
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(LibraryCallError, match=r"library call #200 returned 127"):
        CompiledErrors(_Flag(2 | (200 | 127 << 8) << 16), sites).raise_if_set("f")

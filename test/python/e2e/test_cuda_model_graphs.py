"""Whole models' training graphs compiled for CUDA without a GPU: every fused graph of
the models of test_models.py and test_hf_models.py (BatchNorm, max-pool, both
transformer layouts; embeddings, checked gathers, scatter-add gradients, dropout,
attention) lowers to kernels that ptxas assembles for sm_80 and sm_90; graphs captured
for every size compile once and, run in the kernel emulator, match the reference
interpreter at two sizes. The kernels one at a time: cuda/test_cuda_compile.py and
cuda/test_cuda_run_time_sizes.py."""
from __future__ import annotations

import os

import pytest
import torch

from cuda_plans import check_images, compile_emulated, compile_plan, needs_ptxas


def _assemble_training_graphs(model, step, tmp_path) -> tuple[set, list]:
    """Compile `model` as fusegrad.compile would (run by the reference interpreter), run
    `step(compiled)` (forward and backward), and lower every fused training graph to
    cubins for sm_80 and sm_90. Returns the plan steps' ops and the index sites. A large
    graph's forward and backward fuse (and are dumped) apart, the backward only in the
    form its first use asks for (outputs without gradient dropped)."""
    import glob

    import fusegrad
    # fresh Dynamo state: a model class an earlier test ran at other shapes would come
    # back with dynamic sizes, whose programs the CUDA target does not compile yet
    torch._dynamo.reset()
    step(fusegrad.compile(model, executor="reference", dump_dir=str(tmp_path)))
    paths = sorted(glob.glob(str(tmp_path / "*.fused-wrt*.mlir")))
    assert paths
    ops, sites = set(), []
    for path in paths:
        with open(path) as f:
            plan = compile_plan(f.read(), "dg-verify", cubin=True)
        check_images(plan)
        ops |= {s["op"] for f in plan.functions.values() for s in f.steps}
        sites += plan.index_sites
    return ops, sites


@needs_ptxas
@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer", "transformer_norm_first"])
def test_model_test_graphs_assemble(tmp_path, name):
    """The models of test_models (BatchNorm, max-pool, both transformer layouts)."""
    from test_models import make

    model, _, x = make(name)
    ops, _ = _assemble_training_graphs(model, lambda c: c(x).square().sum().backward(),
                                       tmp_path)
    assert "launch" in ops and "matmul" in ops
    if name == "cnn":
        assert "conv2d" in ops


@needs_ptxas
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert", "mistral", "t5", "vit"])
def test_hf_model_training_graphs_assemble(tmp_path, name):
    """The HF models of test_hf_models (embeddings, checked gathers, scatter-add
    gradients, dropout, attention)."""
    pytest.importorskip("transformers")
    from test_hf_models import MODELS as HF_MODELS

    torch.manual_seed(0)
    model, batch = HF_MODELS[name]()
    model.train()  # dropout on: its random keys must run in kernels too
    ops, sites = _assemble_training_graphs(model, lambda c: c(**batch).loss.backward(),
                                           tmp_path)
    assert "launch" in ops and "matmul" in ops
    if name != "vit":
        assert "index_flag" in ops and sites


def _symbolic_training_graph(model, step, tmp_path) -> str:
    """The differentiated graph of `model` captured for every size (`dynamic=True`), as
    `step(compiled)` makes it, optimized for CUDA (the largest, where Dynamo splits the
    step: a language model's loss is a graph of its own)."""
    import glob

    from mlir import ir

    import fusegrad
    from fusegrad.context import make_context
    from fusegrad.pass_manager import run_pipeline
    from fusegrad.pipelines import optimize_pipeline
    torch._dynamo.reset()
    step(fusegrad.compile(model, executor="reference", dump_dir=str(tmp_path), dynamic=True))
    path = max((p for p in glob.glob(str(tmp_path / "*.autodiff-wrt*.mlir"))
                if "dg.size_hints" in open(p).read()), key=os.path.getsize)
    with make_context():
        module = ir.Module.parse(open(path).read())
        run_pipeline(module, optimize_pipeline("cuda"))
        return str(module)


def _inputs(sigs, sizes: dict, g: torch.Generator) -> list:
    from fusegrad.runtime import abi
    out = []
    for s in sigs:
        shape = [abi.eval_dim(d, sizes) for d in s.shape]
        dtype = abi.torch_dtype(s.dtype)
        out.append(torch.randn(shape, generator=g, dtype=dtype) if dtype.is_floating_point
                   else torch.randint(0, 2, shape, generator=g).to(dtype))
    return out


def _check_emulated_training(text: str, shapes: list[dict]) -> None:
    """@main_fwd, then @main_bwd on the forward's saved values (and random cotangents),
    compiled once, in the emulator against the reference interpreter at each of
    `shapes` (symbol values)."""
    from mlir import ir

    from fusegrad.context import make_context
    from fusegrad.dialects.interpreter import run_function
    from fusegrad.runtime.cuda import CudaProgram
    plan, drv = compile_emulated(text)
    prog = CudaProgram(plan, driver=drv, device="cpu", stream=lambda: 0, chip="sm_90")
    drv.know(prog._index_flag())
    with make_context():
        module = ir.Module.parse(text)
        functions = {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
                     for op in module.body.operations if op.operation.name == "func.func"}
        for sizes in shapes:
            g = torch.Generator().manual_seed(sum(sizes.values()))
            fwd, bwd = plan.functions["main_fwd"], plan.functions["main_bwd"]
            inputs = _inputs(fwd.inputs, sizes, g)
            saved = run_function(functions["main_fwd"], inputs)
            cts = _inputs(bwd.inputs, sizes, g)
            # the backward takes the forward's last results (what it saved), then cotangents
            k = next(k for k in range(len(bwd.inputs), 0, -1)
                     if [(t.shape, t.dtype) for t in saved[-k:]] ==
                     [(t.shape, t.dtype) for t in cts[:k]])
            for name, args in (("main_fwd", inputs), ("main_bwd", saved[-k:] + cts[k:])):
                with drv.tracking(*args):
                    got = prog.function(name)(*args, sizes=sizes)
                want = run_function(functions[name], args, sizes)
                for j, (a, b) in enumerate(zip(got, want)):
                    torch.testing.assert_close(a, b, rtol=2e-3, atol=2e-3, equal_nan=True,
                                               msg=lambda m: f"@{name} output {j} at {sizes}: {m}")


@pytest.mark.parametrize("name", ["mlp", "transformer"])
def test_model_graph_for_every_size_runs_in_the_emulator(tmp_path, name):
    from test_models import make

    model, _, x = make(name)
    text = _symbolic_training_graph(model, lambda c: c(x).square().sum().backward(), tmp_path)
    shapes = ([{"s0": 3}, {"s0": 70}] if name == "mlp" else
              [{"s0": 3, "s1": 9}, {"s0": 2, "s1": 5}])
    _check_emulated_training(text, shapes)


def test_gpt2_graph_for_every_size_runs_in_the_emulator(tmp_path):
    """HF GPT-2's training graph at symbolic batch and sequence sizes: slices and masks
    of run-time sizes, reshapes of two of them, embeddings and their scatter-add
    gradients, the loss."""
    pytest.importorskip("transformers")
    from test_hf_models import MODELS as HF_MODELS

    torch.manual_seed(0)
    model, batch = HF_MODELS["gpt2"]()
    text = _symbolic_training_graph(model, lambda c: c(**batch).loss.backward(), tmp_path)
    _check_emulated_training(text, [{"s0": 2, "s1": 12}, {"s0": 3, "s1": 7}])

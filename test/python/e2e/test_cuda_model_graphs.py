"""Whole models' training graphs compiled for CUDA without a GPU: every fused graph of
the models of test_models.py and test_hf_models.py (BatchNorm, max-pool, both
transformer layouts; embeddings, checked gathers, scatter-add gradients, dropout,
attention) lowers to kernels that ptxas assembles for sm_80 and sm_90. The kernels one
at a time: cuda/test_cuda_compile.py."""
from __future__ import annotations

import pytest
import torch

from cuda_plans import check_images, compile_plan, needs_ptxas


def _assemble_training_graphs(model, step, tmp_path) -> tuple[set, list]:
    """Compile `model` as fusegrad.compile would (run by the reference interpreter), run
    `step(compiled)` (forward and backward), and lower every fused training graph to
    cubins for sm_80 and sm_90. Returns the plan steps' ops and the index sites. A graph
    whose backward was compiled for outputs without gradient is lowered in that form
    only: its forward is the same as in the full one."""
    import glob

    import fusegrad
    # fresh Dynamo state: a model class an earlier test ran at other shapes would come
    # back with dynamic sizes, whose programs the CUDA target does not compile yet
    torch._dynamo.reset()
    step(fusegrad.compile(model, executor="reference", dump_dir=str(tmp_path)))
    dumps = sorted(glob.glob(str(tmp_path / "*.fused-wrt*.mlir")))
    paths = [p for p in dumps if not any(q != p and q.startswith(p[:-len(".mlir")] + "-without")
                                         for q in dumps)]
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

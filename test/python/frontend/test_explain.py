"""fusegrad.explain: the report's fields and table."""
from __future__ import annotations

import pytest
import torch

import fusegrad


def test_explain_forward_and_backward():
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    report = fusegrad.explain(mlp, torch.randn(4, 16))
    (g,) = report.graphs
    assert set(g.kernels) == {"f_fwd", "f_bwd"}  # parameters require grad
    for fn in g.kernels:
        assert 0 < g.kernels[fn] < g.dg_ops[fn]
    assert g.saved_bytes_after_remat <= g.saved_bytes_before_remat
    assert {"capture", "import", "autodiff", "remat", "fuse"} <= set(g.compile_seconds)
    text = str(report)
    assert "kernels" in text and "f_bwd" in text and "saved for backward" in text


def test_explain_inference_only():
    with torch.no_grad():
        report = fusegrad.explain(lambda x: torch.softmax(x, -1) * 2, torch.randn(4, 8))
    (g,) = report.graphs
    assert set(g.kernels) == {"f"} and g.saved_bytes_before_remat is None
    assert g.kernels["f"] <= 2


def test_explain_sees_what_compile_sees():
    """A function closing over a module: Dynamo lifts its parameters, as for compile."""
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    report = fusegrad.explain(lambda x: layer(x).pow(2).sum(),
                              torch.randn(2, 8, 32, requires_grad=True))
    (g,) = report.graphs
    assert set(g.kernels) == {"f_fwd", "f_bwd"} and not report.graph_breaks
    assert g.saved_bytes_after_remat <= g.saved_bytes_before_remat


def test_explain_lists_graph_breaks():
    def fn(x):
        y = torch.sin(x)
        print("a side effect Dynamo cannot trace")  # noqa: T201 (the graph break under test)
        return torch.cos(y)
    report = fusegrad.explain(fn, torch.randn(8))
    assert len(report.graphs) == 2 and len(report.graph_breaks) >= 1
    assert "graph break" in str(report)


def test_explain_takes_keyword_inputs_like_a_model_call():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=1, n_embd=16, n_head=2, vocab_size=32, n_positions=16, use_cache=False,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))
    ids = torch.randint(0, 32, (2, 8))
    report = fusegrad.explain(model, input_ids=ids, labels=ids)
    assert report.graphs and not report.eager_parts
    assert all(set(g.kernels) == {f"{g.name}_fwd", f"{g.name}_bwd"} for g in report.graphs)

"""fusegrad.explain: the report's fields and table, and graph breaks counted as
torch._dynamo.explain counts them: one per graph Dynamo had to end, located at the
user's line, each reason once."""
from __future__ import annotations

import inspect

import pytest
import torch

import fusegrad


def _tiny_gpt2_report():
    """fusegrad.explain of a one-layer HF GPT-2 training call (the loss in the model)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=1, n_embd=16, n_head=2, vocab_size=32, n_positions=16, use_cache=False,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))
    ids = torch.randint(0, 32, (2, 8))
    return fusegrad.explain(model, input_ids=ids, labels=ids)


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
    report = _tiny_gpt2_report()
    assert report.graphs and not report.eager_parts
    assert all(set(g.kernels) == {f"{g.name}_fwd", f"{g.name}_bwd"} for g in report.graphs)


class _Branches(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.linear(x)
        if h.sum() > 0:  # Python control flow on a tensor value: Dynamo breaks here
            h = h * 2
        return h.relu()


def test_control_flow_on_a_tensor_is_one_break_at_its_line():
    torch.manual_seed(0)
    model, x = _Branches(), torch.randn(4, 8)
    report = fusegrad.explain(model, x)
    torch._dynamo.reset()
    reference = torch._dynamo.explain(model)(x)
    assert len(report.graphs) == reference.graph_count == 2
    assert len(report.graph_breaks) == reference.graph_break_count == 1
    (brk,) = report.graph_breaks
    line = inspect.getsourcelines(_Branches.forward)[1] + 2  # the `if`
    assert brk.where == f"{__file__}:{line} in forward"
    assert "control flow on a tensor" in brk.reason
    assert str(report).splitlines()[0] == "2 graph(s), 1 graph break(s), 0 eager part(s)"
    assert f"graph break at {__file__}:{line} in forward: " in str(report)


def test_a_break_dynamo_counts_twice_is_reported_once():
    """HF GPT-2 (logger.warning_once in its loss): Dynamo's counter holds the reason
    twice (its analysis restarts), the report one break with that reason."""
    report = _tiny_gpt2_report()
    assert len(report.graphs) == 2
    (brk,) = report.graph_breaks
    assert "logging.Logger" in brk.reason and "modeling_gpt2.py" in brk.where
    text = str(report)
    assert text.count("logging.Logger method not supported") == 1
    assert "Hint:" not in text  # Dynamo's hints are left out


def test_a_break_before_any_op_is_counted_without_a_graph():
    def fn(x):
        print("a side effect first")  # noqa: T201 (the graph break under test)
        return x.sin()
    report = fusegrad.explain(fn, torch.randn(3))
    assert len(report.graphs) == 1
    (brk,) = report.graph_breaks
    assert brk.where == "" and "print" in brk.reason
    assert "graph break: Failed to trace builtin operator" in str(report)


def test_dynamic_names_each_graphs_sizes_or_why_it_compiles_per_shape():
    """explain(dynamic=True): the input dims a graph's program for every size takes as
    its sizes, or why the graph would compile per shape instead."""
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU())
    report = fusegrad.explain(mlp, torch.randn(3, 8), dynamic=True)
    (graph,) = report.graphs
    assert graph.dynamic_sizes == {"s0": "L_args_0_ dim 0"} and not graph.per_shape
    assert "one program for every size of s0 (L_args_0_ dim 0)" in str(report)

    def offset(x, n):  # an integer that is no tensor's size: a size of its own
        return x * n
    report = fusegrad.explain(offset, torch.randn(3), 5, dynamic=True)
    (graph,) = report.graphs
    assert graph.dynamic_sizes == {"s0": "L_x_ dim 0", "s1": "L_n_"}

    def slope(x):  # what a program for every size does not serve yet
        return torch.func.grad(lambda y: y.sin().sum())(x) * 2
    report = fusegrad.explain(slope, torch.randn(3), dynamic=True)
    (graph,) = report.graphs
    assert not graph.dynamic_sizes and "torch.func transform" in graph.per_shape
    assert "compiles per shape: " in str(report)

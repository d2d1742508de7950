"""What runs eagerly, and says so: unsupported ops and sparse gradients, recurrent
modules, and Dynamo's recompile limits, which must not turn off compiling for the
modules and models compiled after."""
from __future__ import annotations

import copy
import functools
import warnings

import pytest
import torch

import fusegrad
from compile_options import compiled
from fusegrad.frontend.backend import FusegradFallbackWarning

pytestmark = pytest.mark.usefixtures("no_fallback")


def test_unsupported_op_warns_once_and_runs_eagerly():
    def f(x):
        return torch.special.bessel_j0(x) + 1

    x = torch.rand(8)
    cf = compiled(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out1, out2 = cf(x), cf(x)
    msgs = [str(w.message) for w in caught if issubclass(w.category, FusegradFallbackWarning)]
    assert len(msgs) == 1, msgs
    assert "bessel_j0" in msgs[0] and "test_compile_fallback.py" in msgs[0]
    torch.testing.assert_close(out1, f(x))
    torch.testing.assert_close(out2, f(x))


@pytest.mark.parametrize("bag", [False, True])
def test_sparse_embeddings_give_sparse_gradients(bag):
    """sparse=True: eager's weight gradient is a sparse tensor (SparseAdam takes only
    those); dg's are dense, so the lookup runs eagerly, said in a warning, and the rest
    compiles."""
    from fusegrad.frontend.backend import FusegradEagerOpWarning
    torch.manual_seed(0)
    emb = torch.nn.EmbeddingBag(10, 4, sparse=True) if bag else torch.nn.Embedding(10, 4, sparse=True)
    head = torch.nn.Linear(4, 1)
    ids = torch.tensor([[1, 2, 2], [5, 9, 1]])

    def loss(ids):
        return head(torch.tanh(emb(ids))).sum()
    with pytest.warns(FusegradEagerOpWarning, match="sparse=True"):
        compiled(loss)(ids).backward()
    got, emb.weight.grad = emb.weight.grad, None
    loss(ids).backward()
    assert got.layout == torch.sparse_coo
    torch.testing.assert_close(got.to_dense(), emb.weight.grad.to_dense())


def _graphs_of_first_call(model: torch.nn.Module, x: torch.Tensor) -> int:
    from torch._dynamo.utils import counters

    before = counters["stats"]["unique_graphs"]
    fusegrad.compile(model)(x)
    return counters["stats"]["unique_graphs"] - before


def test_every_compiled_torch_nn_module_compiles_not_just_the_first_eight():
    """Dynamo enters torch.nn modules through one shared code object, whose recompile
    limit is 8: the ninth nn.Sequential ran eagerly before `own_top_frame`."""
    graphs = [_graphs_of_first_call(torch.nn.Sequential(torch.nn.Linear(4 + i, 8),
                                                        torch.nn.ReLU()), torch.randn(2, 4 + i))
              for i in range(10)]
    assert graphs == [1] * 10


def _decorated(forward):
    """A decorator like HuggingFace's `can_return_tuple`: one wrapper code object."""
    @functools.wraps(forward)
    def wrapper(self, *args, **kwargs):
        return forward(self, *args, **kwargs)
    return wrapper


def test_every_compiled_model_with_a_decorated_forward_compiles():
    """Every HuggingFace model's forward is entered through one decorator's wrapper, whose
    code object they all share: the ninth model compiled in a process ran eagerly."""
    def model(width: int) -> torch.nn.Module:
        class Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.linear = torch.nn.Linear(4, width)

            @_decorated
            def forward(self, x):
                return self.linear(x).relu()
        return Model()
    graphs = [_graphs_of_first_call(model(4 + i), torch.randn(2, 4)) for i in range(10)]
    assert graphs == [1] * 10


def test_reaching_dynamos_recompile_limit_is_a_fallback_warning():
    """Dynamo only logs that it stopped compiling a function; fusegrad warns."""
    f = fusegrad.compile(lambda x, flag: x + 1 if flag else x - 1)
    x = torch.randn(3)
    with torch._dynamo.config.patch(recompile_limit=1):
        f(x, True)
        with pytest.warns(FusegradFallbackWarning, match=r"torch._dynamo.config.recompile_limit \(1\) at .*run eagerly"):
            assert torch.equal(f(x, False), x - 1)


def test_a_module_dynamo_gives_up_on_does_not_turn_off_later_ones():
    """Dynamo cannot trace nn.GRU and marks the frame it entered "won't convert"; that
    frame used to be every torch.nn module's."""
    from fusegrad.frontend.backend import FusegradEagerOpWarning

    with pytest.warns(FusegradEagerOpWarning, match=r"the model \(nn.GRU\)"):
        gru = fusegrad.compile(torch.nn.GRU(4, 8, batch_first=True))
    gru(torch.randn(2, 3, 4))
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU())
    assert _graphs_of_first_call(model, torch.randn(2, 4)) == 1
    report = fusegrad.explain(torch.nn.Sequential(torch.nn.Linear(4, 2)), torch.randn(2, 4))
    assert len(report.graphs) == 1


class _Tagger(torch.nn.Module):
    def __init__(self, rnn: type):
        super().__init__()
        self.embed = torch.nn.Linear(4, 8)
        self.rnn = rnn(8, 8, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x):
        y, _ = self.rnn(torch.tanh(self.embed(x)))
        return self.head(y).logsumexp(-1).sum()


@pytest.mark.parametrize("rnn", [torch.nn.GRU, torch.nn.LSTM])
def test_recurrent_modules_compile_around_lstm_or_say_they_run_eagerly(rnn):
    """Dynamo gives up on a forward calling nn.LSTM/GRU/RNN. With LSTMs only, fusegrad
    traces them (PyTorch's LSTM kernel runs inside the graph, the rest compiles);
    otherwise it says, once, that the model runs eagerly and how to trace it. Either
    way it trains like eager."""
    from torch._dynamo.utils import counters

    from fusegrad.frontend.backend import FusegradEagerOpWarning

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = _Tagger(rnn)
    reference = copy.deepcopy(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = fusegrad.compile(model)
        x = torch.randn(2, 5, 4)
        loss = compiled(x)
        loss.backward()
    messages = [str(w.message) for w in caught if issubclass(w.category, FusegradEagerOpWarning)]
    graphs = counters["stats"].get("unique_graphs", 0)
    if rnn is torch.nn.GRU:
        assert len(messages) == 1 and messages[0].startswith(
            "fusegrad does not compile rnn (nn.GRU): Dynamo does not trace recurrent modules "
            "and then runs the whole model eagerly. Set torch._dynamo.config.allow_rnn = True")
        assert graphs == 0
    else:
        assert graphs == 1 and messages and all(
            "mkldnn_rnn_layer" in m and "LSTM kernel (oneDNN), kept as it is by design" in m
            for m in messages), messages
        assert not torch._dynamo.config.allow_rnn  # on in this model's calls only
    want = reference(x)
    want.backward()
    torch.testing.assert_close(loss, want)
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad)

"""fusegrad.export of functions that close over modules and tensors: what they read from
outside becomes the artifact's named parameters (tied weights stay one tensor), and the
loaded program runs and trains like eager. Also the loaded program's `trains` and
`state_dict()`."""
from __future__ import annotations

import pytest
import torch

import fusegrad
from fusegrad.runtime import load

# read by `_reads_a_global` as a global, not a closure cell
GLOBAL_SCALE = torch.tensor([0.5, 2.0, -1.0, 3.0], requires_grad=True)


def _reads_a_global(x):
    return (x * GLOBAL_SCALE).sum() + GLOBAL_SCALE.square().sum()


def _gpt2():
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    return tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64,
                                            n_positions=16, resid_pdrop=0.0, embd_pdrop=0.0,
                                            attn_pdrop=0.0, use_cache=False, bos_token_id=0,
                                            eos_token_id=0))


def _assert_grads_match(m, named, prefix, **tolerances):
    loaded = m.state_dict(keep_vars=True)
    for name, p in named:
        torch.testing.assert_close(loaded[prefix + name].grad, p.grad, **tolerances,
                                   msg=lambda msg: f"{name}: {msg}")


def test_lambda_over_hf_gpt2_exports_trains_and_keeps_the_tie(tmp_path):
    """HF's GPT-2 from a lambda (traced by torch.export: it branches on tensor values);
    it failed with 'Please convert all Tensors to FakeTensors first'. A tensor the lambda
    also closes over becomes a parameter too."""
    gpt2 = _gpt2()
    temperature = torch.tensor(0.7)
    ids = torch.randint(0, 64, (2, 8))
    path = fusegrad.export(lambda i: gpt2(i, use_cache=False).logits / temperature, ids,
                           path=tmp_path / "gpt2")
    m = load(path)
    assert m.trains
    state = m.state_dict()
    assert set(state) == {f"gpt2.{k}" for k in gpt2.state_dict()} | {"temperature"}
    tied = m.state_dict(keep_vars=True)
    assert tied["gpt2.lm_head.weight"] is tied["gpt2.transformer.wte.weight"]
    assert len({id(p) for p in m.parameters}) == len(list(gpt2.parameters())) + 1
    logits = m(ids)
    want = gpt2(ids, use_cache=False).logits / temperature
    torch.testing.assert_close(logits, want, atol=1e-5, rtol=1e-4)
    logits.logsumexp(-1).mean().backward()
    want.logsumexp(-1).mean().backward()
    _assert_grads_match(m, gpt2.named_parameters(), "gpt2.", atol=1e-5, rtol=1e-4)


def test_lambda_over_modules_sharing_a_weight(tmp_path):
    """Two closed-over modules with one weight: it raised AttributeError
    '<lambda>' object has no attribute '_param_constant0'."""
    torch.manual_seed(0)
    embed = torch.nn.Embedding(11, 6)
    head = torch.nn.Linear(6, 11, bias=False)
    head.weight = embed.weight
    ids = torch.randint(0, 11, (3, 4))
    m = load(fusegrad.export(lambda i: head(embed(i).tanh()).logsumexp(-1).sum(), ids,
                             path=tmp_path / "tied"))
    assert m.parameters[0] is m.parameters[1]
    assert sorted(m.state_dict()) == ["embed.weight", "head.weight"]
    loss = m(ids)
    want = head(embed(ids).tanh()).logsumexp(-1).sum()
    torch.testing.assert_close(loss, want)
    loss.backward()
    want.backward()
    torch.testing.assert_close(m.parameters[0].grad, embed.weight.grad)


def test_closed_over_and_global_tensors_become_named_parameters(tmp_path):
    """A tensor read twice (it raised AttributeError '_tensor_constant0'), from a
    closure cell and from a global; the function's own names are restored after."""
    weight = torch.randn(4, requires_grad=True)
    bias = torch.randn(4)  # no grad: a buffer
    x = torch.randn(4)
    m = load(fusegrad.export(lambda x: (x * weight + bias).sum() + (weight * weight).sum(),
                             x, path=tmp_path / "cell"))
    assert sorted(m.state_dict()) == ["bias", "weight"]
    assert m.state_dict(keep_vars=True)["weight"].requires_grad
    assert not m.state_dict(keep_vars=True)["bias"].requires_grad
    loss = m(x)
    loss.backward()
    want = (x * weight + bias).sum() + (weight * weight).sum()
    want.backward()
    torch.testing.assert_close(loss, want)
    torch.testing.assert_close(m.state_dict(keep_vars=True)["weight"].grad, weight.grad)

    m = load(fusegrad.export(_reads_a_global, x, path=tmp_path / "global"))
    assert type(GLOBAL_SCALE) is torch.Tensor and GLOBAL_SCALE.grad is None  # restored
    assert list(m.state_dict()) == ["GLOBAL_SCALE"]
    loss = m(x)
    loss.backward()
    torch.testing.assert_close(loss, _reads_a_global(x))
    torch.testing.assert_close(m.parameters[0].grad, x + 2 * GLOBAL_SCALE.detach())


def test_trains_and_state_dict_of_a_module(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.BatchNorm1d(4))
    x = torch.randn(5, 8)
    m = load(fusegrad.export(model, x, path=tmp_path / "m"))
    assert m.trains is True
    state = m.state_dict()
    assert list(state) == [n for n, _ in model.named_parameters()] + \
        [n for n, _ in model.named_buffers()]
    for name, value in model.state_dict().items():
        torch.testing.assert_close(state[name], value)
    assert not any(t.requires_grad for t in state.values())  # detached, as a module's
    with torch.no_grad():
        frozen = load(fusegrad.export(model.eval(), x, path=tmp_path / "eval"))
    model.requires_grad_(False)
    plain = load(fusegrad.export(model, x, path=tmp_path / "plain"))
    assert frozen.trains is True and plain.trains is False and plain.training is None

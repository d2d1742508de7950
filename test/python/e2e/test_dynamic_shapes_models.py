"""Programs for every size on real models: HuggingFace GPT-2, LLaMA, BERT and T5 train
with the sequence length and the batch size changing at every step (a partial last
batch among them) like eager: the first step compiles its shapes, and every graph Dynamo
makes dynamic after that compiles once for every size (a sequence length that changes,
then the batch size: Dynamo makes each dynamic when it first changes), never per shape;
greedy generation with a KV cache matches eager token for token."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch

import fusegrad
from fusegrad.frontend import compile_history
from fusegrad.frontend.backend import FusegradEagerOpWarning

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.usefixtures("no_fallback")

VOCAB = 96
# (batch, sequence length) per step: lengths change every step, and the last batch is
# a partial one (GPT-2 and BERT; LLaMA and T5 change lengths only, to keep the suite's
# time: each change of which dims vary is a compile)
SHAPES = [(4, 12), (4, 17), (4, 9), (4, 23), (3, 14)]
LENGTHS_ONLY = SHAPES[:4]


def _gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=64, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, bos_token_id=0, eos_token_id=0))


def _llama():
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
        intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64, use_cache=False))


def _bert():
    return transformers.BertForMaskedLM(transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0))


def _t5():
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        num_layers=1, num_decoder_layers=1, d_model=32, d_kv=8, d_ff=64, num_heads=4,
        vocab_size=VOCAB, dropout_rate=0.0, use_cache=False, decoder_start_token_id=0,
        pad_token_id=0))


MODELS = {"gpt2": (_gpt2, SHAPES), "llama": (_llama, LENGTHS_ONLY), "bert": (_bert, SHAPES),
          "t5": (_t5, LENGTHS_ONLY)}


def _steps(models, optimizers, ids, labels) -> list:
    """One training step of each model (compiled, reference) with its optimizer: losses."""
    losses = []
    for fn, opt in zip(models, optimizers):
        opt.zero_grad()
        loss = fn(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        losses.append(loss)
    return losses


@pytest.fixture
def compiles():
    """The programs compiled so far (`compile_history`): True for one for every size."""
    compile_history.clear()
    return lambda: [r.kind == "for every size" for r in compile_history.compile_history()]


@pytest.mark.parametrize("name", list(MODELS))
def test_trains_like_eager_at_changing_sizes(name, compiles):
    torch.manual_seed(0)
    build, shapes = MODELS[name]
    model = build()
    reference = copy.deepcopy(model)
    compiled = fusegrad.compile(model)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3, eps=1e-4)
                  for m in (model, reference)]
    for step, (batch, length) in enumerate(shapes):
        ids = torch.randint(0, VOCAB, (batch, length),
                            generator=torch.Generator().manual_seed(step))
        labels = ids.clone()
        labels[:, :2] = -100
        losses = _steps((compiled, reference), optimizers, ids, labels)
        torch.testing.assert_close(losses[0], losses[1], rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"step {step} at {batch}x{length}: {m}")
        if step == 0:
            first = len(compiles())
    # (AdamW normalizes each gradient: at a symbolic size attention runs decomposed, not
    # as PyTorch's flash kernel, and a near-zero gradient's rounding moves its weight by
    # up to ~3e-5 in these 5 steps)
    for (name_p, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=5e-5, msg=lambda m: f"{name_p}: {m}")
    # static at the first shapes, then only programs for every size, one per graph Dynamo
    # made dynamic (per Dynamo graph: the sequence length, then the batch size too)
    later = compiles()[first:]
    assert all(later) and 0 < len(later) <= 2 * first, compile_history.compile_history()


def test_generate_with_a_kv_cache_matches_eager(compiles):
    torch.manual_seed(0)
    model = _gpt2().eval()
    model.config.use_cache = True
    prompt = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(0))
    want = model.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=0)
    model.forward = torch.compile(model.forward, backend="fusegrad")
    for _ in range(2):
        got = model.generate(prompt, max_new_tokens=12, do_sample=False, pad_token_id=0)
        assert torch.equal(got, want)
    # the prompt and the first decoding step per shape, then every cache length from one
    # program (the second generate compiles nothing)
    made = compiles()
    assert made.count(True) == 1 and made.count(False) <= 2, compile_history.compile_history()


def test_a_mixture_of_experts_split_around_its_eager_op_compiles_once_for_every_size(compiles):
    """Mixtral's experts run transformers' grouped product, a library operator that runs
    eagerly: its graphs are split around it, and once the sequence length changes each
    compiled part serves every length (the parts pass their sizes to each other as
    integers, and a part sees the tokens only as batch * length); training matches eager."""
    torch.manual_seed(0)
    model = transformers.MixtralForCausalLM(transformers.MixtralConfig(
        num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
        intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64, use_cache=False,
        num_local_experts=4, num_experts_per_tok=2))
    reference = copy.deepcopy(model)
    compiled = fusegrad.compile(model)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-3, eps=1e-4)
                  for m in (model, reference)]
    made = []
    warnings.simplefilter("ignore", FusegradEagerOpWarning)  # the fixture restores filters
    for step, length in enumerate((12, 17, 9)):
        ids = torch.randint(0, VOCAB, (4, length), generator=torch.Generator().manual_seed(step))
        losses = _steps((compiled, reference), optimizers, ids, ids)
        torch.testing.assert_close(losses[0], losses[1], rtol=1e-4, atol=1e-5)
        made.append(compiles())
    for (name_p, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=5e-5, msg=lambda m: f"{name_p}: {m}")
    first, second, third = made
    assert len(first) > 1 and not any(first), compile_history.compile_history()  # split
    assert second[len(first):] == [True] * len(first), compile_history.compile_history()
    assert third == second  # the third length compiled nothing

"""HuggingFace models from small configs (random weights, no downloads): compiled
with no fallback at all, 20 AdamW steps match eager.

GPT-2, LLaMA and BERT, plus the families people also train: grouped-query
attention with rotary embeddings (Mistral), encoder-decoder with relative
position buckets (T5), and a vision transformer (patch embedding as a conv).
Language-model labels ignore some positions (-100), as padded batches do.
"""
from __future__ import annotations

import copy

import pytest
import torch

import fusegrad
from compile_options import OPTIONS

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.usefixtures("no_fallback")

VOCAB, BATCH, SEQ = 96, 2, 12


def _tokens():
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    labels = ids.clone()
    labels[:, :2] = -100  # ignored positions
    return {"input_ids": ids, "labels": labels}


def _gpt2():
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=32, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, bos_token_id=0, eos_token_id=0)), _tokens()


def _grouped_query(model: str, config: str, layers: int, kv_heads: int):
    """A LLaMA-style decoder (rotary embeddings, RMSNorm, grouped-query attention)."""
    return getattr(transformers, model)(getattr(transformers, config)(
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=kv_heads,
        hidden_size=32, intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=32,
        use_cache=False)), _tokens()


def _llama():
    return _grouped_query("LlamaForCausalLM", "LlamaConfig", layers=2, kv_heads=2)


def _bert():
    return transformers.BertForMaskedLM(transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)), _tokens()


def _mistral():
    return _grouped_query("MistralForCausalLM", "MistralConfig", layers=1, kv_heads=1)


def _t5():
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        num_layers=1, num_decoder_layers=1, d_model=32, d_kv=8, d_ff=64, num_heads=4,
        vocab_size=VOCAB, dropout_rate=0.0, use_cache=False, decoder_start_token_id=0,
        pad_token_id=0)), _tokens()


def _vit():
    model = transformers.ViTForImageClassification(transformers.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=4, intermediate_size=64, num_labels=5, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0))
    return model, {"pixel_values": torch.randn(BATCH, 3, 16, 16),
                   "labels": torch.tensor([1, 3])}


def _funnel():
    # relative-shift attention: an in-place mask product on slices of a permuted einsum
    return transformers.FunnelForMaskedLM(transformers.FunnelConfig(
        vocab_size=VOCAB, d_model=32, n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1],
        hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)), _tokens()


def _longformer():
    # sliding-window attention; global tokens marked by a boolean-mask assignment
    return transformers.LongformerForMaskedLM(transformers.LongformerConfig(
        num_hidden_layers=1, hidden_size=32, num_attention_heads=4, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=48, attention_window=4,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)), _tokens()


def train(model, fn, batch: dict, steps: int) -> list[float]:
    """The losses of `steps` AdamW steps of `model`, computing the loss with `fn`."""
    # eps well above rounding noise: attention key biases have a true gradient of 0,
    # and the default eps would turn their 1e-9 noise into lr-sized steps
    opt, losses = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-4), []
    for _ in range(steps):
        opt.zero_grad()
        loss = fn(**batch).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


MODELS = {"gpt2": _gpt2, "llama": _llama, "bert": _bert, "mistral": _mistral, "t5": _t5,
          "vit": _vit, "funnel": _funnel, "longformer": _longformer}


@pytest.mark.parametrize("name", list(MODELS))
def test_trains_like_eager(name):
    torch.manual_seed(0)
    model, batch = MODELS[name]()
    reference = copy.deepcopy(model)
    compiled = fusegrad.compile(model, **OPTIONS)
    runs = [train(m, fn, batch, 20) for m, fn in ((model, compiled), (reference, reference))]
    torch.testing.assert_close(runs[0], runs[1], rtol=1e-4, atol=1e-5)
    for (name_p, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name_p}: {m}")

"""Training steps of more HuggingFace models (small random configs), eager against fusegrad.

The suite (suite.py) covers GPT-2, BERT and LLaMA against eager and Inductor; this covers
the architectures around them a user is likely to train, for regressions and gaps the
suite does not show (ConvNeXt's depthwise convolutions, Mistral's masked attention).
Each model runs in this process: one SGD step of `model(**inputs).loss` per call, the
two backends interleaved for `--seconds`, medians compared; the losses of the first
step are checked against each other, and any fusegrad fallback is reported.

    .venv/bin/python benchmarks/hf_models.py --threads 1 [--only convnext,mistral]

Run it on a quiet machine with the allocator keeping freed memory
(MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1099511627776), as the committed table was.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings
from typing import Any, Callable

BATCH, SEQ, IMAGE, LONG_SEQ = 8, 128, 64, 1024
SMALL = dict(num_hidden_layers=2, hidden_size=256, num_attention_heads=4,
             intermediate_size=1024, vocab_size=1000)


def _models() -> dict[str, Callable[[], tuple[Any, dict]]]:
    import torch
    import transformers as tf

    ids = torch.randint(0, 1000, (BATCH, SEQ), generator=torch.Generator().manual_seed(0))
    pixels = torch.randn(BATCH, 3, IMAGE, IMAGE, generator=torch.Generator().manual_seed(0))
    classes = torch.randint(0, 10, (BATCH,), generator=torch.Generator().manual_seed(0))
    text = dict(input_ids=ids, labels=ids)
    long_ids = torch.randint(0, 1000, (1, LONG_SEQ), generator=torch.Generator().manual_seed(0))
    image = dict(pixel_values=pixels, labels=classes)
    vision = {k: v for k, v in SMALL.items() if k != "vocab_size"}
    return {
        "vit": lambda: (tf.ViTForImageClassification(tf.ViTConfig(
            image_size=IMAGE, patch_size=8, num_labels=10, **vision)), image),
        "swin": lambda: (tf.SwinForImageClassification(tf.SwinConfig(
            image_size=IMAGE, patch_size=4, embed_dim=32, depths=[1, 1], num_heads=[2, 4],
            window_size=4, num_labels=10)), image),
        "convnext": lambda: (tf.ConvNextForImageClassification(tf.ConvNextConfig(
            image_size=IMAGE, hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 2, 1],
            num_labels=10)), image),
        "resnet": lambda: (tf.ResNetForImageClassification(tf.ResNetConfig(
            hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 1, 1], embedding_size=32,
            num_labels=10)), image),
        # ResNet-18's widths (64-512): its last stages' 3x3 weights outweigh their
        # activations at this image size
        "resnet18": lambda: (tf.ResNetForImageClassification(tf.ResNetConfig(
            layer_type="basic", hidden_sizes=[64, 128, 256, 512], depths=[2, 2, 2, 2],
            embedding_size=64, num_labels=10)), image),
        "mobilenet_v2": lambda: (tf.MobileNetV2ForImageClassification(tf.MobileNetV2Config(
            image_size=IMAGE, depth_multiplier=0.5, num_labels=10)), image),
        "distilbert": lambda: (tf.DistilBertForMaskedLM(tf.DistilBertConfig(
            vocab_size=1000, dim=256, n_layers=2, n_heads=4, hidden_dim=1024)), text),
        "t5": lambda: (tf.T5ForConditionalGeneration(tf.T5Config(
            vocab_size=1000, d_model=256, d_kv=64, d_ff=1024, num_layers=2, num_heads=4,
            decoder_start_token_id=0, pad_token_id=0)), text),
        "whisper": lambda: (tf.WhisperForConditionalGeneration(tf.WhisperConfig(
            vocab_size=1000, d_model=256, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=1024,
            decoder_ffn_dim=1024, num_mel_bins=80, max_source_positions=64,
            max_target_positions=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
            decoder_start_token_id=1)),
            dict(input_features=torch.randn(2, 80, 128, generator=torch.Generator().manual_seed(0)),
                 labels=ids[:2, :32])),
        "mistral": lambda: (tf.MistralForCausalLM(tf.MistralConfig(
            **SMALL, num_key_value_heads=2)), text),
        "qwen2": lambda: (tf.Qwen2ForCausalLM(tf.Qwen2Config(**SMALL, num_key_value_heads=2)),
                          text),
        # Fourier mixing instead of attention: the FFTs (complex) run eagerly between
        # compiled parts
        "fnet": lambda: (tf.FNetForMaskedLM(tf.FNetConfig(
            **{k: v for k, v in SMALL.items() if k != "num_attention_heads"},
            max_position_embeddings=SEQ, use_tpu_fourier_optimizations=False)), text),
        # mixture of experts, top-2 of 4: transformers' grouped matmul of the experts is a
        # custom op that runs eagerly between compiled parts
        "mixtral": lambda: (tf.MixtralForCausalLM(tf.MixtralConfig(
            **SMALL, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2)),
            text),
        # a selective state-space model: its scan is a Python loop over time steps
        "mamba": lambda: (tf.MambaForCausalLM(tf.MambaConfig(
            vocab_size=1000, hidden_size=256, num_hidden_layers=2, state_size=16,
            use_mambapy=False)), dict(input_ids=ids[:, :32], labels=ids[:, :32])),
        # one sequence of 1024 tokens: attention runs as PyTorch's flash kernels
        "llama_1k": lambda: (tf.LlamaForCausalLM(tf.LlamaConfig(
            **SMALL, num_key_value_heads=2, max_position_embeddings=LONG_SEQ)),
            dict(input_ids=long_ids, labels=long_ids)),
    }


def _step(model, inputs: dict, compile_fn: Callable | None) -> Callable[[], Any]:
    import torch

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, kw):
            return self.model(**kw).loss
    loss = Loss() if compile_fn is None else compile_fn(Loss())
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        value = loss(inputs)
        value.backward()
        opt.step()
        return value.detach()
    return step


def run(name: str, build: Callable, seconds: float) -> dict[str, Any]:
    import torch

    import fusegrad
    from fusegrad.frontend.backend import FusegradFallbackWarning

    # every model's step runs the same `Loss.forward` code object: without a reset, Dynamo
    # stops compiling it after its recompile limit and runs the later models eagerly
    torch._dynamo.reset()
    torch.manual_seed(0)
    base, inputs = build()
    base.train()
    for m in base.modules():  # deterministic steps
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    row: dict[str, Any] = {"model": name}
    steps = {}
    for backend, wrap in (("eager", None), ("fusegrad", fusegrad.compile)):
        step = _step(copy.deepcopy(base), inputs, wrap)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FusegradFallbackWarning)
            start = time.perf_counter()
            row[f"{backend} loss"] = float(step())
            row[f"{backend} first (s)"] = time.perf_counter() - start
        row.setdefault("fallbacks", 0)
        row["fallbacks"] += sum(issubclass(w.category, FusegradFallbackWarning) for w in caught)
        step()
        steps[backend] = step
    times: dict[str, list[float]] = {b: [] for b in steps}
    end = time.time() + seconds
    while time.time() < end:
        for backend, step in steps.items():
            start = time.perf_counter()
            step()
            times[backend].append(time.perf_counter() - start)
    for backend in steps:
        row[f"{backend} (ms)"] = statistics.median(times[backend]) * 1e3
    row["iters"] = len(times["eager"])
    row["vs eager"] = row["eager (ms)"] / row["fusegrad (ms)"]
    return row


def markdown(rows: list[dict[str, Any]]) -> str:
    cols = ["model", "eager (ms)", "fusegrad (ms)", "vs eager", "iters", "fusegrad first (s)",
            "eager loss", "fusegrad loss", "fallbacks"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r[c]
            cells.append(f"{v:.2f}x" if c == "vs eager" else f"{v:.5f}" if "loss" in c
                         else f"{v:.2f}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--seconds", type=float, default=15.0, help="timed seconds per model")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    models = _models()
    names = args.only.split(",") if args.only else list(models)
    unknown = [n for n in names if n not in models]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(models)}")
    rows = []
    for name in names:
        rows.append(run(name, models[name], args.seconds))
        print(f"{name}: {rows[-1]['vs eager']:.3f}x eager", flush=True)
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

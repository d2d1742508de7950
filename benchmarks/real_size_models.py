"""The models `gpu_real_size.py` trains, at their real sizes and at tiny ones.

In order of importance (issue 48, item 3): GPT-2 124M, a LLaMA of similar size, a
ResNet-50. Each is randomly initialised after `torch.manual_seed(0)` (no download), with
dropout off so that every backend computes the same losses, and comes with one fixed
batch and the step's loss. `tiny=True` shrinks each to 2 layers (or one block per stage)
and a few tokens or pixels, so that the whole benchmark runs on a CPU in seconds.

The ResNet-50 is written out here (torchvision's v1.5 layout: the stride on the 3x3
convolution) because the GPU machine has no torchvision.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

MODELS = ("gpt2", "llama", "resnet50")


@dataclass
class Workload:
    """A model, its batch, and the loss of one training step: `loss(model, *batch)`
    (`model` is the module or what a backend compiled of it)."""

    model: nn.Module
    batch: tuple[torch.Tensor, ...]
    loss: Callable[..., torch.Tensor]
    shape: str

    def to(self, device: torch.device) -> "Workload":
        return Workload(self.model.to(device), tuple(x.to(device) for x in self.batch),
                        self.loss, self.shape)


def _language_model_loss(model: Any, ids: torch.Tensor) -> torch.Tensor:
    return model(input_ids=ids, labels=ids).loss


def _ids(vocab: int, batch: int, tokens: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, tokens), generator=torch.Generator().manual_seed(0))


def gpt2(tiny: bool) -> Workload:
    """HF `GPT2LMHeadModel(GPT2Config())`: 12 layers, 768 wide, 12 heads, vocabulary
    50257, 124M parameters (head tied to the embedding); batch 8 x 1024 tokens."""
    import transformers as tf
    size = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=512) if tiny else {}
    batch, tokens = (2, 32) if tiny else (8, 1024)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                             use_cache=False, **size))
    return Workload(model, (_ids(model.config.vocab_size, batch, tokens),),
                    _language_model_loss, f"{batch}x{tokens} tokens")


def llama(tiny: bool) -> Workload:
    """HF `LlamaForCausalLM`: 12 layers, hidden 768, 12 query heads sharing 4 key/value
    heads (GQA), RoPE, SwiGLU MLP of 2048, vocabulary 32000, head untied (125M
    parameters); batch 4 x 2048 tokens (GPT-2's 8192 tokens per step)."""
    import transformers as tf
    size = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=128, vocab_size=512) if tiny else dict(
        num_hidden_layers=12, hidden_size=768, num_attention_heads=12, num_key_value_heads=4,
        intermediate_size=2048, vocab_size=32000)
    batch, tokens = (2, 32) if tiny else (4, 2048)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(max_position_embeddings=tokens, use_cache=False,
                                               **size))
    return Workload(model, (_ids(model.config.vocab_size, batch, tokens),),
                    _language_model_loss, f"{batch}x{tokens} tokens")


class Bottleneck(nn.Module):
    """1x1, 3x3 (strided), 1x1 convolutions with batch norms, and the shortcut."""

    def __init__(self, inputs: int, width: int, stride: int) -> None:
        super().__init__()
        out = 4 * width
        self.body = nn.Sequential(
            nn.Conv2d(inputs, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out))
        self.shortcut = nn.Identity() if stride == 1 and inputs == out else nn.Sequential(
            nn.Conv2d(inputs, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


class ResNet(nn.Module):
    """ResNet-50 with `blocks=(3, 4, 6, 3)` and `width=64` (25.6M parameters)."""

    def __init__(self, blocks: tuple[int, ...], width: int, classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, width, 7, 2, 3, bias=False),
                                   nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
        inputs = width
        for stage, count in enumerate(blocks):
            for i in range(count):
                stride = 2 if stage > 0 and i == 0 else 1
                layers.append(Bottleneck(inputs, width << stage, stride))
                inputs = 4 * (width << stage)
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(inputs, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean((2, 3)))


def _classifier_loss(model: Any, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(model(images), labels)


def resnet50(tiny: bool) -> Workload:
    """ResNet-50 (1000 classes); batch 64 x 3 x 224 x 224."""
    blocks, width, classes, batch, side = ((1, 1, 1, 1), 8, 10, 4, 32) if tiny else \
        ((3, 4, 6, 3), 64, 1000, 64, 224)
    gen = torch.Generator().manual_seed(0)
    images = torch.randn(batch, 3, side, side, generator=gen)
    labels = torch.randint(0, classes, (batch,), generator=gen)
    return Workload(ResNet(blocks, width, classes), (images, labels), _classifier_loss,
                    f"{batch}x3x{side}x{side}")


BUILDERS: dict[str, Callable[[bool], Workload]] = {
    "gpt2": gpt2, "llama": llama, "resnet50": resnet50}


def build(name: str, tiny: bool) -> Workload:
    """The workload `name` (one of MODELS), freshly initialised after seeding 0."""
    torch.manual_seed(0)
    return BUILDERS[name](tiny)

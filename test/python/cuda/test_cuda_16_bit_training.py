"""16-bit training on the CUDA target without a GPU (issue 48, item 4): a small causal
transformer language model's training step, in bf16 and f16 weights and under bf16
autocast (f32 weights, what benchmarks/gpu_real_size.py runs), exported for CUDA; ptxas
accepts every kernel of its forward and backward for sm_80 and sm_90, and the artifact
loads and trains against the fake driver, its gradients in the parameters' dtype.
(16-bit kernels one at a time: test_cuda_compile.py; on a GPU: test_cuda_gpu.py.)"""
from __future__ import annotations

import os

import pytest
import torch

import fusegrad
from cuda_fakes import FakeDriver
from cuda_plans import PTXAS, check_images, needs_ptxas
from fusegrad.runtime import load
from fusegrad.runtime.cuda import LaunchPlan
from fusegrad.runtime.exported import FORWARD, TRAINING

VOCAB, WIDTH, BATCH, TOKENS = 64, 32, 2, 16
MODES = {"bf16": torch.bfloat16, "f16": torch.float16, "autocast": torch.float32}


class CausalLM(torch.nn.Module):
    """Embedding, one pre-norm transformer layer with a causal mask, a head, the loss."""

    def __init__(self, autocast: bool) -> None:
        super().__init__()
        self.autocast = autocast
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.layer = torch.nn.TransformerEncoderLayer(WIDTH, 2, 2 * WIDTH, dropout=0.0,
                                                      batch_first=True, norm_first=True)
        self.head = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = torch.nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            logits = self.head(self.layer(self.embed(ids), src_mask=mask, is_causal=True))
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())


def _ids() -> torch.Tensor:
    return torch.randint(0, VOCAB, (BATCH, TOKENS), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module", params=sorted(MODES))
def artifact(request, tmp_path_factory):
    """(mode, the exported training artifact's path)."""
    torch.manual_seed(0)
    model = CausalLM(autocast=request.param == "autocast").to(MODES[request.param])
    path = tmp_path_factory.mktemp("lm") / request.param
    return request.param, fusegrad.export(model, _ids(), path=path, target="cuda")


@needs_ptxas
def test_training_kernels_assemble_for_both_chips(artifact):
    mode, path = artifact
    for part in (FORWARD, TRAINING):
        plan = LaunchPlan.load(os.path.join(path, part))
        check_images(plan)  # PTX and a cubin from ptxas for sm_80 and sm_90, every module
    fwd = plan.functions[next(iter(plan.functions))]
    weights = {sig.dtype for sig in fwd.inputs if len(sig.shape) == 2 and sig.dtype != "i64"}
    assert weights == {"f32" if mode == "autocast" else mode}
    ptx = b"".join(m.images["sm_90"].ptx for m in plan.modules.values())
    assert (b".bf16" if mode != "f16" else b".f16") in ptx  # 16-bit values in the kernels


def test_artifact_trains_against_the_fake_driver(artifact):
    mode, path = artifact
    driver = FakeDriver()
    m = load(path, device="cpu", driver=driver, stream=lambda: 9, chip="sm_90")
    assert m.trains
    loss = m(_ids())
    forward = len(driver.launches)
    loss.backward()
    assert forward > 0 and len(driver.launches) > forward
    assert {launch["stream"] for launch in driver.launches} == {9}
    assert {kind for _, kind in driver.loaded} == {"ptx" if PTXAS is None else "cubin"}
    trained = [p for p in m.parameters if p.requires_grad]
    assert trained and all(p.grad is not None and p.grad.dtype == MODES[mode] for p in trained)

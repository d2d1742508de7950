"""A model of N identical layers compiles to one set of kernel functions per distinct
block body: past the layers at either end (whose neighbours differ), a deeper model adds
no kernel function to the LLVM module (within one: how the first layers' buffers are
reused in place varies by a kernel with depth), so LLVM's code generation does not grow
with depth. What keeps the middle layers alike is dg-remat saving the same values in each
(the residual stream the forward writes anyway, not a chain of sums recomputed from the
embeddings) and dg-dedup-functions keeping one copy of each kernel."""
from __future__ import annotations

import copy
import glob
import re

import pytest
import torch

import fusegrad
from compile_options import OPTIONS

tf = pytest.importorskip("transformers")

pytestmark = [pytest.mark.usefixtures("no_fallback"),
              pytest.mark.skipif(OPTIONS["executor"] != "cpu",
                                 reason="counts the CPU pipeline's LLVM kernel functions")]


def _kernels(dump_dir, function: str) -> set[str]:
    """The kernel functions (`@<entry>_k<n>`, one per row-loop kernel after
    deduplication) of the LLVM modules of `function` (main_fwd or main_bwd)."""
    text = "".join(open(p).read() for p in glob.glob(f"{dump_dir}/*.cpu-llvm*.mlir"))
    return set(re.findall(rf"llvm\.func internal @({function}_k\d+)\(", text))


def _training_kernels(layers: int, dump_dir) -> tuple[int, int]:
    """Kernel functions of a GPT-2 of `layers` layers' training step (forward, backward),
    its gradients checked against eager."""
    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(
        n_layer=layers, n_embd=32, n_head=2, vocab_size=64, n_positions=32,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    compiled = fusegrad.compile(copy.deepcopy(model), dump_dir=str(dump_dir), **OPTIONS)
    ids = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))
    model(input_ids=ids, labels=ids).loss.backward()
    compiled(input_ids=ids, labels=ids).loss.backward()
    for (name, p), q in zip(model.named_parameters(), compiled.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)
    return len(_kernels(dump_dir, "main_fwd")), len(_kernels(dump_dir, "main_bwd"))


def test_a_deeper_model_adds_no_kernel_function(tmp_path):
    eight = _training_kernels(8, tmp_path / "8")
    twelve = _training_kernels(12, tmp_path / "12")
    assert min(eight) > 0
    assert all(abs(a - b) <= 1 for a, b in zip(eight, twelve)), \
        f"forward, backward kernel functions: {eight} at 8 layers, {twelve} at 12"

"""scaled_dot_product_attention compiled: dg.attention on PyTorch's CPU flash kernels from
`attention.MIN_KEYS` keys on, the decomposition below, against eager (which runs the
flash kernels on the CPU), with gradients to second order."""
from __future__ import annotations

import glob
import json
import re

import pytest
import torch
import torch.nn.functional as F

import fusegrad
from compile_options import OPTIONS
from fusegrad.context import make_context
from fusegrad.dialects import OPS
from fusegrad.dialects.attention import MIN_KEYS
from fusegrad.dialects.builder import Builder
from fusegrad.dialects.interpreter import run_function
from fusegrad.dialects.types import TensorSpec
from fusegrad.pass_manager import run_pipeline
from fusegrad.codegen.cpu.compile import compile_cpu
from fusegrad.program import CompileOptions
from mlir import ir
from mlir.dialects import func


pytestmark = pytest.mark.usefixtures("no_fallback")


def _qkv(keys, dtype=torch.float32, batch=2, heads=2, queries=5, width=8):
    torch.manual_seed(0)
    q = torch.randn(batch, heads, queries, width, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(batch, heads, keys, width, dtype=dtype, requires_grad=True)
            for _ in range(2))
    return q, k, v


def _imported(dump_dir) -> str:
    return "".join(open(p).read() for p in sorted(glob.glob(f"{dump_dir}/*.imported.mlir")))


MASKS = {
    "none": lambda keys: None,
    "float, broadcast over heads": lambda keys: torch.randn(2, 1, 5, keys),
    "bool, 2-d": lambda keys: torch.rand(5, keys) > 0.3,
    "causal": lambda keys: "causal",
}


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("keys", [MIN_KEYS, 16])
def test_matches_eager_with_gradients(mask, keys, tmp_path):
    m = MASKS[mask](keys)
    kw = {"is_causal": True, "scale": 0.3} if m == "causal" else {"attn_mask": m}

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **kw) * 2.0
    q, k, v = _qkv(keys)
    g = torch.randn(2, 2, 5, 8)
    want = f(q, k, v)
    want_grads = torch.autograd.grad(want, (q, k, v), g)
    got = fusegrad.compile(f, dump_dir=str(tmp_path), **OPTIONS)(q, k, v)
    got_grads = torch.autograd.grad(got, (q, k, v), g)
    torch.testing.assert_close(got, want)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b)
    # the library path from MIN_KEYS keys on, the decomposition below
    assert ("dg.attention" in _imported(tmp_path)) == (keys >= MIN_KEYS)


@pytest.mark.parametrize("keys", [MIN_KEYS, 16])
@pytest.mark.parametrize("boolean", [False, True])
def test_fully_masked_rows_give_zeros_and_finite_gradients(keys, boolean):
    """A query that may attend to no key (a padded position) gets 0, as eager, and
    gradients as eager's: with the decomposition, every gradient was NaN."""
    q, k, v = _qkv(keys)
    mask = torch.zeros(2, 1, 5, keys)
    mask[:, :, 2] = float("-inf")
    if boolean:
        mask = mask == 0

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    got = fusegrad.compile(f, **OPTIONS)(q, k, v)
    want = f(q, k, v)
    assert torch.equal(got[:, :, 2], torch.zeros_like(got[:, :, 2]))
    torch.testing.assert_close(got, want)
    g = torch.randn_like(want)
    for a, b in zip(torch.autograd.grad(got, (q, k, v), g), torch.autograd.grad(want, (q, k, v), g)):
        torch.testing.assert_close(a, b)


def test_gradcheck_and_gradgradcheck():
    """float64 through the flash kernels, and their second derivative (the decomposition)."""
    q, k, v = _qkv(MIN_KEYS, torch.float64, batch=1, heads=1, queries=2, width=2)
    mask = torch.randn(1, 1, 2, MIN_KEYS, dtype=torch.float64)
    cf = fusegrad.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                          **OPTIONS)
    assert torch.autograd.gradcheck(cf, (q, k, v))
    assert torch.autograd.gradgradcheck(cf, (q, k, v))


def test_mask_gradient():
    """A mask that requires grad gets one: eager runs the math kernel then, and so does the
    capture; dg.attention's own mask gradient is checked by test_autodiff."""
    q, k, v = _qkv(MIN_KEYS)
    mask = torch.randn(2, 1, 5, MIN_KEYS, requires_grad=True)

    def f(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    want = torch.autograd.grad(f(q, k, v, mask).sum(), (q, mask))
    got = torch.autograd.grad(fusegrad.compile(f, **OPTIONS)(q, k, v, mask).sum(), (q, mask))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("causal", [0, 1])
def test_decomposition_matches_reference(causal, dtype):
    """The lowering rules (the decomposition, what targets without a library kernel run),
    lowered before the CPU pipeline could outline the ops for PyTorch's kernels. bf16
    (from CUDA captures) computes in f32 with an f32 log-sum-exp, as the kernels do."""
    torch.manual_seed(0)
    q = torch.randn(2, 3, 4, 8, dtype=dtype)
    k, v = torch.randn(2, 3, 6, 8, dtype=dtype), torch.randn(2, 3, 6, 8, dtype=dtype)
    mask = torch.randn(2, 1, 4, 6, dtype=dtype)
    mask[1, 0, 2] = float("-inf")  # a fully masked row
    attrs = dict(scale=0.3, causal=causal)
    out, lse = OPS["attention"].reference(q, k, v, mask, op="attention", attrs=attrs, out=None)
    g = torch.randn_like(out)
    args = [q, k, v, mask, g, out, lse]
    with make_context(), ir.Location.unknown():
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            @func.FuncOp.from_py_func(*[TensorSpec.of(t).to_mlir() for t in args], name="f")
            def f(q, k, v, mask, g, out, lse):
                b = Builder()
                return [*b.attention(q, k, v, mask, **attrs),
                        *b.attention_grad(g, q, k, v, out, lse, mask, **attrs)]
        want = run_function(f.func_op.operation, args)
        run_pipeline(module, "dg-lower-to-linalg")
        got = compile_cpu(module).function("f")(*args)
    assert lse.dtype == torch.float32
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def test_grouped_query_attention():
    """Fewer key/value heads than query heads (enable_gqa, as HF's LLaMA asks for)."""
    torch.manual_seed(0)
    q = torch.randn(1, 4, 5, 8, requires_grad=True)
    k, v = (torch.randn(1, 2, MIN_KEYS, 8, requires_grad=True) for _ in range(2))

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    want = torch.autograd.grad(f(q, k, v).sum(), (q, k, v))
    got = torch.autograd.grad(fusegrad.compile(f, **OPTIONS)(q, k, v).sum(), (q, k, v))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


class _SelfAttention(torch.nn.Module):
    """q, k and v projected from one input: one sequence-length symbol for all three."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x):
        b, length, _ = x.shape
        q, k, v = self.qkv(x).view(b, length, 3, 4, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_run_time_sizes_call_the_flash_kernels(tmp_path):
    """A sequence length that changes: the program for every size keeps dg.attention and
    calls the flash kernels with the sizes of each call (nothing materializes the
    [B, H, L, L] scores), compiled once, values and gradients as eager's."""
    from fusegrad.frontend import compile_history

    torch.manual_seed(0)
    model = _SelfAttention()
    compile_history.clear()
    torch._dynamo.reset()
    cf = torch.compile(model, backend="fusegrad", options={"dump_dir": str(tmp_path)})
    for length in (MIN_KEYS, MIN_KEYS + 24, MIN_KEYS + 7, MIN_KEYS + 24):
        x = torch.randn(2, length, 32, requires_grad=True)
        got = cf(x)
        got_grads = torch.autograd.grad(got.square().sum(), [x, *model.parameters()])
        want = model(x)
        want_grads = torch.autograd.grad(want.square().sum(), [x, *model.parameters()])
        torch.testing.assert_close(got, want)
        for a, b in zip(got_grads, want_grads):
            torch.testing.assert_close(a, b)
    history = fusegrad.compile_history()
    assert [r.kind for r in history] == ["static", "for every size"]
    label = history[1].program
    imported = open(f"{tmp_path}/{label}.imported.mlir").read()
    assert re.search(r'"dg.attention".*tensor<2x4x\?x8xf32, "s0">', imported)
    lowered = "".join(open(p).read() for p in glob.glob(f"{tmp_path}/{label}.cpu-llvm*.mlir"))
    assert "@aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(" in lowered
    assert "@aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu_backward(" in lowered


def _export_causal_for_cuda(tmp_path):
    """A causal attention exported for CUDA from CPU inputs into tmp_path/attention; returns
    its dump directory and the inputs."""
    q, k, v = _qkv(MIN_KEYS, batch=1, heads=1, queries=2, width=8)

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    dump = tmp_path / "dump"
    fusegrad.export(f, q, k, v, path=tmp_path / "attention", target="cuda",
                    options=CompileOptions(dump_dir=str(dump)))
    return dump, (q, k, v)


def test_cuda_export_keeps_attention_as_a_library_step(tmp_path):
    """Exported for CUDA from CPU inputs (no GPU needed): attention kept whole by the capture
    stays whole on that target (PyTorch's fused kernel runs it: an `attention` plan step),
    and no kernel computes its scores."""
    dump, _ = _export_causal_for_cuda(tmp_path)
    assert "dg.attention" in _imported(dump)
    kept = "".join(open(p).read() for p in glob.glob(f"{dump}/*attention-decomposed*"))
    assert '"dg.attention' in kept
    plans = [json.load(open(p)) for p in glob.glob(f"{tmp_path}/attention/**/plan.json",
                                                    recursive=True)]
    steps = [s["op"] for plan in plans for fn in plan["functions"].values() for s in fn["steps"]]
    assert "attention" in steps and "matmul" not in steps


def test_cuda_training_saves_no_scores(tmp_path):
    """A CUDA backward of a kept attention saves what PyTorch's fused backward reads: the
    inputs, the output and the log-sum-exp (f32), not the [B, H, L, S] scores
    (dg.saved_bytes, what dg-remat counts)."""
    dump, (q, k, v) = _export_causal_for_cuda(tmp_path)
    text = "".join(open(p).read() for p in glob.glob(f"{dump}/*remat-wrt*"))
    saved = {int(n) for n in re.findall(r"dg.saved_bytes = (\d+)", text)}
    lse = q.shape[0] * q.shape[1] * q.shape[2] * 4
    assert saved == {sum(x.numel() * 4 for x in (q, k, v, q)) + lse}

"""dg.attention on CUDA as PyTorch's fused SDPA kernels: the plan's attention steps run
against a fake driver on CPU tensors, PyTorch's CUDA attention ops replaced by fakes that
record what they are given (argument order, shapes, strides, dtypes) and compute the math
form; the capture keeps attention whole where a fused kernel runs. The end-to-end checks
against eager on a GPU are in test_cuda_gpu.py (test_attention_*)."""
from __future__ import annotations

import pytest
import torch
from mlir import ir
from torch.nn.attention import SDPBackend

from cuda_fakes import FakeDriver
from fusegrad.codegen.cuda.compile import compile_cuda
from fusegrad.context import make_context
from fusegrad.runtime import sdpa
from fusegrad.runtime.abi import TensorSig
from fusegrad.runtime.cuda import CudaProgram, LaunchPlan, PlanFunction

B, H, L, S, E = 2, 3, 5, 7, 8
SCALE = 0.3

_FORWARD = """
func.func @forward(%q: tensor<2x3x5x8xf32>, %k: tensor<2x3x7x8xf32>, %v: tensor<2x3x7x8xf32>, %m: tensor<2x1x5x7xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x5xf32>) {
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.3 : f64} : (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>, tensor<2x1x5x7xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x5xf32>)
  return %o#0, %o#1 : tensor<2x3x5x8xf32>, tensor<2x3x5xf32>
}
func.func @backward(%g: tensor<2x3x5x8xf32>, %q: tensor<2x3x5x8xf32>, %k: tensor<2x3x7x8xf32>, %v: tensor<2x3x7x8xf32>, %o: tensor<2x3x5x8xf32>, %l: tensor<2x3x5xf32>, %m: tensor<2x1x5x7xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>) {
  %d:3 = "dg.attention_grad"(%g, %q, %k, %v, %o, %l, %m) {causal = 1 : i64, scale = 0.3 : f64} : (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x5xf32>, tensor<2x1x5x7xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>)
  return %d#0, %d#1, %d#2 : tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>
}
"""

_UNMASKED = """
func.func @forward(%q: tensor<2x3x5x8xf32>, %k: tensor<2x3x7x8xf32>, %v: tensor<2x3x7x8xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x5xf32>) {
  %m = "dg.full"() {value = 0.0 : f64} : () -> tensor<1x1x1x1xf32>
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.3 : f64} : (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>, tensor<1x1x1x1xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x5xf32>)
  return %o#0, %o#1 : tensor<2x3x5x8xf32>, tensor<2x3x5xf32>
}
func.func @backward(%g: tensor<2x3x5x8xf32>, %q: tensor<2x3x5x8xf32>, %k: tensor<2x3x7x8xf32>, %v: tensor<2x3x7x8xf32>, %o: tensor<2x3x5x8xf32>, %l: tensor<2x3x5xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>) {
  %m = "dg.full"() {value = 0.0 : f64} : () -> tensor<1x1x1x1xf32>
  %d:3 = "dg.attention_grad"(%g, %q, %k, %v, %o, %l, %m) {causal = 1 : i64, scale = 0.3 : f64} : (tensor<2x3x5x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x5x8xf32>, tensor<2x3x5xf32>, tensor<1x1x1x1xf32>) -> (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>)
  return %d#0, %d#1, %d#2 : tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>
}
"""


@pytest.fixture(scope="module")
def plan() -> LaunchPlan:
    with make_context():
        return compile_cuda(ir.Module.parse(_FORWARD), cubin=False)


def _program(plan: LaunchPlan) -> CudaProgram:
    return CudaProgram(plan, driver=FakeDriver(), device="cpu", stream=lambda: 0, chip="sm_90")


def _inputs():
    torch.manual_seed(0)
    q, k, v = torch.randn(B, H, L, E), torch.randn(B, H, S, E), torch.randn(B, H, S, E)
    mask = torch.where(torch.rand(B, 1, L, S) < 0.2, float("-inf"), 0.0)
    return q, k, v, mask


def _eager(q, k, v, mask, g):
    """Eager's out and gradients (CPU, float64 math form)."""
    qkv = [x.double().requires_grad_() for x in (q, k, v)]
    causal = torch.ones(L, S, dtype=torch.bool).tril()
    full = mask.double().masked_fill(~causal, float("-inf"))
    out = torch.nn.functional.scaled_dot_product_attention(*qkv, attn_mask=full, scale=SCALE)
    out.backward(g.double())
    return out, [x.grad for x in qkv]


class Recorder:
    """Fakes of PyTorch's CUDA attention ops: each records its call and answers from the
    math form (sdpa._math, sdpa._math_grad), in the layout the real op returns."""

    def __init__(self, monkeypatch, kind) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []
        monkeypatch.setattr(sdpa, "backend", lambda *a: kind)
        monkeypatch.setattr(sdpa, "kernels", lambda: self)

    def __getattr__(self, name):
        def call(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            return getattr(self, name.replace("_scaled_dot_product_", "_"))(*args, **kwargs)
        return call

    @staticmethod
    def _mask(bias):
        return None if bias is None else bias.contiguous()

    def _flash_attention(self, q, k, v, dropout, causal, debug, *, scale):
        out, lse = sdpa._math(q, k, v, None, causal, scale)
        return out, lse, None, None, L, S, None, None, None

    def _flash_attention_backward(self, g, q, k, v, out, lse, cq, ck, mq, mk, dropout, causal,
                                 seed, offset, *, scale):
        return sdpa._math_grad(g, q, k, v, out, lse, None, causal, scale)

    def _efficient_attention(self, q, k, v, bias, want_lse, dropout, causal, *, scale):
        out, lse = sdpa._math(q, k, v, self._mask(bias), causal, scale)
        padded = torch.full((B, H, 32), float("nan"))
        padded[..., :L] = lse
        return out, padded, None, None

    def _efficient_attention_backward(self, g, q, k, v, bias, out, lse, seed, offset, dropout,
                                     grad_mask, causal, *, scale):
        return (*sdpa._math_grad(g, q, k, v, out, lse[..., :L], self._mask(bias), causal,
                                 scale), None)

    def _cudnn_attention(self, q, k, v, bias, want_lse, dropout, causal, debug, *, scale):
        out, lse = sdpa._math(q, k, v, self._mask(bias), causal, scale)
        return out, lse.unsqueeze(-1), None, None, L, S, None, None, None

    def _cudnn_attention_backward(self, g, q, k, v, out, lse, seed, offset, bias, cq, ck, mq,
                                 mk, dropout, causal, *, scale):
        return sdpa._math_grad(g, q, k, v, out, lse[..., 0], self._mask(bias), causal, scale)


def _run(plan, q, k, v, mask):
    program = _program(plan)
    out, lse = program.run("forward", q, k, v, mask)
    g = torch.randn(B, H, L, E)
    grads = program.run("backward", g, q, k, v, out, lse, mask)
    return out, lse, g, grads


@pytest.mark.parametrize("kind", [SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                                  SDPBackend.MATH])
def test_masked_attention_steps_match_eager(plan, monkeypatch, kind):
    q, k, v, mask = _inputs()
    recorder = Recorder(monkeypatch, kind)
    out, lse, g, grads = _run(plan, q, k, v, mask)
    want, want_grads = _eager(q, k, v, mask, g)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    for got, ref in zip(grads, want_grads):
        torch.testing.assert_close(got.double(), ref, atol=1e-5, rtol=1e-5)
    assert lse.shape == (B, H, L) and torch.isfinite(lse).all()
    if kind == SDPBackend.MATH:
        assert recorder.calls == []
        return
    (fwd, fargs, fkw), (bwd, bargs, bkw) = recorder.calls
    name = "efficient" if kind == SDPBackend.EFFICIENT_ATTENTION else "cudnn"
    assert (fwd, bwd) == (f"_scaled_dot_product_{name}_attention",
                          f"_scaled_dot_product_{name}_attention_backward")
    assert [tuple(x.shape) for x in fargs[:3]] == [(B, H, L, E), (B, H, S, E), (B, H, S, E)]
    assert fargs[4:7] == (True, 0.0, True) and fkw == {"scale": SCALE}
    bias = fargs[3]  # broadcast to [B, H, L, S], rows strided to a multiple of 16 (eager's)
    assert bias.shape == (B, H, L, S) and bias.stride() == (H * L * 16, L * 16, 16, 1)
    if kind == SDPBackend.EFFICIENT_ATTENTION:
        g_, q_, k_, v_, bias_, out_, rows = bargs[:7]
        assert rows.shape == (B, H, 32) and torch.equal(rows[..., :L], lse)
        assert bargs[9:12] == (0.0, [True, True, True, False], True)
        assert all(s.dtype == torch.int64 and s.shape == () for s in bargs[7:9])
    else:
        assert bargs[5].shape == (B, H, L, 1) and bargs[8].stride() == (H * L * 16, L * 16, 16, 1)
        assert bargs[9:15] == (None, None, L, S, 0.0, True)
    assert bkw == {"scale": SCALE}


def test_unmasked_flash_steps(monkeypatch):
    """A constant-0 mask is no mask: flash attention's arguments, its backward's random
    state as the forward's kinds, the log-sum-exp passed as stored."""
    with make_context():
        plan = compile_cuda(ir.Module.parse(_UNMASKED), cubin=False)
    steps = [s for f in plan.functions.values() for s in f.steps if s["op"].startswith("attention")]
    assert [s["mask"] for s in steps] == [None, None]
    recorder = Recorder(monkeypatch, SDPBackend.FLASH_ATTENTION)
    q, k, v, _ = _inputs()
    program = _program(plan)
    out, lse = program.run("forward", q, k, v)
    g = torch.randn(B, H, L, E)
    grads = program.run("backward", g, q, k, v, out, lse)
    want, want_grads = _eager(q, k, v, torch.zeros(1, 1, 1, 1), g)
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
    for got, ref in zip(grads, want_grads):
        torch.testing.assert_close(got.double(), ref, atol=1e-5, rtol=1e-5)
    (_, fargs, fkw), (_, bargs, bkw) = recorder.calls
    assert fargs[3:] == (0.0, True, False) and fkw == {"scale": SCALE}
    assert torch.equal(bargs[5], lse) and bargs[6:12] == (None, None, L, S, 0.0, True)
    seed, offset = bargs[12:14]
    assert (seed.dtype, tuple(seed.shape), offset.dtype, tuple(offset.shape)) == \
        (torch.uint64, (2,), torch.uint64, ())


def test_attention_step_at_run_time_sizes(monkeypatch):
    """The steps read their shapes off the tensors: one plan of symbolic sizes runs at two
    (a function of run-time sizes holding an attention step, as an artifact may)."""
    from fusegrad.runtime.abi import parse_dim
    s0, s1 = parse_dim("s0"), parse_dim("s1")
    sig = lambda *shape: TensorSig(tuple(shape), "f32")  # noqa: E731
    steps = [{"op": "attention", "q": "arg0", "k": "arg1", "v": "arg2", "mask": None,
              "out": "arg3", "lse": "arg4", "scale": SCALE, "causal": False}]
    f = PlanFunction("forward", [sig(s0, H, s1, E), sig(s0, H, s1, E), sig(s0, H, s1, E)],
                     [sig(s0, H, s1, E), sig(s0, H, s1)], steps)
    plan = LaunchPlan({"forward": f}, {})
    plan = LaunchPlan.from_json(plan.to_json(), lambda name: b"")
    recorder = Recorder(monkeypatch, SDPBackend.MATH)
    program = _program(plan)
    for b, l in ((1, 4), (3, 9)):
        q, k, v = (torch.randn(b, H, l, E) for _ in range(3))
        out, lse = program.run("forward", q, k, v)
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=SCALE)
        torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
        assert lse.shape == (b, H, l)
    assert recorder.calls == []


_RUN_TIME = """
func.func @forward(%q: tensor<?x3x?x8xf32, "s0, s1">, %k: tensor<?x3x?x8xf32, "s0, s2">, %v: tensor<?x3x?x8xf32, "s0, s2">, %m: tensor<?x1x?x?xf32, "s0, s1, s2">) -> (tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?xf32, "s0, s1">) {
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.3 : f64} : (tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?x8xf32, "s0, s2">, tensor<?x3x?x8xf32, "s0, s2">, tensor<?x1x?x?xf32, "s0, s1, s2">) -> (tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?xf32, "s0, s1">)
  return %o#0, %o#1 : tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?xf32, "s0, s1">
}
func.func @backward(%g: tensor<?x3x?x8xf32, "s0, s1">, %q: tensor<?x3x?x8xf32, "s0, s1">, %k: tensor<?x3x?x8xf32, "s0, s2">, %v: tensor<?x3x?x8xf32, "s0, s2">, %o: tensor<?x3x?x8xf32, "s0, s1">, %l: tensor<?x3x?xf32, "s0, s1">, %m: tensor<?x1x?x?xf32, "s0, s1, s2">) -> (tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?x8xf32, "s0, s2">, tensor<?x3x?x8xf32, "s0, s2">) {
  %d:3 = "dg.attention_grad"(%g, %q, %k, %v, %o, %l, %m) {causal = 1 : i64, scale = 0.3 : f64} : (tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?x8xf32, "s0, s2">, tensor<?x3x?x8xf32, "s0, s2">, tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?xf32, "s0, s1">, tensor<?x1x?x?xf32, "s0, s1, s2">) -> (tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?x8xf32, "s0, s2">, tensor<?x3x?x8xf32, "s0, s2">)
  return %d#0, %d#1, %d#2 : tensor<?x3x?x8xf32, "s0, s1">, tensor<?x3x?x8xf32, "s0, s2">, tensor<?x3x?x8xf32, "s0, s2">
}
"""


def test_run_time_sizes_compile_to_attention_steps(monkeypatch):
    """A program for every size runs attention as the fused kernels' steps too: the
    outlined call writes into destinations of the caller's sizes, which the steps fill
    with PyTorch's kernels, at each size (no [B, H, L, S] scores, no matmul step)."""
    with make_context():
        plan = compile_cuda(ir.Module.parse(_RUN_TIME), cubin=False)
    ops = [s["op"] for f in plan.functions.values() for s in f.steps]
    assert ops.count("attention") == 1 and ops.count("attention_grad") == 1
    assert "matmul" not in ops
    Recorder(monkeypatch, SDPBackend.MATH)
    program = _program(plan)
    torch.manual_seed(0)
    for b, l, s in ((1, 4, 6), (3, 9, 5)):
        q, k, v = torch.randn(b, H, l, E), torch.randn(b, H, s, E), torch.randn(b, H, s, E)
        mask = torch.where(torch.rand(b, 1, l, s) < 0.2, float("-inf"), 0.0)
        out, lse = program.run("forward", q, k, v, mask)
        g = torch.randn(b, H, l, E)
        grads = program.run("backward", g, q, k, v, out, lse, mask)
        qkv = [x.double().requires_grad_() for x in (q, k, v)]
        full = mask.double().masked_fill(~torch.ones(l, s, dtype=torch.bool).tril(),
                                         float("-inf"))
        want = torch.nn.functional.scaled_dot_product_attention(*qkv, attn_mask=full,
                                                                scale=SCALE)
        want.backward(g.double())
        assert out.shape == (b, H, l, E) and lse.shape == (b, H, l)
        torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-5)
        for got, x in zip(grads, qkv):
            torch.testing.assert_close(got.double(), x.grad, atol=1e-5, rtol=1e-5)


def test_plan_rejects_an_attention_step_before_its_buffers():
    steps = [{"op": "attention", "q": "arg0", "k": "t9", "v": "arg0", "mask": None,
              "out": "arg1", "lse": "arg2", "scale": 1.0, "causal": False}]
    f = PlanFunction("f", [TensorSig((1, 1, 2, 4), "f32")],
                     [TensorSig((1, 1, 2, 4), "f32"), TensorSig((1, 1, 2), "f32")], steps)
    with pytest.raises(Exception, match="buffer 't9' used before it is defined"):
        LaunchPlan({"f": f}, {}).validate()


def test_capture_keeps_fused_attention(monkeypatch):
    """A CUDA capture records scaled_dot_product_attention as fusegrad::attention where eager
    runs a fused kernel (here: said so), and the importer makes it dg.attention; otherwise
    the math form (matmuls)."""
    from fusegrad.frontend import cuda_attention
    from fusegrad.frontend.capture import capture
    from fusegrad.frontend.importer import import_graph

    def fn(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    inputs = [torch.randn(B, H, L, E, dtype=torch.bfloat16) for _ in range(3)]
    for keep in (True, False):
        monkeypatch.setattr(cuda_attention, "fused", lambda *a, keep=keep, **kw: keep)
        with cuda_attention.FusedAttention():
            captured = capture(fn, inputs)
        targets = {str(n.target) for n in captured.gm.graph.nodes}
        assert ("fusegrad.attention.default" in targets) == keep
        if keep:
            with make_context():
                text = str(import_graph(captured.gm))
            assert '"dg.attention"' in text and "bf16" in text



def _eager_checks(monkeypatch, **answers):
    """torch.backends.cuda's fused-kernel checks (False in a CPU build) answering as
    given; returns the list of (backend, query dtype) each was asked with."""
    asked = []
    for name in ("flash", "efficient", "cudnn"):
        def check(params, debug=False, name=name):
            asked.append((name, params.query.dtype))
            return answers.get(name, False)
        monkeypatch.setattr(torch.backends.cuda, f"can_use_{name}_attention", check)
    return asked


def _causal_attention(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


@pytest.mark.parametrize("flash", [True, False], ids=["fused", "math"])
def test_capture_asks_eagers_choice_of_the_traced_tensors(monkeypatch, flash):
    """The capture asks eager's kernel checks of the fake tensors it traces, and records
    nothing of that question (`aten._fused_sdp_choice` in the graph is what an H200 run
    found: the importer split the graph around it); where a fused kernel passes, the
    call is kept whole, else it traces in the math form."""
    from fusegrad.frontend import cuda_attention
    from fusegrad.frontend.capture import capture
    asked = _eager_checks(monkeypatch, flash=flash)
    inputs = [torch.randn(B, H, L, E) for _ in range(3)]
    with cuda_attention.FusedAttention():
        captured = capture(_causal_attention, inputs)
    targets = {str(n.target) for n in captured.gm.graph.nodes}
    assert not any("sdp" in t for t in targets)
    assert ("fusegrad.attention.default" in targets) == flash
    assert ("aten.bmm.default" in targets) == (not flash)
    assert asked and asked[0] == ("flash", torch.float32)


def test_eager_choice_follows_enabled_backends_and_priority(monkeypatch):
    """Eager's select_sdp_backend: the first enabled backend in priority order whose
    checks pass; math where math comes first."""
    from fusegrad.frontend.cuda_attention import eager_choice
    _eager_checks(monkeypatch, efficient=True, cudnn=True)
    q = torch.randn(B, H, L, E)
    every = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH,
             SDPBackend.CUDNN_ATTENTION]
    default = every  # eager's default order
    assert eager_choice(q, q, q, None, True, False, every, default) == "efficient_attention"
    no_efficient = [b for b in every if b != SDPBackend.EFFICIENT_ATTENTION]
    assert eager_choice(q, q, q, None, True, False, no_efficient, default) == "math"
    cudnn_first = [SDPBackend.CUDNN_ATTENTION, *default[:3]]
    assert eager_choice(q, q, q, None, True, False, no_efficient,
                        cudnn_first) == "cudnn_attention"
    assert eager_choice(q, q, q, None, True, False, [SDPBackend.FLASH_ATTENTION],
                        default) == "math"


def test_capture_casts_as_autocast_before_choosing(monkeypatch):
    """Under autocast the mode sees the call's arguments before autocast casts them
    (LLaMA's RoPE leaves f32 queries and keys beside bf16 values): they are cast to the
    autocast dtype first, as eager's call gets them, so the choice and the kept op are
    bf16."""
    from fusegrad.frontend import cuda_attention
    from fusegrad.frontend.capture import capture
    from fusegrad.frontend.importer import import_graph
    asked = _eager_checks(monkeypatch, flash=True)
    inputs = [torch.randn(B, H, L, E), torch.randn(B, H, L, E),
              torch.randn(B, H, L, E, dtype=torch.bfloat16)]
    with torch.autocast("cpu", dtype=torch.bfloat16), cuda_attention.FusedAttention():
        captured = capture(_causal_attention, inputs)
    assert asked[0] == ("flash", torch.bfloat16)
    with make_context():
        text = str(import_graph(captured.gm))
    (line,) = [x for x in text.splitlines() if '"dg.attention"' in x]
    assert "(tensor<2x3x5x8xbf16>, tensor<2x3x5x8xbf16>, tensor<2x3x5x8xbf16>," in line

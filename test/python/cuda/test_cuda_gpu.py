"""The CUDA target on a real GPU: compiled kernels against eager PyTorch on CUDA.

Skipped, with the reason, where there is no CUDA driver, no GPU or no
cuda-bindings (CI). `benchmarks/cuda_kernels.py` runs the same checks (and the
bandwidth measurements, and three models' training graphs) on a GPU machine
without MLIR, from artifacts built elsewhere.
"""
from __future__ import annotations

import importlib.util
import os

import pytest

from fusegrad.runtime.cuda import driver_available

_OK, _WHY = driver_available()
if not _OK:
    print(f"test_cuda_gpu: skipped: {_WHY}")
    pytest.skip(_WHY, allow_module_level=True)

import torch  # noqa: E402
from mlir import ir  # noqa: E402

from fusegrad.context import make_context  # noqa: E402
from fusegrad.codegen.cuda.compile import compile_cuda  # noqa: E402
from fusegrad.pass_manager import run_pipeline  # noqa: E402
from fusegrad.runtime.cuda import CudaProgram  # noqa: E402

from e2e import test_opinfo as opinfo  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
_spec = importlib.util.spec_from_file_location(
    "cuda_kernels_bench", os.path.join(REPO, "benchmarks", "cuda_kernels.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

@pytest.fixture(autouse=True)
def exact_cudnn_references():
    """Eager convolutions on CUDA round their operands to TF32 (10-bit mantissas) by
    default (`torch.backends.cudnn.allow_tf32`); fusegrad's own convolution kernels (3-d,
    transposed) compute in float32. The references are float32 too."""
    cudnn = torch.backends.cudnn
    # flags(): torch.testing's OpInfo database forbids setting them directly
    with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark,
                     deterministic=cudnn.deterministic, allow_tf32=False):
        yield


SMALL = [n for n, (_, _, _, f) in bench.CASES.items()
         if "_big" not in n and not n.endswith(("_wide", "_narrow"))]


@pytest.mark.parametrize("name", SMALL)
def test_against_eager(name):
    text, pre, opts, fname = bench.CASES[name]
    with make_context():
        module = ir.Module.parse(text)
        run_pipeline(module, pre)
        plan = compile_cuda(module, **opts)
    prog = CudaProgram(plan)
    f = plan.functions[fname]
    xs = bench._inputs(f.inputs, None)
    outs = prog.run(fname, *xs)
    for o, r in zip(outs, bench.REFS[fname](*xs)):
        torch.testing.assert_close(o, r.to(o.dtype), rtol=1e-5, atol=1e-5)
    prog.close()


def _mlp_on_cuda():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                               torch.nn.Linear(64, 10)).cuda()


def test_compiled_model_trains_on_cuda():
    """fusegrad.compile picks the CUDA target from where the model and inputs are."""
    import copy
    import warnings

    import fusegrad
    model, x = _mlp_on_cuda(), torch.randn(16, 32, device="cuda")
    ref = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fusegrad.FusegradFallbackWarning)
        out = fusegrad.compile(model)(x)
    want = ref(x)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    out.square().sum().backward()
    want.square().sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)


def test_cuda_graphs_train_like_eager():
    """cuda_graphs=True: the second call captures, later calls replay; each call's
    inputs are its own, outputs are fresh tensors, and SGD steps match eager, also
    after the parameters move to new memory (a capture again)."""
    import copy

    import fusegrad
    model = _mlp_on_cuda()
    ref = copy.deepcopy(model)
    compiled = fusegrad.compile(model, cuda_graphs=True)
    kept = []
    for step in range(5):
        if step == 3:
            for p in model.parameters():
                p.data = p.data.clone()
        x = torch.randn(16, 32, device="cuda")
        outs = [compiled(x), ref(x)]
        kept.append([o.detach() for o in outs])
        losses = [o.square().mean() for o in outs]
        for m, loss in zip((model, ref), losses):
            loss.backward()
            with torch.no_grad():
                for p in m.parameters():
                    p -= 0.1 * p.grad
                    p.grad = None
        torch.testing.assert_close(losses[0], losses[1], rtol=1e-4, atol=1e-5)
    for got, want in kept:  # earlier outputs are not overwritten by later replays
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_exported_artifact_replays_cuda_graphs(tmp_path):
    import fusegrad
    from fusegrad.runtime import load
    model = _mlp_on_cuda()
    x = torch.randn(16, 32, device="cuda")
    path = fusegrad.export(model.cpu(), x.cpu(), path=tmp_path / "mlp", target="cuda")
    loaded = load(path, cuda_graphs=True)
    model.cuda()
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(16, 32, device="cuda")
            torch.testing.assert_close(loaded(x), model(x), rtol=1e-4, atol=1e-4)


def test_exported_artifact_runs_on_cuda(tmp_path):
    import fusegrad
    from fusegrad.runtime import load
    model = _mlp_on_cuda()
    x = torch.randn(16, 32, device="cuda")
    path = fusegrad.export(model.cpu(), x.cpu(), path=tmp_path / "mlp", target="cuda")
    loaded = load(path)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model.cuda()(x), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,graphs", [("gpt2", False), ("llama", False), ("bert", False),
                                         ("t5", False), ("gpt2", True)])
def test_hf_model_trains_on_cuda_like_eager(name, graphs):
    """Embeddings (checked gathers), their atomic scatter-add gradients, attention and the
    loss on the GPU: five AdamW steps match eager CUDA (also replayed from CUDA graphs)."""
    import copy
    import warnings

    import fusegrad
    from e2e.test_hf_models import MODELS as HF_MODELS, train

    pytest.importorskip("transformers")
    torch.manual_seed(0)
    model, batch = HF_MODELS[name]()
    model, batch = model.cuda(), {k: v.cuda() for k, v in batch.items()}
    reference = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", fusegrad.FusegradFallbackWarning)
        runs = [train(m, fn, batch, 5) for m, fn in ((model, fusegrad.compile(
                    model, cuda_graphs=graphs)),
                                                     (reference, reference))]
    torch.testing.assert_close(runs[0], runs[1], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["softmax_scores", "colsum", "total", "mlp", "ln_vjp",
                                  "embedding_grad"])
def test_kernels_of_run_time_sizes_match_the_reference(name):
    """A program of symbolic sizes (run_time_size_programs.py) compiled once runs at three
    shapes, each against the reference interpreter (eager torch on the CPU); ln_vjp is a
    layer norm's forward and backward."""
    from run_time_size_programs import EMULATED, PROGRAMS, inputs_at, reference

    text, pre = PROGRAMS[name]
    with make_context():
        module = ir.Module.parse(text)
        run_pipeline(module, pre)
        plan = compile_cuda(module)
    prog = CudaProgram(plan)
    for rows, cols in ((1, 3), (37, 300), (700, 1030)):
        inputs = inputs_at(name, rows, cols)
        got = prog.run(EMULATED[name][0], *(x.cuda() for x in inputs))
        for a, b in zip(got, reference(name, inputs)):
            torch.testing.assert_close(a.cpu(), b, rtol=1e-4, atol=1e-4,
                                       msg=lambda m: f"{name} at {rows}x{cols}: {m}")
    prog.close()


def _layer_on_cuda():
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                            dropout=0.0, batch_first=True).cuda()


@pytest.mark.parametrize("name,graphs", [("mlp", False), ("transformer", False),
                                         ("mlp", True)])
@pytest.mark.usefixtures("no_fallback")
def test_one_program_for_every_size_trains_like_eager(name, graphs):
    """fusegrad.compile(dynamic=True) compiles each graph once for every size, forward and
    backward; SGD steps at batch sizes (the MLP) or sequence lengths (a transformer
    layer) that change every step match eager's, also replayed from CUDA graphs (one
    per size)."""
    import copy

    import fusegrad
    from fusegrad.frontend import compile_history

    model = _mlp_on_cuda() if name == "mlp" else _layer_on_cuda()
    ref = copy.deepcopy(model)
    compile_history.clear()
    compiled = fusegrad.compile(model, dynamic=True, cuda_graphs=graphs)
    shapes = [(3, 32), (17, 32), (64, 32), (3, 32), (17, 32)] if name == "mlp" else \
        [(2, 5, 32), (2, 12, 32), (2, 33, 32), (2, 5, 32), (2, 12, 32)]
    for step, shape in enumerate(shapes):
        x = torch.randn(shape, device="cuda")
        outs = [compiled(x), ref(x)]
        torch.testing.assert_close(outs[0], outs[1], rtol=1e-4, atol=1e-4,
                                   msg=lambda m: f"step {step} at {shape}: {m}")
        for m, out in zip((model, ref), outs):
            out.square().mean().backward()
            with torch.no_grad():
                for p in m.parameters():
                    p -= 0.1 * p.grad
                    p.grad = None
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
        if step == 0:
            programs = compile_history.compile_history()
    assert programs and all(r.kind == "for every size" for r in programs), programs
    assert len(compile_history.compile_history()) == len(programs)  # no compile after


@pytest.mark.parametrize("graphs", [False, True])
def test_out_of_range_embedding_index_raises_on_a_later_call(graphs):
    import fusegrad
    from fusegrad.runtime.cpu import OutOfRangeIndex

    emb = torch.nn.Embedding(10, 4).cuda()
    compiled = fusegrad.compile(emb, cuda_graphs=graphs)
    with torch.no_grad():
        compiled(torch.tensor([1, 2], device="cuda"))
        compiled(torch.tensor([3, 12], device="cuda"))  # out of range: clamped, flagged
        torch.cuda.synchronize()
        with pytest.raises(OutOfRangeIndex, match="index out of range"):
            compiled(torch.tensor([1, 2], device="cuda"))
        compiled(torch.tensor([1, 2], device="cuda"))  # reported once


# ------------------------------------------------ OpInfo samples and gradients on CUDA

def _cuda_functions(module: ir.Module):
    """test_opinfo's compile step for the CUDA target: name -> function of CUDA tensors."""
    import functools

    from compile_options import OPTIONS
    if OPTIONS["fusion"]:
        run_pipeline(module, "dg-fuse{row-temps=0}")  # as Program does for CUDA
    program = CudaProgram(compile_cuda(module))

    def run(name, *tensors):
        return program.run(name, *[t.to("cuda") for t in tensors])
    return lambda name: functools.partial(run, name)


@pytest.mark.parametrize("claim", opinfo.DETERMINISTIC, ids=lambda c: c.key)
def test_opinfo_float32_on_cuda(claim):
    op = opinfo.OPINFOS[claim.key]
    opinfo.check_op(claim, torch.float32, opinfo.samples_of(op, torch.float32, "cuda"),
                    compile=_cuda_functions)


@pytest.mark.parametrize("claim", opinfo.GRAD_CLAIMS, ids=lambda c: c.key)
@pytest.mark.usefixtures("no_fallback")
def test_compiled_gradients_on_cuda(claim):
    opinfo.check_gradients(claim, "cuda")

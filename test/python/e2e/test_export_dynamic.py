"""fusegrad.export with dynamic dims (`dynamic_shapes`, as torch.export takes them): one
artifact runs every size of those dims with torch alone, forward and training; the
loaded artifact checks fixed dims, shared dims and ranges, and export rejects bad specs
and dims the function specializes."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.export import Dim

import fusegrad
import fusegrad.codegen.cuda.compile as cuda_compile
from fusegrad.aot_export import ExportError
from fusegrad.runtime import load
from fusegrad.runtime.exported import METADATA, ArtifactError

WIDTH = 16


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, WIDTH), torch.nn.GELU(),
                               torch.nn.LayerNorm(WIDTH), torch.nn.Linear(WIDTH, 4))


def _attention():
    """A transformer-ish layer as a function of its closure: layer norm, one attention
    head (softmax(q @ k^T) @ v) with an additive key bias per batch row, a residual."""
    torch.manual_seed(0)
    norm = torch.nn.LayerNorm(WIDTH)
    wqkv = (torch.randn(WIDTH, 3 * WIDTH) / 4).requires_grad_()
    wo = (torch.randn(WIDTH, WIDTH) / 4).requires_grad_()

    def layer(x, bias):
        q, k, v = (norm(x) @ wqkv).chunk(3, dim=-1)
        scores = q @ k.transpose(-1, -2) / WIDTH ** 0.5 + bias[:, None, :]
        return x + torch.softmax(scores, dim=-1) @ v @ wo
    return layer, {"norm.weight": norm.weight, "norm.bias": norm.bias, "wqkv": wqkv, "wo": wo}


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """The MLP with a dynamic batch of at most 32 (a Dim), the attention layer with a
    dynamic batch and sequence shared by both inputs (names, keyed by argument)."""
    root = tmp_path_factory.mktemp("dynamic")
    mlp = fusegrad.export(_mlp(), torch.randn(5, 8), path=root / "mlp",
                          dynamic_shapes=[{0: Dim("batch", max=32)}])
    layer, _ = _attention()
    attention = fusegrad.export(
        layer, torch.randn(3, 5, WIDTH, requires_grad=True), torch.randn(3, 5), path=root / "attention",
        dynamic_shapes={"x": {0: "batch", 1: "seq"}, "bias": {0: "batch", 1: "seq"}})
    return root, mlp, attention


MLP_BATCHES = (1, 3, 17)
ATTENTION_SHAPES = ((1, 2), (2, 7), (4, 3))  # (batch, seq); seq starts at 2 (see below)


def test_one_artifact_trains_at_every_size_without_mlir(artifacts):
    """A process that cannot import MLIR runs both artifacts, forward and backward, at
    three sizes each (batch 1 included), and matches eager PyTorch."""
    root, mlp_path, attention_path = artifacts
    torch.manual_seed(1)
    mlp_inputs = [torch.randn(n, 8) for n in MLP_BATCHES]
    attention_inputs = [(torch.randn(b, s, WIDTH), torch.randn(b, s)) for b, s in ATTENTION_SHAPES]
    torch.save([mlp_inputs, attention_inputs], root / "inputs.pt")
    script = textwrap.dedent(f"""
        import sys
        sys.modules["mlir"] = None  # any MLIR import fails
        import torch
        from fusegrad.runtime import load
        mlp, attention = load({str(mlp_path)!r}), load({str(attention_path)!r})
        mlp_inputs, attention_inputs = torch.load({str(root / 'inputs.pt')!r})
        results = []
        for x in mlp_inputs:
            y = mlp(x)
            y.square().sum().backward()
            results.append((y.detach(), {{n: p.grad.clone() for n, p in
                                          mlp.state_dict(keep_vars=True).items()}}, None))
            for p in mlp.parameters:
                p.grad = None
        for x, bias in attention_inputs:
            x.requires_grad_()
            y = attention(x, bias)
            (y * y.detach().cos()).sum().backward()
            results.append((y.detach(), {{n: p.grad.clone() for n, p in
                                          attention.state_dict(keep_vars=True).items()}}, x.grad))
            for p in attention.parameters:
                p.grad = None
        torch.save(results, {str(root / 'results.pt')!r})
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    results = iter(torch.load(root / "results.pt"))
    model = _mlp()
    for x in mlp_inputs:
        y, grads, _ = next(results)
        want = model(x)
        want.square().sum().backward()
        torch.testing.assert_close(y, want.detach())
        for name, p in model.named_parameters():
            torch.testing.assert_close(grads[name], p.grad, msg=lambda m: f"{name}: {m}")
        model.zero_grad()
    layer, parameters = _attention()
    for x, bias in attention_inputs:
        y, grads, x_grad = next(results)
        x = x.clone().requires_grad_()
        want = layer(x, bias)
        (want * want.detach().cos()).sum().backward()
        torch.testing.assert_close(y, want.detach())
        torch.testing.assert_close(x_grad, x.grad)
        for name, p in parameters.items():
            torch.testing.assert_close(grads[name], p.grad, atol=1e-5, rtol=1e-4,
                                       msg=lambda m: f"{name}: {m}")
            p.grad = None


def test_the_artifact_records_its_dims(artifacts):
    """export.json: the inputs' dynamic dims as dg's sizes, each size's name and range.
    The attention's sequence starts at 2: torch's trace of `q @ k^T` reshapes the
    transposed operand by another path at 1, so its guard excludes 1."""
    _, mlp_path, attention_path = artifacts
    with open(f"{attention_path}/{METADATA}") as f:
        meta = json.load(f)
    assert meta["version"] == 1
    assert meta["inputs"] == [{"shape": ["s0", "s1", WIDTH], "dtype": "f32"},
                              {"shape": ["s0", "s1"], "dtype": "f32"}]
    assert meta["sizes"] == {"s0": {"name": "batch", "min": 1, "max": None},
                             "s1": {"name": "seq", "min": 2, "max": None}}
    attention = load(attention_path)
    assert attention.inputs == [(("batch", "seq", WIDTH), torch.float32),
                                (("batch", "seq"), torch.float32)]
    assert attention.dynamic_dims == {"batch": (1, None), "seq": (2, None)}
    assert load(mlp_path).dynamic_dims == {"batch": (1, 32)}


def test_the_loaded_artifact_checks_dims(artifacts):
    _, mlp_path, attention_path = artifacts
    mlp, attention = load(mlp_path), load(attention_path)
    with torch.no_grad():
        with pytest.raises(ArtifactError, match=r"input #0 dim 1 is 9, expected 8 \(a fixed dim: "
                                                r"input #0 is \(4, 9\), expected \(batch, 8\)\)"):
            mlp(torch.randn(4, 9))
        with pytest.raises(ArtifactError, match=r"input #0 is \(4,\) torch.float32 on cpu, "
                                                r"expected \(batch, 8\) torch.float32"):
            mlp(torch.randn(4))
        with pytest.raises(ArtifactError, match=r"input #0 dim 0 is 40, outside batch's range "
                                                r"\[1, 32\]"):
            mlp(torch.randn(40, 8))
        with pytest.raises(ArtifactError, match=r"input #1 dim 0 is 2, expected batch = 3, its "
                                                r"size at input #0 dim 0"):
            attention(torch.randn(3, 5, WIDTH), torch.randn(2, 5))
        with pytest.raises(ArtifactError, match=r"input #1 dim 1 is 6, expected seq = 5"):
            attention(torch.randn(3, 5, WIDTH), torch.randn(3, 6))
        with pytest.raises(ArtifactError, match=r"input #0 dim 1 is 1, outside seq's range "
                                                r"\[2, inf\]"):
            attention(torch.randn(3, 1, WIDTH), torch.randn(3, 1))


def _sum(x, y=None):
    return x.sum()


@pytest.mark.parametrize("spec, error", [
    ([{2: "b"}, None], r"input #0 \(x\): dim 2 is out of range for a tensor of 2 dims"),
    (["b", None], r"input #0 \(x\): expected None or a dict \{dim: Dim or name\}, got a str"),
    ({"z": {0: "b"}}, r"\['z'\] are not among the inputs' names \['x', 'y'\]"),
    ([{0: "b"}], r"1 entries for 2 inputs"),
    ([{0: Dim("b") * 2}, None], r"input #0 \(x\) dim 0: 2\*b is derived from another Dim"),
    ([{0: Dim.AUTO}, None], r"input #0 \(x\) dim 0: expected a torch.export.Dim or a name"),
    ([{0: Dim("b", min=8)}, None], r"input #0 \(x\) dim 0: the example's size 5 is outside "
                                   r"b's range \[8, inf\]"),
    ([{0: Dim("b", max=9)}, {0: Dim("b")}], r"input #1 \(y\) dim 0: b is declared as b in "
                                            r"\[1, inf\] here and as b in \[1, 9\] at input #0"),
    ([{0: "b"}, {1: "b"}], r"input #1 \(y\) dim 1: the example's size 4 differs from b's size 5"),
    ([{1: 3}, None], r"input #0 \(x\) dim 1 is fixed to 3, but the example's size is 4"),
])
def test_bad_specs_name_the_input_and_dim(tmp_path, spec, error):
    with pytest.raises(ExportError, match="dynamic_shapes: " + error):
        fusegrad.export(_sum, torch.randn(5, 4), torch.randn(5, 4), path=tmp_path / "f",
                        dynamic_shapes=spec)


def test_a_dim_the_function_specializes_is_an_error(tmp_path):
    with pytest.raises(ExportError, match=r"the function constrains the dynamic dim batch "
                                          r"\(input #0 dim 0\): .*specialized it to be a "
                                          r"constant \(5\)"):
        fusegrad.export(lambda x: x + torch.ones(5, 3), torch.randn(5, 3), path=tmp_path / "f",
                        dynamic_shapes=[{0: "batch"}])


def test_a_dim_squeezed_starts_at_two_or_is_an_error(tmp_path):
    """A squeeze keeps a dynamic dim at 1 where eager drops it: a dim without a lower bound
    of its own starts at 2, one declared from 1 is an error."""
    def f(x):
        return x.squeeze(0) * 2
    path = fusegrad.export(f, torch.randn(3, 4), path=tmp_path / "f", dynamic_shapes=[{0: "n"}])
    m = load(path)
    assert m.dynamic_dims == {"n": (2, None)}
    torch.testing.assert_close(m(torch.ones(2, 4)), torch.full((2, 4), 2.0))
    with pytest.raises(ExportError, match=r"constrains the dynamic dim n \(input #0 dim 0\): "
                                          r"its trace needs Ne\(n, 1\)"):
        fusegrad.export(f, torch.randn(3, 4), path=tmp_path / "g",
                        dynamic_shapes=[{0: Dim("n", min=1)}])


def test_cuda_says_what_does_not_compile_at_run_time_sizes(tmp_path, monkeypatch):
    """Where the CUDA compiler cannot compile run-time sizes, export says so with its reason."""
    def unsupported(*args, **kwargs):
        raise NotImplementedError("memref.dim on the host")
    monkeypatch.setattr(cuda_compile, "compile_cuda", unsupported)
    with pytest.raises(ExportError, match=r"does not compile for target='cuda' with dynamic "
                                          r"dims yet \(NotImplementedError: memref.dim on the "
                                          r"host\)"):
        fusegrad.export(lambda x: x.exp(), torch.randn(3, 4), path=tmp_path / "f",
                        target="cuda", dynamic_shapes=[{0: "batch"}])


def test_cuda_artifact_of_dynamic_dims_launches_each_size(tmp_path):
    """Exported without a GPU for a dynamic batch: one launch plan; loaded against a fake
    driver, calls at two batch sizes launch the same kernels with grids for their sizes,
    and outputs (and a training step's gradients) have the call's shapes."""
    from cuda_fakes import FakeDriver

    model = _mlp()
    path = fusegrad.export(model, torch.randn(5, 8), path=tmp_path / "mlp", target="cuda",
                           dynamic_shapes=[{0: Dim("batch", max=4096)}])
    meta = json.loads((tmp_path / "mlp" / METADATA).read_text())
    assert meta["target"] == "cuda" and meta["inputs"][0]["shape"] == ["s0", 8]
    driver = FakeDriver()
    m = load(path, device="cpu", driver=driver, stream=lambda: 0, chip="sm_90")
    grids = {}
    for batch in (3, 3000):
        start = len(driver.launches)
        with torch.no_grad():
            assert m(torch.randn(batch, 8)).shape == (batch, 4)
        grids[batch] = [launch["grid"] for launch in driver.launches[start:]]
    assert len(grids[3]) == len(grids[3000]) > 0 and grids[3] != grids[3000]
    assert sum(g[0] * g[1] * g[2] for g in grids[3000]) > sum(g[0] * g[1] * g[2]
                                                              for g in grids[3])
    m(torch.randn(7, 8)).sum().backward()
    assert all(p.grad is not None and p.grad.shape == p.shape for p in m.parameters)


def test_artifacts_without_sizes_still_load(tmp_path):
    """Artifacts written before dynamic dims (no `sizes` in export.json) load as before."""
    path = fusegrad.export(lambda x: x * 2, torch.randn(3), path=tmp_path / "f")
    meta = json.loads((tmp_path / "f" / METADATA).read_text())
    assert meta.pop("sizes") == {}
    (tmp_path / "f" / METADATA).write_text(json.dumps(meta))
    m = load(path)
    assert m.inputs == [((3,), torch.float32)] and m.dynamic_dims == {}
    torch.testing.assert_close(m(torch.ones(3)), torch.full((3,), 2.0))
    with pytest.raises(ArtifactError, match=r"input #0 is \(4,\) torch.float32 on cpu, "
                                            r"expected \(3,\) torch.float32"):
        m(torch.ones(4))

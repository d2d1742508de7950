"""fusegrad.export and fusegrad.runtime.load: artifacts that run without MLIR (CPU), and
CUDA artifacts up to the driver (a fake one)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import fusegrad
from cuda_fakes import FakeDriver
from fusegrad.aot_export import ExportError
from fusegrad.runtime import load
from fusegrad.runtime.exported import METADATA, ArtifactError


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                               torch.nn.Linear(16, 4))


@pytest.fixture(scope="module")
def mlp_artifact(tmp_path_factory):
    model, x = _mlp(), torch.randn(5, 8)
    path = fusegrad.export(model, x, path=tmp_path_factory.mktemp("export") / "mlp")
    return model, x, path


def test_cpu_artifact_runs_without_mlir(mlp_artifact, tmp_path):
    """A second process that cannot import MLIR loads the artifact, runs forward and
    backward, and matches eager PyTorch."""
    model, x, path = mlp_artifact
    torch.save(x, tmp_path / "x.pt")
    script = textwrap.dedent(f"""
        import sys
        sys.modules["mlir"] = None  # any MLIR import fails
        import torch
        from fusegrad.runtime import load
        m = load({str(path)!r})
        x = torch.load({str(tmp_path / 'x.pt')!r})
        y = m(x)
        y.square().sum().backward()
        torch.save([y.detach(), [p.grad for p in m.parameters]], {str(tmp_path / 'out.pt')!r})
        assert not any(name == "mlir" or name.startswith("mlir.") for name in sys.modules
                       if sys.modules[name] is not None)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    y, grads = torch.load(tmp_path / "out.pt")
    want = model(x)
    want.square().sum().backward()
    torch.testing.assert_close(y, want.detach())
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad)
    model.zero_grad()


def test_forward_without_grad_and_layout(mlp_artifact):
    model, x, path = mlp_artifact
    assert sorted(os.listdir(path)) == [METADATA, "forward", "parameters.pt", "training"]
    assert not [f for f in os.listdir(os.path.dirname(path)) if f.startswith(".export-")]
    m = load(path)
    assert [p.requires_grad for p in m.parameters] == [True] * 6
    with torch.no_grad():
        torch.testing.assert_close(m(x), model(x))


def test_inputs_are_checked_against_the_export(mlp_artifact):
    _, x, path = mlp_artifact
    m = load(path)
    with pytest.raises(ArtifactError, match=r"input #0 is \(5, 9\) torch.float32 on cpu, "
                                            r"expected \(5, 8\) torch.float32 on cpu"):
        m(torch.randn(5, 9))
    with pytest.raises(ArtifactError, match=r"input #0 is \(5, 8\) torch.float64"):
        m(x.double())
    with pytest.raises(ArtifactError, match="takes 1 inputs, got 2"):
        m(x, x)
    with pytest.raises(ArtifactError, match="input #0 is a list"):
        m([1.0])
    with pytest.raises(ArtifactError, match="a cpu artifact runs on the CPU"):
        load(path, device="cuda")


def test_gradients_only_for_what_was_exported(tmp_path):
    def f(x, y):
        return (x.sin() * y).sum(1)
    x, y = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4)
    m = load(fusegrad.export(f, x, y, path=tmp_path / "f"))
    x2 = x.detach().clone().requires_grad_()
    m(x2, y).sum().backward()
    torch.testing.assert_close(x2.grad, y * x.detach().cos())
    with pytest.raises(ArtifactError, match="input #1 requires grad"):
        m(x2, y.clone().requires_grad_())
    plain = load(fusegrad.export(f, x.detach(), y, path=tmp_path / "plain"))
    with pytest.raises(ArtifactError, match="exported without training"):
        plain(x2, y)
    with pytest.raises(RuntimeError, match="create_graph=True"):
        g, = torch.autograd.grad(m(x2, y).sum(), x2, create_graph=True)


def test_an_input_only_an_unread_output_depends_on_gets_no_gradient(tmp_path):
    """As in eager (and `fusegrad.compile`): None, not the zeros the backward computes."""
    def f(x, y):
        return x.sin().sum(), y * 2
    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    m = load(fusegrad.export(f, x, y, path=tmp_path / "f"))
    m(x, y)[0].backward()
    torch.testing.assert_close(x.grad, x.detach().cos())
    assert y.grad is None


def test_output_structure_and_constants(tmp_path):
    def f(x):
        return {"a": x.exp(), "b": (x.cos(), None, 3)}
    x = torch.randn(6)
    out = load(fusegrad.export(f, x, path=tmp_path / "f"))(x)
    assert out["b"][1:] == (None, 3)
    torch.testing.assert_close(out["a"], x.exp())
    torch.testing.assert_close(out["b"][0], x.cos())


def test_mutated_buffers_are_written_back(tmp_path):
    """BatchNorm in training mode updates its running statistics, as eager does."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    x = torch.randn(2, 3, 6, 6)
    m = load(fusegrad.export(model, x, path=tmp_path / "bn"))
    want = model(x)  # updates the eager module's running stats once
    torch.testing.assert_close(m(x), want)
    stats = {n: b for n, b in model.named_buffers()}
    loaded = dict(zip([n for n, _ in model.named_parameters()] + list(stats), m.parameters))
    torch.testing.assert_close(loaded["1.running_mean"], stats["1.running_mean"])
    torch.testing.assert_close(loaded["1.running_var"], stats["1.running_var"])


def test_export_replaces_and_rejects(tmp_path, mlp_artifact):
    def f(x):
        return x * 2
    x = torch.randn(3)
    path = fusegrad.export(f, x, path=tmp_path / "f")
    fusegrad.export(f, torch.randn(4), path=path)  # replaces the folder
    torch.testing.assert_close(load(path)(torch.ones(4)), torch.full((4,), 2.0))
    with pytest.raises(ExportError, match="target='tpu' is not one of"):
        fusegrad.export(f, x, path=tmp_path / "g", target="tpu")
    meta = json.loads((tmp_path / "f" / METADATA).read_text())
    meta["version"] = 0
    (tmp_path / "f" / METADATA).write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="artifact version 0, this runtime reads version 1"):
        load(path)
    with pytest.raises(ArtifactError, match="is not a fusegrad artifact"):
        load(tmp_path / "missing")


def test_cuda_artifact_drives_the_driver(tmp_path):
    """Exported on a machine without a GPU: kernel images for sm_80 and sm_90; loaded
    against a fake driver, forward and backward launch their kernels."""
    model, x = _mlp(), torch.randn(5, 8)
    path = fusegrad.export(model, x, path=tmp_path / "mlp", target="cuda")
    assert json.loads((tmp_path / "mlp" / METADATA).read_text())["target"] == "cuda"
    images = os.listdir(tmp_path / "mlp" / "forward")
    assert any(f.endswith(".sm_80.ptx") for f in images)
    assert any(f.endswith(".sm_90.ptx") for f in images)
    driver = FakeDriver()
    m = load(path, device="cpu", driver=driver, stream=lambda: 5, chip="sm_90")
    with torch.no_grad():
        assert m(x).shape == (5, 4)
    forward_launches = len(driver.launches)
    assert forward_launches > 0 and {launch["stream"] for launch in driver.launches} == {5}
    m(x).sum().backward()
    assert len(driver.launches) > 2 * forward_launches
    assert all(p.grad is not None for p in m.parameters)


class _Tied(torch.nn.Module):
    """An embedding and an output layer sharing one weight (as HF language models do)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(11, 6)
        self.head = torch.nn.Linear(6, 11, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.embed(ids).tanh()).logsumexp(-1).sum()


def test_tied_weights_stay_one_tensor(tmp_path):
    torch.manual_seed(0)
    model, ids = _Tied(), torch.randint(0, 11, (3, 4))
    m = load(fusegrad.export(model, ids, path=tmp_path / "tied"))
    assert m.parameters[0] is m.parameters[1]
    m(ids).backward()
    model(ids).backward()
    torch.testing.assert_close(m.parameters[0].grad, model.embed.weight.grad)


def test_hf_gpt2_exports_as_one_graph_and_trains(tmp_path):
    """HF models branch on tensor values in Python; export traces them with torch.export
    (one graph, where fusegrad.compile would split at Dynamo's graph breaks)."""
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64,
                                             n_positions=16, resid_pdrop=0.0, embd_pdrop=0.0,
                                             attn_pdrop=0.0, use_cache=False))

    class Loss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids):
            return self.model(input_ids=ids, labels=ids).loss
    ids = torch.randint(0, 64, (2, 8))
    m = load(fusegrad.export(Loss(), ids, path=tmp_path / "gpt2"))
    loss = m(ids)
    loss.backward()
    want = Loss()(ids)
    want.backward()
    torch.testing.assert_close(loss, want)
    grads = {id(p): p.grad for p in m.parameters}
    assert len(grads) == len(list(model.parameters()))  # the tied embedding is one tensor
    for exported, (name, p) in zip(m.parameters, Loss().named_parameters()):
        torch.testing.assert_close(exported.grad, p.grad, atol=1e-5, rtol=1e-4,
                                   msg=lambda msg: f"{name}: {msg}")

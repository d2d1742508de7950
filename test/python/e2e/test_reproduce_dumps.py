"""Every stage `FUSEGRAD_DUMP` writes is what `fusegrad-opt` makes, with the pipeline that
`index.txt` lists, from the dump it lists as the stage's source: a compile can be
replayed and bisected pass by pass, for both targets."""
from __future__ import annotations

import re

import torch

import fusegrad
from fusegrad import opt, program
from fusegrad.program import CompileOptions

# the NVVM serializer records how long it took
_TIMING = re.compile(r"LLVMIRToISATimeInMs = \d+")


def _ir(text: str) -> str:
    """A dump's IR: without its header comment (which names how it was made) and the
    serializer's timing."""
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("//"):
        lines.pop(0)
    return _TIMING.sub("", "".join(lines))


def _index(dump):
    return [line.split("\t") for line in (dump / "index.txt").read_text().splitlines()]


def _replays(dump, tmp_path) -> list[str]:
    """The stages made by passes; each is checked against fusegrad-opt's output."""
    replayed = []
    for name, _, stage, source, pipeline in _index(dump):
        if source == "-":
            continue
        out = tmp_path / f"replay-{name}"
        status = opt.run([str(dump / source), "-p", pipeline, "--mlir-print-debuginfo",
                          "-o", str(out)])
        assert status == 0, (stage, pipeline)
        dumped = (dump / name).read_text()
        assert _ir(out.read_text()) == _ir(dumped), (
            f"fusegrad-opt {source} -p '{pipeline}' does not give {name}")
        assert f"fusegrad-opt {source} -p '{pipeline}'" in dumped.splitlines()[1]
        replayed.append(stage)
    return replayed


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 4))


def test_cpu_training_stages_replay(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE", "0")
    monkeypatch.setattr(program, "PAIRED_BACKWARD_MAX_OPS", 0)  # the backward lowers later
    dump = tmp_path / "dump"
    compiled = fusegrad.compile(_model(), dump_dir=str(dump))
    compiled(torch.randn(8, 16)).square().mean().backward()
    stages = _replays(dump, tmp_path)
    for prefix in ("autodiff", "remat", "channels-last", "fused", "cpu-linalg",
                   "cpu-bufferized", "cpu-llvm"):
        assert any(s.startswith(prefix) for s in stages), (prefix, stages)
    assert any(s.endswith("-bwd") for s in stages)


def test_cuda_export_stages_replay(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEGRAD_CACHE", "0")
    dump = tmp_path / "dump"
    fusegrad.export(_model(), torch.randn(8, 16), path=tmp_path / "artifact", target="cuda",
                    options=CompileOptions(dump_dir=str(dump)))
    stages = _replays(dump, tmp_path)
    for stage in ("attention-decomposed", "remat", "fused", "cuda-forward", "cuda-training"):
        assert any(s.startswith(stage) for s in stages), (stage, stages)

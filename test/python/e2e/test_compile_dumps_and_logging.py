"""What a compile shows of itself: the stages `dump_dir` writes (parseable, short
names, an unwritable directory only warns) and the `FUSEGRAD_LOG` compile log."""
from __future__ import annotations

import os
import re
import warnings

import pytest
import torch

from compile_options import compiled, f_pointwise
from fusegrad.frontend.backend import FusegradFallbackWarning

pytestmark = pytest.mark.usefixtures("no_fallback")


def test_dump_dir_writes_parseable_stages(tmp_path):
    from mlir import ir

    from fusegrad.context import make_context

    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
    compiled(f_pointwise, dump_dir=str(tmp_path))(x, y).sum().backward()
    index = [line.split("\t")[:3] for line in (tmp_path / "index.txt").read_text().splitlines()]
    assert sorted(name for name, _, _ in index) == sorted(
        p.name for p in tmp_path.iterdir() if p.name != "index.txt")
    stages = [stage.split("-")[0] for _, _, stage in index]
    assert stages == ["aten", "imported", "autodiff", "remat", "channels", "fused", "cpu", "cpu",
                      "cpu"]
    assert all(stage.endswith("-wrt0") for _, _, stage in index[2:])
    assert [stage for _, _, stage in index][-3:] == [
        "cpu-linalg-wrt0", "cpu-bufferized-wrt0", "cpu-llvm-wrt0"]
    ctx = make_context()
    for name, _, _ in index:
        if name.endswith(".mlir"):
            ir.Module.parse((tmp_path / name).read_text(), ctx)


def test_dump_names_stay_short_for_many_differentiated_inputs(tmp_path):
    """A model with hundreds of parameters, some frozen, and a hundred outputs without a
    gradient (a backward of its own): the stage names (file names) fit in a file
    system's 255 bytes, and dumping does not stop the compile."""
    params = [torch.randn(3, requires_grad=i % 3 != 1) for i in range(300)]

    def f(x, *ps):
        return sum(x * p for p in ps), *(p * 2 for p in ps[:150])
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        outs = compiled(f, dump_dir=str(tmp_path))(x, *params)
        (outs[0].sum() + sum(outs[1::2]).sum()).backward()  # none for outputs 2, 4, ...
    torch.testing.assert_close(params[0].grad, x + 2)
    stages = [line.split("\t")[2] for line in (tmp_path / "index.txt").read_text().splitlines()]
    assert re.fullmatch(r"cpu-llvm-wrt200-\w{12}-bwd-without\d+-\w{12}", stages[-1])
    assert max(map(len, stages)) < 80


def test_fusegrad_log_shows_compile_stages():
    """FUSEGRAD_LOG=debug: the log goes to stderr, with the compile time of each stage."""
    import subprocess
    import sys

    code = ("import torch, fusegrad\n"
            "fusegrad.compile(lambda x: x.sin().sum())(torch.randn(4, requires_grad=True))\n")
    env = {**os.environ, "FUSEGRAD_LOG": "debug", "FUSEGRAD_CACHE": "0"}
    err = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stderr
    (line,) = [x for x in err.splitlines() if "compiled in" in x]
    assert line.startswith("[fusegrad.frontend.backend DEBUG] graph")
    for stage in ("capture", "import", "autodiff", "remat", "fused", "cpu-linalg", "llvm-codegen"):
        assert f"{stage} " in line, line


def test_an_unwritable_dump_dir_warns_and_still_compiles(tmp_path, caplog):
    import logging

    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the dump directory would be
    x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="fusegrad"):
        warnings.simplefilter("error", FusegradFallbackWarning)
        compiled(f_pointwise, dump_dir=str(blocker / "dump"))(x, y).sum().backward()
    assert any("FUSEGRAD_DUMP: cannot write" in r.getMessage() for r in caplog.records)
    twin = x.detach().requires_grad_()
    f_pointwise(twin, y).sum().backward()
    torch.testing.assert_close(x.grad, twin.grad)

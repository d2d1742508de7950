"""Shared pytest hooks for the Python test suite.

The tests live in four folders, each a marker (registered in pyproject.toml) that
`pytest_collection_modifyitems` gives every test in it: unit/ (IR-level: the dialect,
passes, lowering of small IR, the runtimes with fakes, layering, docs, CLI), frontend/
(capture, import, graph splitting, explain, devices), e2e/ (programs and models compiled and run
against eager: training, HF models, OpInfo, export, benchmarks, distributed) and cuda/
(CUDA codegen, PTX and ptxas, the fake driver, and the GPU-only tests). So
`pytest -m "not e2e" test/python` and `pytest test/python/unit` select alike. The helpers
beside this file (compile_options, cuda_fakes, cuda_plans) are importable from every
folder: pyproject.toml puts test/python on the path (`pythonpath`).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

FOLDERS = ("unit", "frontend", "e2e", "cuda")
HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    """Each test gets its folder's marker; a test file outside the folders is an error."""
    for item in items:
        try:
            folder = Path(item.path).relative_to(HERE).parts[0]
        except ValueError:
            continue  # not a test of this suite
        if folder not in FOLDERS:
            raise pytest.UsageError(f"{item.nodeid}: a test file belongs in one of "
                                    f"{', '.join(f'test/python/{f}/' for f in FOLDERS)}")
        item.add_marker(folder)


def pytest_configure(config):
    """Under pytest-xdist, each worker gets its share of the cores for PyTorch's (and so
    the compiled kernels') thread team: two workers with two threads each on two cores
    made OpenMP teams wait on each other (single tests took 45 s instead of 2 s).
    Tests of threaded code ask for their threads with `torch_threads`."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


@pytest.fixture
def torch_threads(request):
    """PyTorch's thread team (which runs compiled kernels) at `request.param` threads for
    one test, then as it was."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.fixture(autouse=True, scope="session")
def compile_cache_dir(tmp_path_factory):
    """The compile cache in a fresh directory per session: tests never read or fill the
    user's cache, each graph is compiled on first use (the compile path is what most
    tests test), and a graph compiled again loads the cached library (testing that
    path on every graph the suite compiles twice). Subprocesses inherit it."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("compile_cache")
        mp.setenv("FUSEGRAD_CACHE_DIR", str(path))
        yield path


@pytest.fixture(autouse=True, scope="session")
def verify_each_pass():
    """Compiles verify the IR after every pass, not only after each pipeline: a pass
    that makes invalid IR fails its test by name (subprocesses inherit it)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FUSEGRAD_VERIFY_EACH", "1")
        yield


@pytest.fixture
def no_fallback():
    """Fresh Dynamo state, and a graph falling back to eager is an error: a compiled
    test that silently ran eagerly would pass without testing anything."""
    import torch
    from fusegrad.frontend.backend import FusegradFallbackWarning

    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FusegradFallbackWarning)
        yield


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line with how much of the OpInfo suite ran (test_opinfo.STATS)."""
    import sys
    mod = sys.modules.get("test_opinfo") or sys.modules.get("e2e.test_opinfo")
    if mod is not None and mod.STATS["ops"]:
        s = mod.STATS
        terminalreporter.write_line(
            f"fusegrad OpInfo: {s['ops']} ops, {s['samples']} samples compared with eager "
            f"via {mod.EXECUTOR}, {s['unsupported']} samples correctly rejected as unsupported")
    if mod is not None and mod.STATS.get("grad_ops"):
        terminalreporter.write_line(
            f"fusegrad OpInfo gradients: {mod.STATS['grad_ops']} ops checked through "
            "fusegrad.compile (float32 vs eager, gradcheck + gradgradcheck in float64)")

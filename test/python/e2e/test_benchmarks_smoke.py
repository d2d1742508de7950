"""Smoke test of benchmarks/suite.py: a tiny run end to end, and the report's formatting."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
SUITE = os.path.join(ROOT, "benchmarks", "suite.py")
_spec = importlib.util.spec_from_file_location("suite", SUITE)
suite = sys.modules["suite"] = importlib.util.module_from_spec(_spec)  # dataclasses look it up
_spec.loader.exec_module(suite)


def test_quick_run_prints_a_row_per_workload(tmp_path):
    out = tmp_path / "suite.md"
    proc = subprocess.run(
        [sys.executable, SUITE, "--quick", "--no-inductor", "--threads", "1",
         "--only", "gelu:fwd+bwd,mlp:train", "--regimes", "default", "--output", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = out.read_text()
    assert report in proc.stdout
    for workload in ("gelu:fwd+bwd", "mlp:train"):
        for backend in ("eager", "fusegrad"):
            rows = [l for l in report.splitlines() if l.startswith(f"| {workload} | {backend} |")]
            assert len(rows) == 1, report
            assert rows[0].rstrip().endswith("| ok |"), rows[0]
    assert "inductor" not in report.split("## ")[1].replace("vs inductor", "")
    gelu = next(l for l in report.splitlines() if l.startswith("| gelu:fwd+bwd | fusegrad |"))
    assert "%" in gelu  # memory-bound: fraction of the copy bandwidth


def test_only_selects_families_and_names():
    assert suite.select("gelu") == ["gelu:fwd", "gelu:fwd+bwd"]
    assert suite.select("mlp:train,gelu:fwd") == ["mlp:train", "gelu:fwd"]
    assert suite.select(None) == list(suite.WORKLOADS)
    with pytest.raises(SystemExit):
        suite.select("nope")


def test_fallback_and_errors_are_never_timings():
    result = {"workload": "llama:train", "backends": {
        "eager": {"status": "ok", "first_s": 0.2, "median_s": 0.2, "iters": 5, "peak_mib": 90.0},
        "inductor": {"status": "error: BackendCompilerFailed: no compiler", "first_s": 1.0},
        "fusegrad": {"status": "fallback: fusegrad cannot compile 'aten.cumsum.default' | x",
                     "first_s": 3.0, "median_s": 0.1, "iters": 5, "out_err": 0.0},
    }}
    rows = suite.table_rows(result, ["eager", "inductor", "fusegrad"])
    assert len(rows) == 3
    cells = [r.split(" | ") for r in rows]
    assert all(len(c) == len(cells[0]) for c in cells)
    assert cells[0][3] == "200.000" and cells[0][5] == "1.00x"
    fg = cells[2]
    assert fg[-1].startswith("fallback: fusegrad cannot compile") and "\\|" in fg[-1]
    assert set(fg[2:-1]) == {"—"}  # no timing, ratio or error reported for a fallback
    assert set(cells[1][3:-1]) == {"—"}
    crashed = suite.table_rows({"workload": "gpt2:fwd", "error": "timed out", "backends": {}},
                               ["eager"])
    assert len(crashed) == 1 and crashed[0].count("|") == len(cells[0]) + 1


def test_cuda_train_build_then_run_on_cpu_artifacts(tmp_path):
    """benchmarks/cuda_train.py end to end with CPU artifacts (its GPU half needs only the
    target switched): the exported program trains like the torch.export reference."""
    script = os.path.join(ROOT, "benchmarks", "cuda_train.py")
    common = dict(capture_output=True, text=True, timeout=300, cwd=ROOT)
    built = subprocess.run([sys.executable, script, "build", str(tmp_path), "--target", "cpu",
                            "--quick", "--models", "mlp,cnn"], **common)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    ran = subprocess.run([sys.executable, script, "run", str(tmp_path), "--rounds", "3",
                          "--no-inductor", "--models", "mlp,cnn"], **common)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    rows = [l for l in ran.stdout.splitlines() if l.startswith(("| mlp", "| cnn"))]
    assert len(rows) == 4 and all(" | fusegrad | " in r or " | eager | " in r for r in rows)
    bad = subprocess.run([sys.executable, script, "run", str(tmp_path), "--models", "nope"],
                         **common)
    assert bad.returncode == 2 and "unknown models ['nope']" in bad.stderr


def test_hf_models_reports_a_row_per_model():
    script = os.path.join(ROOT, "benchmarks", "hf_models.py")
    proc = subprocess.run([sys.executable, script, "--only", "distilbert", "--seconds", "0.2",
                           "--threads", "1"], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    row = next(l for l in proc.stdout.splitlines() if l.startswith("| distilbert |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-1] == "0"  # no fallback
    assert abs(float(cells[6]) - float(cells[7])) < 1e-3  # eager and fusegrad losses


def test_func_transforms_reports_matching_results():
    script = os.path.join(ROOT, "benchmarks", "func_transforms.py")
    proc = subprocess.run([sys.executable, script, "--calls", "1", "--no-inductor", "--only",
                           "hessian"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    row = next(l for l in proc.stdout.splitlines() if l.startswith("| hessian | fusegrad |"))
    assert float(row.strip("|").split("|")[-1]) < 1e-5  # max abs diff from eager
    assert "Fallback" not in proc.stderr


def test_real_size_tiny_accounts_for_memory(tmp_path):
    script = os.path.join(ROOT, "benchmarks", "real_size.py")
    raw = tmp_path / "real_size.json"
    proc = subprocess.run([sys.executable, script, "--tiny", "--backends", "eager,fusegrad",
                           "--steps", "2", "--threads", "1", "--json", str(raw)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [l for l in proc.stdout.splitlines() if l.startswith("| gpt2 | fusegrad |")]
    assert len(rows) == 2  # time and memory
    fg = json.loads(raw.read_text())["results"]["gpt2"]["fusegrad"]
    assert fg["max_loss_diff"] < 1e-3 and fg["fusegrad_programs"] >= 1
    assert sum(fg["compile_stages_s"].values()) < fg["first_s"]
    memory = fg["memory_mib"]
    assert memory["before"] <= memory["after"] <= memory["process_peak"]
    assert fg["held_mib"]["workspace"] > 0 and fg["tensors_mib"]["optimizer_state"] > 0


def _benchmark_module(name: str):
    """A module of benchmarks/ (which import each other as top-level modules)."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def test_gpu_real_size_tiny_runs_the_whole_flow_on_the_cpu(tmp_path):
    """benchmarks/gpu_real_size.py's GPU flow on tiny models on the CPU: a process per
    model, a row per backend written as it comes, CUDA graphs said to need a GPU; a
    budget already spent runs nothing and says so."""
    script = os.path.join(ROOT, "benchmarks", "gpu_real_size.py")
    common = dict(capture_output=True, text=True, timeout=300, cwd=ROOT)
    proc = subprocess.run([sys.executable, script, "run", str(tmp_path), "--tiny", "--models",
                           "gpt2", "--backends", "eager,fusegrad,fusegrad-graphs", "--steps",
                           "2"], **common)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = (tmp_path / "real_size.md").read_text()
    assert table in proc.stdout
    rows = {r["backend"]: r for r in json.loads((tmp_path / "real_size.json").read_text())["rows"]}
    assert list(rows) == ["eager", "fusegrad", "fusegrad-graphs"]
    assert rows["fusegrad"]["loss_ok"] and rows["fusegrad"]["step_ms"] > 0
    assert rows["fusegrad"]["first_s"] > rows["eager"]["first_s"]  # it compiled
    assert rows["fusegrad-graphs"]["skipped"] == "CUDA graphs need a GPU"
    assert "| gpt2 | fusegrad-graphs | not run: CUDA graphs need a GPU |" in table
    spent = subprocess.run([sys.executable, script, "run", str(tmp_path / "spent"), "--tiny",
                            "--budget", "0"], **common)
    assert spent.returncode == 0, spent.stdout[-3000:] + spent.stderr[-3000:]
    assert spent.stdout.count("not run: out of time") == 6  # 3 models x eager, fusegrad


def test_gpu_real_size_table_and_goals():
    """Ratios against eager and Inductor, and issue 48's goals, from rows as the GPU run
    writes them (made-up numbers)."""
    bench = _benchmark_module("gpu_real_size")
    report = bench.Report(".", "header")
    common = dict(model="gpt2", first_loss=10.0)
    report.rows = [
        dict(common, backend="eager", first_s=1.0, step_ms=300.0, peak_gib=20.0),
        dict(common, backend="inductor", first_s=60.0, step_ms=220.0, peak_gib=16.0),
        dict(common, backend="fusegrad", first_s=10.0, step_ms=200.0, peak_gib=16.0,
             loss_ok=True, bandwidth={"copy_GBps": 4000.0, "all": {"kernels": 900,
                                                                  "of_copy": 0.6},
                                      "large": {"kernels": 300, "of_copy": 0.9}},
             attention={"kept": 11, "math": 1}),
        dict(model="gpt2", backend="fusegrad-graphs", error="RuntimeError: boom")]
    text = report.markdown()
    fg = next(line for line in text.splitlines() if line.startswith("| gpt2 | fusegrad |"))
    cells = [c.strip() for c in fg.strip("|").split("|")]
    assert cells[2:9] == ["10.0", "200.0", "1.50x", "1.10x", "6.00x", "16.00", "1.00x"]
    assert cells[10].startswith("90% of 300 moving >= 16 MB; all 900: 60%")
    assert cells[10].endswith("; attention: 11 of 12 as fused kernels")
    assert "| gpt2 | fusegrad-graphs | RuntimeError: boom |" in text
    assert ("- gpt2: step 1.10 (>= 1.1: met), first 6.00 (>= 5.0: met), memory 1.00 "
            "(<= 0.9: not met), bandwidth 0.90 (>= 0.85: met)") in text
    assert report.failed() == ["gpt2 fusegrad-graphs"]


def test_fused_bandwidth_counts_each_launch_s_buffers():
    """A softmax compiled for CUDA: one launch reading its input and writing its output."""
    import types

    from cuda_plans import compile_plan
    bandwidth = _benchmark_module("fused_bandwidth")
    kernels = _benchmark_module("cuda_kernels")
    plan = compile_plan(kernels.softmax_text(64, 1000), "dg-fuse", cubin=False)
    ((step, nbytes),) = bandwidth._launch_bytes(types.SimpleNamespace(plan=plan), "softmax")
    assert step["op"] == "launch" and nbytes == 2 * 64 * 1000 * 4
    assert step["buffers"] == ["f32[64, 1000]", "f32[64, 1000]"]

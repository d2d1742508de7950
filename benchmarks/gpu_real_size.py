"""Real-size training steps on a GPU (issue 48, item 3): GPT-2 124M, a LLaMA of its size
and a ResNet-50 under bf16 autocast with AdamW; eager, Inductor and fusegrad with and
without CUDA graphs: step time, peak memory, first call, fusegrad's kernel bandwidth.

    .venv/bin/python benchmarks/gpu_real_size.py prepare DIR      # here: MLIR, no GPU
    python3 benchmarks/gpu_real_size.py run OUT [--budget 270]    # on the GPU machine
    .venv/bin/python benchmarks/gpu_real_size.py run OUT --tiny   # the whole flow on a CPU

`run` trains the models of `real_size_models.py` in order of importance (gpt2, llama,
resnet50), one fresh process per model with fresh compile caches (fusegrad's, Inductor's,
Triton's), and in it each backend in turn on the same initial weights and batch:
`eager`; `fusegrad` (`fusegrad.compile(model, cuda_graphs=False)`: every kernel launched
from Python); `inductor` (`torch.compile(model)`); `fusegrad-graphs` (`cuda_graphs=True`:
each function replayed from a CUDA graph from its third call; its compiles find the cache
`fusegrad` filled, so its first call is warm). `inductor-max-autotune`
(mode "max-autotune-no-cudagraphs") runs after every model's other backends, in a second
process per model, and only where the time left is three times Inductor's default first
step (its compile autotunes every matmul and fused kernel). A step is the loss under
`torch.autocast(bfloat16)`, `backward()`, `AdamW.step()` (fused on CUDA), `zero_grad()`.
Per backend: the first step (compile included, the device synchronized after it); 3
warm-up steps; the median of `--steps` steps, each synchronized;
`torch.cuda.max_memory_allocated` over those steps (weights, gradients and AdamW's state
included, the same for every backend); the first step's loss against eager's; for
`fusegrad`, one profiled step's kernels against a measured copy (`fused_bandwidth.py`).

The table (`OUT/real_size.md`, rewritten after every row, with the raw results in
`OUT/real_size.json`) ends with issue 48's goals where both sides were measured. `--budget`
bounds the whole run: a process still running at its end is killed, and what it had
not reported becomes "not run" rows. Rows that failed, or whose loss differs from eager's
by more than LOSS_RTOL, make the exit status 1.

The GPU machine has no MLIR of its own: fusegrad compiles there from the bindings that
`scripts/gpu_session.sh pack` carries; without them the fusegrad rows say so and the rest
runs. What cannot happen here: compiling the benchmark's own programs. fusegrad compiles a
graph for CUDA from CUDA tensors (Dynamo hands it fake ones of the real device), and its
AOT export of an autocast region of an HF model fails (torch.export records it as a
`wrap_with_autocast` higher-order op that the capture cannot retrace). `prepare` does the
closest check: it exports each model's training step in bf16 weights for CUDA
(`fusegrad.export(..., target="cuda")`, PTX for sm_80 and sm_90 assembled by ptxas), so a
model that does not lower fails here, not in device time, and says what the compile
costs on this machine. Its artifacts hold the weights (250 MB for GPT-2 in bf16) and do
not travel; the GPU run compiles its own.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Iterator

import torch

import real_size_models as models

MARKER = "@@gpu_real_size@@ "
BACKENDS = ("eager", "fusegrad", "inductor", "fusegrad-graphs", "inductor-max-autotune")
FUSEGRAD_BACKENDS = ("fusegrad", "fusegrad-graphs")
LATE = ("inductor-max-autotune",)  # run after every model's other backends
WARMUP = 3  # a CUDA graph is captured at a function's second call, replayed from its third
LOSS_RTOL = 1e-2  # bf16 autocast: compiled and eager losses round differently
MIN_BACKEND_S = 20  # a backend starts only with this much of the budget left
MAX_AUTOTUNE_FACTOR = 3  # its compile, against Inductor's default first step
GOALS = {"step": 1.1, "memory": 0.9, "first": 5.0, "bandwidth": 0.85}


# ---------------------------------------------------------------- prepare (here)

def prepare(directory: str, names: list[str], tiny: bool) -> int:
    """Export each model's bf16 training step for CUDA into `directory/<model>` and print
    what it took: the check that it lowers and assembles, without a GPU."""
    import fusegrad
    status, rows = 0, ["| model | batch | export (s) | launches per step | library steps "
                       "| kernel modules | images (MB) |", "|---|---|---:|---:|---:|---:|---:|"]
    for name in names:
        workload = models.build(name, tiny)
        workload.model.to(torch.bfloat16).train()
        batch = tuple(x.to(torch.bfloat16) if x.is_floating_point() else x
                      for x in workload.batch)
        path = os.path.join(directory, name)
        start = time.perf_counter()
        try:
            fusegrad.export(LossModule(workload), *batch, path=path, target="cuda")
        except Exception as e:  # the compiler's reason, whatever its kind
            rows.append(f"| {name} | {workload.shape} | failed: {type(e).__name__}: "
                        f"{str(e).splitlines()[0][:200]} |")
            status = 1
            continue
        seconds = time.perf_counter() - start
        steps = _plan_steps(os.path.join(path, "training"))
        images = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in
                     os.walk(os.path.join(path, "training")) for f in files
                     if f.endswith((".ptx", ".cubin")))
        library = sum(n for op, n in steps["ops"].items() if op != "launch")
        rows.append(f"| {name} | {workload.shape} | {seconds:.1f} | {steps['ops'].get('launch', 0)}"
                    f" | {library} | {steps['modules']} | {images / 1e6:.1f} |")
        print(f"{name}: exported in {seconds:.1f} s", flush=True)
    table = "\n".join(rows)
    with open(os.path.join(directory, "prepared.md"), "w") as f:
        f.write(table + "\n")
    print(table)
    return status


class LossModule(torch.nn.Module):
    """A workload's loss as a module of its batch (what `fusegrad.export` takes)."""

    def __init__(self, workload: models.Workload) -> None:
        super().__init__()
        self.model, self.loss = workload.model, workload.loss

    def forward(self, *batch: torch.Tensor) -> torch.Tensor:
        return self.loss(self.model, *batch)


def _plan_steps(directory: str) -> dict[str, Any]:
    """Counts of a plan folder's non-bookkeeping steps per op, and its kernel modules."""
    with open(os.path.join(directory, "plan.json")) as f:
        plan = json.load(f)
    ops: dict[str, int] = {}
    for function in plan["functions"].values():
        for step in function["steps"]:
            if step["op"] not in ("alloc", "free", "view", "index_flag", "constant"):
                ops[step["op"]] = ops.get(step["op"], 0) + 1
    return {"ops": ops, "modules": len(plan["modules"])}


# ---------------------------------------------------------------- one model (child)

def _compiler(backend: str) -> Callable[[Any], Any]:
    if backend == "eager":
        return lambda m: m
    if backend == "inductor":
        return torch.compile
    if backend == "inductor-max-autotune":
        return lambda m: torch.compile(m, mode="max-autotune-no-cudagraphs")
    import fusegrad
    return lambda m: fusegrad.compile(m, cuda_graphs=backend == "fusegrad-graphs")


def measure(name: str, backend: str, device: Any, tiny: bool, steps: int,
            copy: Callable[[], float]) -> dict[str, Any]:
    """One backend's training steps on a fresh copy of the model (module docstring)."""
    workload = models.build(name, tiny).to(device)
    model = workload.model.train()
    cuda = device.type == "cuda"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    compiled = _compiler(backend)(model)

    def step() -> Any:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = workload.loss(compiled, *workload.batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    def timed() -> tuple[float, Any]:
        sync()
        start = time.perf_counter()
        loss = step()
        sync()
        return time.perf_counter() - start, loss

    with _attention_choices() as attention:
        first_s, first_loss = timed()
    for _ in range(WARMUP):
        step()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times = [timed()[0] for _ in range(steps)]
    result = {"first_s": first_s, "step_ms": statistics.median(times) * 1e3,
              "steps_ms": [t * 1e3 for t in times], "first_loss": float(first_loss),
              "peak_gib": torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None}
    if backend in FUSEGRAD_BACKENDS and any(attention.values()):
        result["attention"] = attention
    if cuda and backend == "fusegrad":
        from fused_bandwidth import kernel_bandwidth
        result["bandwidth"] = kernel_bandwidth(step, copy())
    return result


@contextlib.contextmanager
def _attention_choices() -> Iterator[dict[str, int]]:
    """How many attention calls fusegrad's CUDA capture kept whole (run as eager's fused
    kernel) and how many it traced in the math form, from its debug log."""
    counts = {"kept": 0, "math": 0}

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            counts["kept"] += "kept whole" in message
            counts["math"] += "math form" in message
    logger = logging.getLogger("fusegrad.frontend.cuda_attention")
    handler, level = Count(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield counts
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def child(name: str, backends: list[str], tiny: bool, steps: int, deadline: float) -> None:
    """Each backend on model `name` in this process, one MARKER line per result."""
    device = torch.device("cuda" if torch.cuda.is_available() and not tiny else "cpu")
    copy_gbps: list[float] = []

    def copy() -> float:
        if not copy_gbps:
            from fused_bandwidth import copy_gbps as measure_copy
            copy_gbps.append(measure_copy(device))
        return copy_gbps[0]
    ran = set()
    for backend in backends:
        left = deadline - time.time()
        if backend == "fusegrad-graphs" and device.type != "cuda":
            result = {"skipped": "CUDA graphs need a GPU"}
        elif left < (0 if tiny else MIN_BACKEND_S):
            result = {"skipped": f"out of time ({left:.0f} s left)"}
        else:
            print(MARKER + json.dumps({"model": name, "backend": backend, "started": True}),
                  flush=True)
            try:
                result = measure(name, backend, device, tiny, steps, copy)
                if backend == "fusegrad-graphs" and "fusegrad" in ran:
                    result["cache"] = "warm"
            except Exception as e:  # a backend's failure is its row; the others still run
                result = {"error": f"{type(e).__name__}: {str(e).strip()[:400]}"}
            ran.add(backend)
            torch._dynamo.reset()
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
        result.update(model=name, backend=backend, device=_device_name(device))
        print(MARKER + json.dumps(result), flush=True)


def _device_name(device: Any) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


# ---------------------------------------------------------------- the run (parent)

class Report:
    """The results so far, written as markdown and JSON after every row."""

    def __init__(self, out: str, header: str) -> None:
        self.out, self.header = out, header
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.write()

    def find(self, model: str, backend: str) -> dict[str, Any] | None:
        return next((r for r in self.rows if r["model"] == model and r["backend"] == backend
                     and "step_ms" in r), None)

    def failed(self) -> list[str]:
        return [f"{r['model']} {r['backend']}" for r in self.rows
                if "error" in r or r.get("loss_ok") is False]

    def write(self) -> None:
        text = self.markdown()
        with open(os.path.join(self.out, "real_size.md"), "w") as f:
            f.write(text)
        with open(os.path.join(self.out, "real_size.json"), "w") as f:
            json.dump({"header": self.header, "rows": self.rows}, f, indent=1)

    def markdown(self) -> str:
        lines = [self.header, "", "| model | backend | first step (s) | step (ms) | vs eager "
                 "| vs Inductor | first vs Inductor's | peak (GiB) | vs Inductor | first loss "
                 "| fused kernels, % of copy |", "|---|---|---:|---:|---:|---:|---:|---:|---:"
                 "|---:|---|"]
        lines += [self._row(r) for r in self.rows]
        goals = self.goals()
        if goals:
            lines += ["", "Issue 48's goals (fusegrad without CUDA graphs against Inductor's "
                      "default):", ""] + goals
        return "\n".join(lines) + "\n"

    def _row(self, r: dict[str, Any]) -> str:
        head = f"| {r['model']} | {r['backend']} |"
        if "step_ms" not in r:
            why = r.get("error") or f"not run: {r.get('skipped', '')}"
            return f"{head} {why.replace('|', '/').splitlines()[0]} |"
        eager, ind = self.find(r["model"], "eager"), self.find(r["model"], "inductor")

        def ratio(ref: dict | None, key: str, mine: float | None) -> str:
            return f"{ref[key] / mine:.2f}x" if ref and ref.get(key) and mine else "-"
        peak = "-" if r["peak_gib"] is None else f"{r['peak_gib']:.2f}"
        memory = f"{r['peak_gib'] / ind['peak_gib']:.2f}x" if ind and ind["peak_gib"] and \
            r["peak_gib"] is not None else "-"
        loss = f"{r['first_loss']:.4f}" + ("" if r.get("loss_ok", True) else " (differs)")
        first = f"{r['first_s']:.1f}" + (" (warm cache)" if r.get("cache") == "warm" else "")
        return (f"{head} {first} | {r['step_ms']:.1f} | {ratio(eager, 'step_ms', r['step_ms'])}"
                f" | {ratio(ind, 'step_ms', r['step_ms'])} | {ratio(ind, 'first_s', r['first_s'])}"
                f" | {peak} | {memory} | {loss} | {_bandwidth_cell(r.get('bandwidth'))}"
                f"{_attention_note(r.get('attention'))} |")

    def goals(self) -> list[str]:
        out = []
        for model in dict.fromkeys(r["model"] for r in self.rows):
            fg, ind = self.find(model, "fusegrad"), self.find(model, "inductor")
            if not fg or not ind:
                continue
            checks = [("step", ind["step_ms"] / fg["step_ms"], ">="),
                      ("first", ind["first_s"] / fg["first_s"], ">=")]
            if fg["peak_gib"] and ind["peak_gib"]:
                checks.append(("memory", fg["peak_gib"] / ind["peak_gib"], "<="))
            large = (fg.get("bandwidth") or {}).get("large")
            if large and large["kernels"]:
                checks.append(("bandwidth", large["of_copy"], ">="))
            cells = [f"{what} {value:.2f} ({sign} {GOALS[what]}: "
                     f"{'met' if (value >= GOALS[what]) == (sign == '>=') else 'not met'})"
                     for what, value, sign in checks]
            out.append(f"- {model}: " + ", ".join(cells))
        return out


def _attention_note(counts: dict[str, int] | None) -> str:
    if not counts:
        return ""
    return f"; attention: {counts['kept']} of {counts['kept'] + counts['math']} as fused kernels"


def _bandwidth_cell(b: dict[str, Any] | None) -> str:
    if not b:
        return "-"
    if "error" in b:
        return f"not measured: {b['error']}"
    large, every = b["large"], b["all"]
    big = f"{large['of_copy']:.0%} of {large['kernels']} moving >= 16 MB" if large["kernels"] \
        else "none moving >= 16 MB"
    return f"{big}; all {every['kernels']}: {every['of_copy']:.0%} (copy {b['copy_GBps']:.0f} GB/s)"


def _header(tiny: bool, fusegrad_note: str) -> str:
    import platform

    try:  # the GPU machine's copy of the checkout may have no git
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout
    except OSError:
        commit = ""
    device = torch.cuda.get_device_name() if torch.cuda.is_available() and not tiny else \
        f"CPU ({platform.processor() or platform.machine()}), tiny models"
    return (f"gpu_real_size.py at {commit.strip() or 'an unknown commit'}, "
            f"{time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, {device}; "
            f"{fusegrad_note}")


def _fresh_env(root: str) -> dict[str, str]:
    """Empty compile caches for one process: fusegrad's (shared by its two backends in
    that process), Inductor's and Triton's, Inductor's FX graph and AOTAutograd caches off."""
    env = dict(os.environ, FUSEGRAD_CACHE_DIR=os.path.join(root, "fusegrad"),
               TORCHINDUCTOR_CACHE_DIR=os.path.join(root, "inductor"),
               TRITON_CACHE_DIR=os.path.join(root, "triton"),
               TORCHINDUCTOR_FX_GRAPH_CACHE="0", TORCHINDUCTOR_AUTOGRAD_CACHE="0")
    env.pop("FUSEGRAD_CACHE", None)
    return env


def spawn(report: Report, name: str, backends: list[str], args: argparse.Namespace,
          deadline: float) -> None:
    """Run `child` for model `name` until it ends or `deadline` passes, adding each row
    as it comes; backends it did not report become rows saying why."""
    command = [sys.executable, os.path.abspath(__file__), "child", name,
               "--backends", ",".join(backends), "--steps", str(args.steps),
               "--deadline", str(deadline), *(["--tiny"] * args.tiny)]
    root = tempfile.mkdtemp(prefix="gpu_real_size_")
    log = open(os.path.join(args.out, f"{name}.log"), "a")
    current, reported = None, set()
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True,
                                env=_fresh_env(root), start_new_session=True,
                                cwd=os.path.dirname(os.path.abspath(__file__)))
        timer = _kill_at(proc, deadline)
        for line in proc.stdout:
            log.write(line)
            if not line.startswith(MARKER):
                continue
            row = json.loads(line[len(MARKER):])
            if row.get("started"):
                current = row["backend"]
                print(f"{name} {current} ...", flush=True)
                continue
            _check_loss(row, report.find(name, "eager"))
            report.add(row)
            reported.add(row["backend"])
            print(f"{name} {row['backend']}: " + _summary(row), flush=True)
        proc.wait()
        timer.cancel()
    finally:
        log.close()
        shutil.rmtree(root, ignore_errors=True)
    for backend in backends:
        if backend in reported:
            continue
        row: dict[str, Any] = {"model": name, "backend": backend}
        if time.time() >= deadline:
            row["skipped"] = "killed at the budget's end" if backend == current else "out of time"
        else:
            row["error"] = (f"the process ended (exit code {proc.returncode}) "
                            f"{'during' if backend == current else 'before'} its run; "
                            f"see {name}.log")
        report.add(row)


def _kill_at(proc: subprocess.Popen, deadline: float) -> Any:
    import threading
    timer = threading.Timer(max(0.0, deadline - time.time()),
                            lambda: proc.poll() is None and os.killpg(proc.pid, signal.SIGKILL))
    timer.daemon = True
    timer.start()
    return timer


def _check_loss(row: dict[str, Any], eager: dict[str, Any] | None) -> None:
    if "first_loss" in row and eager and row["backend"] != "eager":
        row["loss_ok"] = abs(row["first_loss"] - eager["first_loss"]) <= \
            LOSS_RTOL * max(1.0, abs(eager["first_loss"]))


def _summary(row: dict[str, Any]) -> str:
    if "step_ms" not in row:
        return row.get("error") or f"not run: {row.get('skipped')}"
    return (f"first {row['first_s']:.1f} s, step {row['step_ms']:.1f} ms, "
            f"loss {row['first_loss']:.4f}")


def run(args: argparse.Namespace, names: list[str], backends: list[str]) -> int:
    os.makedirs(args.out, exist_ok=True)
    start = time.time()
    deadline = start + args.budget
    has_mlir = all(importlib.util.find_spec(m) is not None for m in ("mlir", "fusegrad"))
    note = ("fusegrad compiles on this machine" if has_mlir else
            "fusegrad not run: MLIR is not importable here (scripts/gpu_session.sh pack "
            "carries it)")
    report = Report(args.out, _header(args.tiny, note))
    first = [b for b in backends if b not in LATE]
    late = [b for b in backends if b in LATE]
    for name, wanted in [(n, first) for n in names] + [(n, late) for n in names if late]:
        runnable = [b for b in wanted if has_mlir or b not in FUSEGRAD_BACKENDS]
        for b in wanted:
            if b not in runnable:
                report.add({"model": name, "backend": b, "skipped": "MLIR not importable"})
        if not runnable:
            continue
        left = deadline - time.time()
        if left < (0 if args.tiny else MIN_BACKEND_S):
            for b in runnable:
                report.add({"model": name, "backend": b, "skipped": "out of time"})
            continue
        inductor = report.find(name, "inductor")
        if wanted is late and inductor and left < MAX_AUTOTUNE_FACTOR * inductor["first_s"]:
            for b in runnable:
                report.add({"model": name, "backend": b, "skipped": (
                    f"out of time: {left:.0f} s left, its compile would take about "
                    f"{MAX_AUTOTUNE_FACTOR * inductor['first_s']:.0f} s")})
            continue
        spawn(report, name, runnable, args, deadline)
    print(report.markdown())
    print(f"gpu_real_size took {time.time() - start:.0f} s; table in "
          f"{os.path.join(args.out, 'real_size.md')}")
    failed = report.failed()
    if failed:
        print(f"failed or differing from eager: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def _names(value: str, known: tuple[str, ...], parser: argparse.ArgumentParser) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown {unknown}; choose from {', '.join(known)}")
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["prepare", "run", "child"])
    p.add_argument("out", help="prepare: the artifacts' folder; run: where the table goes; "
                   "child: the model")
    p.add_argument("--models", default=",".join(models.MODELS),
                   help="comma-separated, in the order to run (default: all, by importance)")
    p.add_argument("--backends", help=f"comma-separated, from {', '.join(BACKENDS)} (default: "
                   "all; eager,fusegrad with --tiny)")
    p.add_argument("--tiny", action="store_true",
                   help="tiny models on the CPU: the whole flow without a GPU (smoke tests)")
    p.add_argument("--budget", type=float, default=270.0,
                   help="run: seconds for everything; what does not fit is not run (270)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per backend (10)")
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps: at least 1")
    default = "eager,fusegrad" if args.tiny else ",".join(BACKENDS)
    backends = _names(args.backends or default, BACKENDS, p)
    if args.mode == "child":
        child(args.out, backends, args.tiny, args.steps, args.deadline)
        return 0
    names = _names(args.models, models.MODELS, p)
    if args.mode == "prepare":
        os.makedirs(args.out, exist_ok=True)
        return prepare(args.out, names, args.tiny)
    return run(args, names, backends)


if __name__ == "__main__":
    sys.exit(main())

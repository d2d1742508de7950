"""Real model sizes: a GPT-2 124M (and a LLaMA of similar size) training step, with
compile time, step time and memory accounted per backend.

    .venv/bin/python benchmarks/real_size.py [--only gpt2,llama]
        [--backends eager,inductor,fusegrad] [--threads N] [--steps 6] [--tiny] [--json FILE]

Every model in the suite has 2 layers; these have 12, the size people start from.

- gpt2: HuggingFace `GPT2LMHeadModel(GPT2Config())` (12 layers, 768 wide, 12 heads,
  vocabulary 50257, 124M parameters) with dropout off, so that every backend computes
  the same losses;
- llama: `LlamaForCausalLM`, 12 layers, hidden 768, 12 heads, intermediate 2048,
  vocabulary 32000 (134M parameters, its head untied).

Random weights after `torch.manual_seed(0)`, one batch of 2 x 256 random tokens, AdamW
(lr 1e-4); a step is `model(input_ids=ids, labels=ids).loss`, backward, `opt.step()`,
`opt.zero_grad()`, with the model `torch.compile`d (`backend="fusegrad"` after
`import fusegrad`; eager: the model as it is). `--tiny` shrinks both models to 2 layers
of width 64 and 32 tokens (smoke tests).

Each (workload, backend) runs in a fresh process with fresh caches
(`dynamic_shapes.run_fresh`). In it: the first step (compile included), then `--steps`
- 1 steady steps (their median), then the suite's step peak (`suite.step_peak_mib`: the
memory a step needs above what is live before it, pool emptied and heap trimmed first).
A row fails when a step's loss differs from eager's by more than
`dynamic_shapes.LOSS_TOLERANCE`.

Memory, from /proc/self/status, the high-water mark (VmHWM) reset before each step's
forward and backward (when fusegrad and Inductor compile), and again before its
optimizer update (where eager's and Inductor's peaks are: gradients, AdamW's state and
its temporaries live at once), so each phase has its own peak:
- before: VmRSS right before the first call (interpreter, libraries, model, batch);
- fwd+bwd growth, first: the first forward and backward's peak above `before` (heap
  trimmed before it); compiled: the same for a compiled forward and backward after the
  steady steps, on a trimmed heap with fusegrad's pool emptied (`suite.step_peak_mib`);
- compile extra: first growth minus compiled growth minus fusegrad's workspace (which
  the first call allocates and the compiled one finds resident): the memory compiling
  held at the first forward and backward's peak (about 0 for eager). Compilers that run
  as subprocesses (fusegrad's LLVM opt and llc, Inductor's C++ compiler and compile
  workers) are in no figure here;
- update peak: the largest VmHWM during an optimizer update;
- peak RSS: the largest VmHWM of the process (model building included);
- after: VmRSS after the steady steps, split into `before`, the optimizer state (AdamW's
  moments, created by the first step), fusegrad's output pool (blocks kept for reuse,
  and blocks under outputs still alive: `host_memory.POOL.usage()`), fusegrad's thread
  workspace (`runtime.cpu.workspace_bytes()`), the free memory glibc's heaps keep
  (mallinfo2's fordblks), and the rest (compiled code, what compiling left behind,
  libraries loaded at the first call).
fusegrad's compile time is the sum of its stages over all the programs it compiled,
the backward of outputs without gradient compiled at the first backward included (its
"took" and "compiled in" debug records).
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import logging
import os
import statistics
import sys
import time
from typing import Any

import dynamic_shapes
import suite

MARKER = "@@real_size result@@ "
WORKLOADS = ("gpt2", "llama")
BACKENDS = ("eager", "inductor", "fusegrad")
BATCH, TOKENS, TINY_TOKENS = 2, 256, 32
MIB = 1 << 20


class CompileStages(logging.Handler):
    """fusegrad's compile seconds per stage, summed over every program and variant: its
    `Program` records each stage's time ("took"), the backend capture and import
    ("compiled in"). Also keeps the compile cache's line per compiled module, and counts
    the backwards among them (compiled at a first backward, after their forward)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seconds: dict[str, float] = {}
        self.programs = self.backwards = 0
        self.compiles: list[str] = []

    def _add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "%s: %s took %.3f s":
            self._add(record.args[1], record.args[2])
        elif record.msg == "%s: compiled in %.1f s (%s)":
            self.programs += 1
            for part in record.args[2].split(", "):
                stage, seconds = part.rsplit(" ", 2)[:2]
                if stage in ("capture", "import"):
                    self._add(stage, float(seconds))
        elif record.name == "fusegrad.compile_cache" and " dg ops): " in record.getMessage():
            self.compiles.append(record.getMessage())
            self.backwards += " dg ops): backward" in self.compiles[-1]

    def attach(self) -> None:
        for name in ("fusegrad.program", "fusegrad.frontend.backend", "fusegrad.compile_cache"):
            logger = logging.getLogger(name)
            logger.addHandler(self)
            logger.setLevel(logging.DEBUG)


def build(workload: str, tiny: bool) -> Any:
    """The model, randomly initialised (call after seeding)."""
    import transformers as tf

    small = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=512) if tiny else {}
    if workload == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config(
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **small))
    size = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                intermediate_size=128, vocab_size=512) if tiny else dict(
        num_hidden_layers=12, hidden_size=768, num_attention_heads=12,
        intermediate_size=2048, vocab_size=32000)
    return tf.LlamaForCausalLM(tf.LlamaConfig(max_position_embeddings=TOKENS, **size))


def malloc_free_bytes() -> int | None:
    """Free bytes glibc's heaps hold (mallinfo2's fordblks, all arenas), if glibc >= 2.33."""
    try:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return None

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
            "fordblks", "keepcost")]
    mallinfo2.restype = MallInfo2
    return mallinfo2().fordblks


def _kib(field: str) -> int:
    value = suite._proc_status_kib(field)
    if value is None:
        raise SystemExit("real_size.py reads /proc/self/status (Linux only)")
    return value


def child(workload: str, backend: str, steps: int, threads: int | None,
          tiny: bool) -> dict[str, Any]:
    """One workload on one backend, in this (fresh) process."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    stages = CompileStages()
    compile_model = {"eager": lambda m: m, "inductor": torch.compile}.get(backend)
    if backend == "fusegrad":
        import fusegrad  # noqa: F401  (registers the backend)
        stages.attach()
        compile_model = lambda m: torch.compile(m, backend="fusegrad")
    torch.manual_seed(0)
    model = build(workload, tiny)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (BATCH, TINY_TOKENS if tiny else TOKENS),
                        generator=torch.Generator().manual_seed(0))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    compiled = compile_model(model)

    def forward_backward() -> Any:
        loss = compiled(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach()

    def update() -> None:
        opt.step()
        opt.zero_grad()

    def step() -> list:
        loss = forward_backward()
        update()
        return [loss]

    setup_peak = _kib("VmHWM")
    gc.collect()
    suite._malloc_trim()  # what building the model freed, as before the clean step below
    kib = {"before": _kib("VmRSS"), "setup_peak": setup_peak}
    peaks_reset = suite._reset_peak_rss()
    times, losses = [], []
    for i in range(steps):
        start = time.perf_counter()
        phase = "first" if i == 0 else "steady"
        suite._reset_peak_rss()
        losses.append(forward_backward().item())
        fwd_bwd = _kib("VmHWM")
        suite._reset_peak_rss()
        update()
        times.append(time.perf_counter() - start)
        for name, peak in ((f"{phase}_fwd_bwd_peak", fwd_bwd), (f"{phase}_update_peak",
                                                                 _kib("VmHWM"))):
            kib[name] = max(kib.get(name, 0), peak)
    kib["after"] = _kib("VmRSS")
    tensors = {"parameters": sum(p.numel() * p.element_size() for p in model.parameters()),
               "optimizer_state": sum(v.numel() * v.element_size() for s in opt.state.values()
                                      for v in s.values() if isinstance(v, torch.Tensor))}
    held = {"pool_free": 0, "pool_lent": 0, "workspace": 0, "malloc_free": malloc_free_bytes()}
    if backend == "fusegrad":
        from fusegrad.runtime import cpu, host_memory
        held.update(zip(("pool_free", "pool_lent"), host_memory.POOL.usage()))
        held["workspace"] = cpu.workspace_bytes()
    fwd_bwd_growth = suite.step_peak_mib(suite.Step(lambda: [forward_backward()],
                                                    release=opt.zero_grad))
    step_peak = suite.step_peak_mib(suite.Step(step, release=opt.zero_grad))
    kib["process_peak"] = max(max(kib.values()), _kib("VmHWM"))
    return {"first_s": times[0], "steady_s": statistics.median(times[1:]),
            "step_s": times, "losses": losses, "step_peak_mib": step_peak,
            "fwd_bwd_growth_mib": fwd_bwd_growth,
            "memory_mib": {k: v / 1024 for k, v in kib.items()}, "peaks_reset": peaks_reset,
            "tensors_mib": {k: v / MIB for k, v in tensors.items()},
            "held_mib": {k: None if v is None else v / MIB for k, v in held.items()},
            "threads": torch.get_num_threads(),
            "compile_stages_s": stages.seconds, "fusegrad_programs": stages.programs,
            "fusegrad_backwards": stages.backwards, "fusegrad_compiles": stages.compiles}


def rest_mib(result: dict[str, Any]) -> float:
    """RSS after the steps not accounted for by `before`, the optimizer state and what
    fusegrad's pool and workspace and glibc's free lists hold."""
    held = sum(v or 0.0 for v in result["held_mib"].values())
    return result["memory_mib"]["after"] - result["memory_mib"]["before"] \
        - result["tensors_mib"]["optimizer_state"] - held


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def markdown(results: dict[str, dict[str, dict[str, Any]]]) -> tuple[str, bool]:
    """Two tables (time and memory; memory accounting), and whether every row passed."""
    times = ["| workload | backend | first step (s) | fusegrad compile (s) | steady step (ms) "
             "| vs eager | vs Inductor | max loss diff | step peak (MiB) | peak RSS (MiB) |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    memory = ["| workload | backend | before | fwd+bwd growth: first | compiled | compile extra "
              "| update peak | after | optimizer state | pool free | pool lent | workspace "
              "| malloc free | rest |", "|---|---|" + "---:|" * 12]
    passed = True
    for workload, by_backend in results.items():
        steady = {b: r.get("steady_s") for b, r in by_backend.items()}
        for backend, r in by_backend.items():
            cell, ok = dynamic_shapes.check(r, by_backend.get("eager"))
            passed &= ok
            if "error" in r:
                times.append(f"| {workload} | {backend} | {r['error'].splitlines()[-1][:120]} |")
                continue
            compile_s = sum(r["compile_stages_s"].values()) if backend == "fusegrad" else None
            ratio = [f"{steady[ref] / r['steady_s']:.2f}x" if steady.get(ref) and r["steady_s"]
                     else "-" for ref in ("eager", "inductor")]
            m, t, h = r["memory_mib"], r["tensors_mib"], r["held_mib"]
            times.append(
                f"| {workload} | {backend} | {r['first_s']:.1f} | "
                f"{'-' if compile_s is None else f'{compile_s:.1f}'} | "
                f"{1e3 * r['steady_s']:.0f} | {ratio[0]} | {ratio[1]} | {cell} | "
                f"{_mib(r['step_peak_mib'])} | {m['process_peak']:.0f} |")
            first_growth = m["first_fwd_bwd_peak"] - m["before"]
            extra = first_growth - h["workspace"] - r["fwd_bwd_growth_mib"] \
                if r["peaks_reset"] and r["fwd_bwd_growth_mib"] is not None else None
            cells = [m["before"], first_growth, r["fwd_bwd_growth_mib"], extra,
                     max(m["first_update_peak"], m["steady_update_peak"]), m["after"],
                     t["optimizer_state"], h["pool_free"], h["pool_lent"], h["workspace"],
                     h["malloc_free"], rest_mib(r)]
            memory.append(f"| {workload} | {backend} | " + " | ".join(map(_mib, cells)) + " |")
    caption = "Memory (MiB; after = before + the columns right of it):"
    return "\n".join(times) + f"\n\n{caption}\n\n" + "\n".join(memory), passed


def stage_table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """fusegrad's compile seconds per stage, per workload."""
    rows = {w: r["fusegrad"]["compile_stages_s"] for w, r in results.items()
            if "compile_stages_s" in r.get("fusegrad", {})}
    if not rows:
        return ""
    names = list(dict.fromkeys(["capture", "import", *(s for st in rows.values() for s in st)]))
    lines = ["| workload | programs | backwards compiled apart | " + " | ".join(names) + " |",
             "|---|---:|---:|" + "---:|" * len(names)]
    for workload, stages in rows.items():
        r = results[workload]["fusegrad"]
        lines.append(f"| {workload} | {r['fusegrad_programs']} | "
                     f"{r['fusegrad_backwards']} | "
                     + " | ".join(f"{stages.get(s, 0.0):.2f}" for s in names) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="gpt2", help="gpt2,llama (default gpt2)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="eager,inductor,fusegrad")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--steps", type=int, default=6,
                        help="steps per backend: the first, then the median of the rest (6)")
    parser.add_argument("--tiny", action="store_true", help="2-layer models (smoke tests)")
    parser.add_argument("--json", help="also write the raw results to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.steps < 2:
        parser.error("--steps: at least 2 (the first step, then steady ones)")
    if args.child:
        workload, backend = args.child.split(":")
        print(MARKER + json.dumps(child(workload, backend, args.steps, args.threads,
                                        args.tiny)), flush=True)
        return 0
    workloads, backends = args.only.split(","), args.backends.split(",")
    unknown = sorted(set(workloads) - set(WORKLOADS)) + sorted(set(backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown workload(s)/backend(s) {unknown}; known: {WORKLOADS}, {BACKENDS}")
    forwarded = ["--steps", str(args.steps)] + ["--tiny"] * args.tiny + (
        ["--threads", str(args.threads)] if args.threads else [])
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for workload in workloads:
        for backend in backends:
            r = results.setdefault(workload, {})[backend] = dynamic_shapes.run_fresh(
                os.path.abspath(__file__), ["--child", f"{workload}:{backend}", *forwarded],
                backend, MARKER)
            print(f"{workload} {backend}: " + (r["error"] if "error" in r else
                  f"first {r['first_s']:.1f} s, steady {1e3 * r['steady_s']:.0f} ms, "
                  f"peak RSS {r['memory_mib']['process_peak']:.0f} MiB"), flush=True)
    tables, passed = markdown(results)
    print(tables + "\n\nfusegrad's compile stages (s):\n\n" + stage_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": sys.argv[1:], "results": results}, f, indent=1)
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())

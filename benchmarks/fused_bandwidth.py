"""The bandwidth fusegrad's own kernels reach inside a training step, against a copy.

Issue 48's goal for fused pointwise and reduction kernels is 85% of the bandwidth a
device-to-device copy measures. Every kernel fusegrad launches is one (contractions,
convolutions and attention are library steps), so one profiled step gives all of them:
`torch.profiler` sees the runtime's driver-API launches, named by their PTX entry; a
kernel's bytes are those of the buffers its launch step passes (each read or written
once: a broadcast operand is counted whole, a row a kernel reads twice once). The
profiled kernels are matched to the launch steps in the order the runtime issued them
(`record_calls`), which is their order on the one stream. Only a program launched
plainly can be profiled this way: a CUDA graph's replay issues no launch steps.
"""
from __future__ import annotations

import contextlib
import statistics
from typing import Any, Callable, Iterator

import torch

LARGE_BYTES = 16 << 20  # kernels moving at least this much: bandwidth, not launch latency


def copy_gbps(device: torch.device, nbytes: int = 1 << 30, iters: int = 10) -> float:
    """A device-to-device copy of `nbytes` (read and written: 2 x nbytes moved), GB/s of
    the median of `iters` copies timed with CUDA events."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return 2 * nbytes / statistics.median(times) / 1e6


@contextlib.contextmanager
def record_calls() -> Iterator[list[tuple[Any, str]]]:
    """The (CudaProgram, function name) of every plan function run inside, in order."""
    from fusegrad.runtime.cuda import CudaProgram
    calls: list[tuple[Any, str]] = []
    run = CudaProgram.run

    def recording(self: Any, name: str, *inputs: Any, **kwargs: Any) -> list:
        calls.append((self, name))
        return run(self, name, *inputs, **kwargs)
    CudaProgram.run = recording
    try:
        yield calls
    finally:
        CudaProgram.run = run


def _launch_bytes(program: Any, name: str) -> list[tuple[dict, int]]:
    """Each launch step of static function @name with the bytes of its buffers."""
    from fusegrad.runtime.abi import TensorSig
    f = program.plan.functions[name]
    sigs = {f"arg{i}": sig for i, sig in
            enumerate([*f.inputs, *(f.outputs[j] for j in f.computed)])}
    out = []
    for s in f.steps:
        if s["op"] == "alloc":
            sigs[s["buf"]] = TensorSig(tuple(s["shape"]), s["dtype"])
        elif s["op"] == "view":  # kernels take root buffers; a view is counted as its shape
            sigs[s["buf"]] = TensorSig(tuple(s["shape"]), sigs[s["base"]].dtype)
        elif s["op"] == "index_flag":
            sigs[s["buf"]] = TensorSig((), "i32")
        elif s["op"] == "constant":
            c = program.plan.constants[s["name"]]
            sigs[s["buf"]] = TensorSig(tuple(c.shape), c.dtype)
        elif s["op"] == "launch":
            bufs = [sigs[a["buf"]] for a in s["args"] if "buf" in a]
            out.append(({**s, "buffers": [f"{b.dtype}{list(b.shape)}" for b in bufs]},
                        sum(b.nbytes for b in bufs)))
    return out


def kernel_bandwidth(step: Callable[[], Any], copy: float, top: int = 12) -> dict[str, Any]:
    """Profile one call of `step` (a training step of a program launched plainly) and
    measure its fusegrad kernels against `copy` GB/s: all of them, those moving at least
    LARGE_BYTES, and the `top` longest (module, buffers, MB, us, % of copy); and where the
    step's GPU time goes: every kernel of the step (library ones too) summed by name, the
    `top` largest. {"error": ...} when the profile does not match the launch steps."""
    from torch.profiler import ProfilerActivity, profile
    with record_calls() as calls, profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    if any(program.plan.functions[name].symbolic for program, name in calls):
        return {"error": "a function of symbolic sizes ran (bytes not counted)"}
    launches = [ls for program, name in calls for ls in _launch_bytes(program, name)]
    names = {s["kernel"] for s, _ in launches}
    device_events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    by_name: dict[str, list[float]] = {}
    for e in device_events:
        by_name.setdefault(e.name[:90], []).append(e.device_time)
    busy = {"busy_ms": sum(map(sum, by_name.values())) / 1e3,
            "by_name": [{"name": n, "calls": len(t), "ms": sum(t) / 1e3} for n, t in
                        sorted(by_name.items(), key=lambda kv: -sum(kv[1]))[:top]]}
    events = sorted((e for e in device_events if e.name in names),
                    key=lambda e: e.time_range.start)
    if [e.name for e in events] != [s["kernel"] for s, _ in launches]:
        return {"error": f"{len(events)} profiled kernels for {len(launches)} launch steps",
                **busy}
    timed = [(s, nbytes, e.device_time) for (s, nbytes), e in zip(launches, events)]

    def share(rows: list[tuple[dict, int, float]]) -> dict[str, Any]:
        nbytes, us = sum(r[1] for r in rows), sum(r[2] for r in rows)
        gbps = nbytes / us / 1e3 if us else 0.0
        return {"kernels": len(rows), "MB": nbytes / 1e6, "ms": us / 1e3, "GBps": gbps,
                "of_copy": gbps / copy}
    large = [r for r in timed if r[1] >= LARGE_BYTES]
    slowest = sorted(timed, key=lambda r: -r[2])[:top]
    return {"copy_GBps": copy, "all": share(timed), "large": share(large),
            "large_below_85": sum(r[1] / r[2] / 1e3 < 0.85 * copy for r in large),
            "slowest": [{"module": s["module"], "grid": s["grid"], "block": s["block"],
                         "buffers": s["buffers"], "MB": b / 1e6, "us": us,
                         "of_copy": b / us / 1e3 / copy} for s, b, us in slowest],
            **busy}

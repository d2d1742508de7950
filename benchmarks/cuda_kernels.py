"""CUDA kernels: correctness against eager PyTorch and achieved bandwidth.

Two halves, so the GPU machine needs no MLIR:

    # here (MLIR, no GPU): compile every case into an artifact folder
    .venv/bin/python benchmarks/cuda_kernels.py build .gpu_artifacts
    # on the GPU machine (torch + cuda-bindings only; the checkout on PYTHONPATH)
    PYTHONPATH=. python3 benchmarks/cuda_kernels.py run .gpu_artifacts

`run` checks every correctness case against eager torch on the GPU (fresh
random inputs for every run, cubin and driver-JITed PTX), and three models'
fused training graphs against the dg interpreter's outputs computed here; then
times the large cases with CUDA events (median of 20 after 5 warm-ups) and
reports bandwidth (bytes read + written once) as a fraction of a measured
device-to-device copy (`dst.copy_(src)`, same size).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------- the cases (dg text)

def _t(shape: tuple, dt: str = "f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{dt}>"


def ew_text(r: int, c: int) -> str:
    t = _t((r, c))
    return f"""
func.func @ew(%a: {t}, %b: {t}, %c: {t}) -> {t} {{
  %0 = "dg.add"(%a, %b) : ({t}, {t}) -> {t}
  %1 = "dg.exp"(%0) : ({t}) -> {t}
  %2 = "dg.mul"(%1, %c) : ({t}, {t}) -> {t}
  return %2 : {t}
}}"""


def unary_text(r: int, c: int, op: str, dt: str = "f32") -> str:
    """@<op>_<dt>: `op` of one operand, "exp" in `dt` or "convert" from it to bf16."""
    t = _t((r, c), dt)
    out = _t((r, c), "bf16") if op == "convert" else t
    return f"""
func.func @{op}_{dt}(%a: {t}) -> {out} {{
  %0 = "dg.{op}"(%a) : ({t}) -> {out}
  return %0 : {out}
}}"""


def softmax_text(r: int, c: int) -> str:
    t, v = _t((r, c)), _t((r,))
    return f"""
func.func @softmax(%x: {t}) -> {t} {{
  %max = "dg.reduce_max"(%x) {{dims = array<i64: 1>}} : ({t}) -> {v}
  %max_b = "dg.broadcast_in_dim"(%max) {{dims = array<i64: 0>}} : ({v}) -> {t}
  %shifted = "dg.sub"(%x, %max_b) : ({t}, {t}) -> {t}
  %e = "dg.exp"(%shifted) : ({t}) -> {t}
  %sum = "dg.reduce_sum"(%e) {{dims = array<i64: 1>}} : ({t}) -> {v}
  %sum_b = "dg.broadcast_in_dim"(%sum) {{dims = array<i64: 0>}} : ({v}) -> {t}
  %y = "dg.div"(%e, %sum_b) : ({t}, {t}) -> {t}
  return %y : {t}
}}"""


def rowsum_text(r: int, c: int) -> str:
    t, v = _t((r, c)), _t((r,))
    return f"""
func.func @rowsum(%x: {t}) -> {v} {{
  %0 = "dg.reduce_sum"(%x) {{dims = array<i64: 1>}} : ({t}) -> {v}
  return %0 : {v}
}}"""


def colsum_text(r: int, c: int) -> str:
    t, v = _t((r, c)), _t((c,))
    return f"""
func.func @colsum(%x: {t}) -> {v} {{
  %0 = "dg.reduce_sum"(%x) {{dims = array<i64: 0>}} : ({t}) -> {v}
  return %0 : {v}
}}"""


def total_text(r: int, c: int) -> str:
    t = _t((r, c))
    return f"""
func.func @total(%x: {t}) -> tensor<f32> {{
  %0 = "dg.reduce_sum"(%x) {{dims = array<i64: 0, 1>}} : ({t}) -> tensor<f32>
  return %0 : tensor<f32>
}}"""


def loss_count_text(n: int) -> str:
    """A loss's two sums: the labels that are not ignored (an i64 count) and the values
    they select (f32): integer combiners in a parallel reduction."""
    x, l, b = _t((n,)), _t((n,), "i64"), _t((n,), "i1")
    return f"""
func.func @loss(%x: {x}, %l: {l}) -> (tensor<i64>, tensor<f32>) {{
  %ign = "dg.full"() {{value = -100.0 : f64}} : () -> {l}
  %valid = "dg.compare"(%l, %ign) {{direction = "ne"}} : ({l}, {l}) -> {b}
  %n = "dg.convert"(%valid) : ({b}) -> {l}
  %count = "dg.reduce_sum"(%n) {{dims = array<i64: 0>}} : ({l}) -> tensor<i64>
  %zero = "dg.full"() {{value = 0.0 : f64}} : () -> {x}
  %kept = "dg.select"(%valid, %x, %zero) : ({b}, {x}, {x}) -> {x}
  %sum = "dg.reduce_sum"(%kept) {{dims = array<i64: 0>}} : ({x}) -> tensor<f32>
  return %count, %sum : tensor<i64>, tensor<f32>
}}"""


def any_rows_text(r: int, c: int) -> str:
    """Per row, a sum of exp and whether any element passes 2.5 (a boolean max)."""
    t, v, tb, vb = _t((r, c)), _t((r,)), _t((r, c), "i1"), _t((r,), "i1")
    return f"""
func.func @any_rows(%x: {t}) -> ({v}, {vb}) {{
  %e = "dg.exp"(%x) : ({t}) -> {t}
  %s = "dg.reduce_sum"(%e) {{dims = array<i64: 1>}} : ({t}) -> {v}
  %k = "dg.full"() {{value = 2.5 : f64}} : () -> {t}
  %hit = "dg.compare"(%x, %k) {{direction = "gt"}} : ({t}, {t}) -> {tb}
  %any = "dg.reduce_max"(%hit) {{dims = array<i64: 1>}} : ({tb}) -> {vb}
  return %s, %any : {v}, {vb}
}}"""


def mlp_text(m: int, k: int, n: int) -> str:
    x, w, b, y = _t((m, k)), _t((k, n)), _t((n,)), _t((m, n))
    return f"""
func.func @mlp(%x: {x}, %w: {w}, %b: {b}) -> {y} {{
  %0 = "dg.matmul"(%x, %w) : ({x}, {w}) -> {y}
  %1 = "dg.broadcast_in_dim"(%b) {{dims = array<i64: 1>}} : ({b}) -> {y}
  %2 = "dg.add"(%0, %1) : ({y}, {y}) -> {y}
  %3 = "dg.tanh"(%2) : ({y}) -> {y}
  return %3 : {y}
}}"""


def transpose_text() -> str:
    return """
func.func @tr(%x: tensor<3x5x7xf32>) -> tensor<7x3x5xf32> {
  %0 = "dg.transpose"(%x) {perm = array<i64: 2, 0, 1>} : (tensor<3x5x7xf32>) -> tensor<7x3x5xf32>
  return %0 : tensor<7x3x5xf32>
}"""


def ln_text(r: int, c: int) -> str:
    """sum(tanh(layernorm(x) * g)), no eps: mean, variance, rsqrt, scale, full reduction."""
    t, v, g = _t((r, c)), _t((r,)), _t((c,))
    inv = 1.0 / c
    return f"""
func.func @ln(%x: {t}, %g: {g}) -> tensor<f32> {{
  %s = "dg.reduce_sum"(%x) {{dims = array<i64: 1>}} : ({t}) -> {v}
  %n = "dg.full"() {{value = {inv!r} : f64}} : () -> {v}
  %m = "dg.mul"(%s, %n) : ({v}, {v}) -> {v}
  %mb = "dg.broadcast_in_dim"(%m) {{dims = array<i64: 0>}} : ({v}) -> {t}
  %c = "dg.sub"(%x, %mb) : ({t}, {t}) -> {t}
  %c2 = "dg.mul"(%c, %c) : ({t}, {t}) -> {t}
  %var = "dg.reduce_sum"(%c2) {{dims = array<i64: 1>}} : ({t}) -> {v}
  %vm = "dg.mul"(%var, %n) : ({v}, {v}) -> {v}
  %r = "dg.rsqrt"(%vm) : ({v}) -> {v}
  %rb = "dg.broadcast_in_dim"(%r) {{dims = array<i64: 0>}} : ({v}) -> {t}
  %y = "dg.mul"(%c, %rb) : ({t}, {t}) -> {t}
  %gb = "dg.broadcast_in_dim"(%g) {{dims = array<i64: 1>}} : ({g}) -> {t}
  %z = "dg.mul"(%y, %gb) : ({t}, {t}) -> {t}
  %th = "dg.tanh"(%z) : ({t}) -> {t}
  %l = "dg.reduce_sum"(%th) {{dims = array<i64: 0, 1>}} : ({t}) -> tensor<f32>
  return %l : tensor<f32>
}}"""


# dg-fuse as `Program` runs it for CUDA
FUSE = "dg-fuse{row-temps=0}"

# name -> (dg text, passes before the CUDA pipeline, compile options, function to run)
CASES: dict[str, tuple[str, str, dict, str]] = {
    "ew_small": (ew_text(256, 1000), FUSE, {}, "ew"),
    "ew_odd": (ew_text(7, 33), FUSE, {}, "ew"),
    "softmax_small": (softmax_text(4, 8), FUSE, {}, "softmax"),
    "softmax_mid": (softmax_text(64, 1000), FUSE, {}, "softmax"),
    "rowsum_mid": (rowsum_text(128, 1000), FUSE, {}, "rowsum"),
    "colsum_mid": (colsum_text(128, 1000), FUSE, {}, "colsum"),
    "mlp": (mlp_text(64, 128, 256), FUSE, {}, "mlp"),
    "transpose": (transpose_text(), FUSE, {}, "tr"),
    "ln": (ln_text(64, 512), FUSE, {}, "ln"),
    "ln_two_stage": (ln_text(256, 1024), FUSE, {}, "ln"),
    "sum_mid": (total_text(1000, 333), FUSE, {}, "total"),
    "ln_vjp": (ln_text(64, 512), "dg-autodiff{joint=true}," + FUSE, {}, "ln_vjp"),
    "loss_count": (loss_count_text(1000), FUSE, {}, "loss"),
    "any_rows": (any_rows_text(64, 300), FUSE, {}, "any_rows"),
    # large: bandwidth
    "ew_big": (ew_text(8192, 8192), FUSE, {}, "ew"),
    "softmax_big": (softmax_text(8192, 8192), FUSE, {}, "softmax"),
    "softmax_big_rb256": (softmax_text(8192, 8192), FUSE, {"row_block": 256}, "softmax"),
    "softmax_big_rb512": (softmax_text(8192, 8192), FUSE, {"row_block": 512}, "softmax"),
    "rowsum_big": (rowsum_text(8192, 8192), FUSE, {}, "rowsum"),
    "rowsum_big_rb256": (rowsum_text(8192, 8192), FUSE, {"row_block": 256}, "rowsum"),
    "sum_big": (total_text(8192, 8192), FUSE, {}, "total"),
    "sum_big_u4": (total_text(8192, 8192), FUSE, {"full_unroll": 4}, "total"),
    "sum_big_u8": (total_text(8192, 8192), FUSE, {"full_unroll": 8}, "total"),
    "softmax_wide": (softmax_text(512, 32768), FUSE, {}, "softmax"),
    "softmax_narrow": (softmax_text(65536, 1024), FUSE, {}, "softmax"),
    # rows read again per pass (row-cache=0) against kept in registers (the default)
    "softmax_big_nocache": (softmax_text(8192, 8192), FUSE, {"row_cache": 0}, "softmax"),
    "softmax_wide_nocache": (softmax_text(512, 32768), FUSE, {"row_cache": 0}, "softmax"),
    "softmax_narrow_nocache": (softmax_text(65536, 1024), FUSE, {"row_cache": 0},
                               "softmax"),
    # one operand read per column: several columns per thread (the default) against one
    "exp_big": (unary_text(8192, 8192, "exp"), FUSE, {}, "exp_f32"),
    "exp_big_c1": (unary_text(8192, 8192, "exp"), FUSE, {"pointwise_bytes": 0}, "exp_f32"),
    "round_big": (unary_text(8192, 8192, "convert"), FUSE, {}, "convert_f32"),
    "round_big_c1": (unary_text(8192, 8192, "convert"), FUSE, {"pointwise_bytes": 0},
                     "convert_f32"),
    "exp_bf16_big": (unary_text(8192, 8192, "exp", "bf16"), FUSE, {}, "exp_bf16"),
    "exp_bf16_big_c1": (unary_text(8192, 8192, "exp", "bf16"), FUSE, {"pointwise_bytes": 0},
                        "exp_bf16"),
    "ln_big": (ln_text(8192, 8192), FUSE, {}, "ln"),
    "ln_big_nocache": (ln_text(8192, 8192), FUSE, {"row_cache": 0}, "ln"),
}


MODELS = ("mlp_train", "transformer_layer_train", "cnn_train")


def _models(d: str) -> dict[str, str]:
    """Train three small models once with fusegrad on the CPU; their fused dg graphs."""
    import glob

    import torch

    import fusegrad

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                              torch.nn.Linear(64, 10))
    tel = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 10))
    for name, model, x in (("mlp_train", mlp, torch.randn(16, 32)),
                           ("transformer_layer_train", tel, torch.randn(2, 16, 64)),
                           ("cnn_train", cnn, torch.randn(2, 3, 8, 8))):
        fusegrad.compile(model, dump_dir=os.path.join(d, name))(x).square().sum().backward()
    return {name: glob.glob(os.path.join(d, name, "*.fused-wrt*.mlir"))[0] for name in MODELS}


def _model_io(text: str) -> dict:
    """Inputs and reference outputs (dg interpreter, CPU) of main_fwd and main_bwd (and
    main, where the module still holds it); the backward takes the forward's saved values
    and random cotangents."""
    import torch
    from mlir import ir

    from fusegrad.context import make_context
    from fusegrad.dialects.interpreter import run_function
    from fusegrad.dialects.types import TensorSpec

    gen = torch.Generator().manual_seed(0)

    def rand(t: ir.Type) -> "torch.Tensor":
        spec = TensorSpec.from_mlir(t)
        return torch.randn(spec.shape, generator=gen, dtype=torch.float32)

    io = {}
    with make_context():
        module = ir.Module.parse(text)
        fns = {ir.StringAttr(op.attributes["sym_name"]).value: op
               for op in module.body.operations if op.operation.name == "func.func"}
        fwd_ins = None
        for name in [n for n in ("main", "main_fwd") if n in fns]:
            ftype = ir.FunctionType(ir.TypeAttr(fns[name].attributes["function_type"]).value)
            fwd_ins = fwd_ins or [rand(t) for t in ftype.inputs]
            io[name] = (fwd_ins, run_function(fns[name], fwd_ins))
        n_out = ir.IntegerAttr(fns["main_fwd"].attributes["dg.num_outputs"]).value
        saved = io["main_fwd"][1][n_out:]
        ftype = ir.FunctionType(ir.TypeAttr(fns["main_bwd"].attributes["function_type"]).value)
        cts = [rand(t) for t in list(ftype.inputs)[len(saved):]]
        io["main_bwd"] = (saved + cts, run_function(fns["main_bwd"], saved + cts))
    return io


def build(out: str, only: list[str]) -> None:
    from mlir import ir

    from fusegrad.context import make_context
    from fusegrad.codegen.cuda.compile import compile_cuda
    from fusegrad.pass_manager import run_pipeline

    for name, (text, pre, opts, _) in CASES.items():
        if only and name not in only:
            continue
        with make_context():
            module = ir.Module.parse(text)
            run_pipeline(module, pre)
            plan = compile_cuda(module, cubin=True, **opts)
        plan.save(os.path.join(out, name))
        print(f"built {name}: {sum(len(f.steps) for f in plan.functions.values())} steps, "
              f"{len(plan.modules)} kernel modules")
    if only and not set(only) & set(MODELS):
        return
    import tempfile

    import torch
    with tempfile.TemporaryDirectory() as d:
        for name, path in _models(d).items():
            if only and name not in only:
                continue
            with open(path) as f:
                text = f.read()
            io = _model_io(text)
            with make_context():
                plan = compile_cuda(ir.Module.parse(text), cubin=True)
            plan.save(os.path.join(out, name))
            torch.save(io, os.path.join(out, name, "io.pt"))
            print(f"built {name}: {sum(len(f.steps) for f in plan.functions.values())} steps, "
                  f"{len(plan.modules)} kernel modules, reference outputs from the dg "
                  "interpreter")


# ---------------------------------------------------------------- references (torch)

def _ln_ref(x: Any, g: Any) -> Any:
    m = x.mean(1, keepdim=True)
    c = x - m
    var = (c * c).mean(1, keepdim=True)
    return (c * var.rsqrt() * g).tanh().sum()


def _ln_vjp_ref(x: Any, g: Any, ct: Any) -> list:
    import torch
    x = x.detach().requires_grad_()
    g = g.detach().requires_grad_()
    y = _ln_ref(x, g)
    gx, gg = torch.autograd.grad(y, (x, g), ct)
    return [y, gx, gg]


REFS: dict[str, Callable[..., list]] = {
    "ew": lambda a, b, c: [(a + b).exp() * c],
    "softmax": lambda x: [x.softmax(1)],
    "rowsum": lambda x: [x.sum(1)],
    "colsum": lambda x: [x.sum(0)],
    "total": lambda x: [x.sum()],
    "mlp": lambda x, w, b: [(x @ w + b).tanh()],
    "tr": lambda x: [x.permute(2, 0, 1)],
    "ln": lambda x, g: [_ln_ref(x, g)],
    "ln_vjp": _ln_vjp_ref,
    "loss": lambda x, l: [(l != -100).sum(), x.where(l != -100, 0).sum()],
    "any_rows": lambda x: [x.exp().sum(1), (x > 2.5).any(1)],
    "exp_f32": lambda x: [x.exp()],
    "exp_bf16": lambda x: [x.exp()],
    "convert_f32": lambda x: [x.bfloat16()],
}


def _inputs(sigs: list, gen: Any) -> list:
    """Random inputs: floats normal, integers labels in {-100, 0, ..., 9}."""
    import torch

    floats = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}

    def one(s: Any) -> Any:
        if s.dtype in floats:
            return torch.randn(s.shape, generator=gen, device="cuda",
                               dtype=torch.float32).to(floats[s.dtype])
        labels = torch.randint(-1, 10, s.shape, generator=gen, device="cuda")
        return labels.where(labels >= 0, -100)
    return [one(s) for s in sigs]


def _big(name: str) -> bool:
    return any(tag in name for tag in ("_big", "_wide", "_narrow"))


def _median_ms(fn: Callable[[], Any], warmup: int = 5, iters: int = 20) -> float:
    """Median GPU time of one call: events around each call, recorded without waiting in
    between, so the host queues the calls ahead of the GPU and its launch overhead (Python
    steps, tens of microseconds) is not counted with the kernels (on an H200 a full sum of
    256 MB runs in about 60 us)."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    torch.cuda._sleep(50_000_000)  # ~25 ms of GPU spin: the host queues every call meanwhile
    pairs = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        pairs.append((a, b))
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) for a, b in pairs)
    return times[len(times) // 2]


def run(art: str, only: list[str], results: str | None) -> int:
    import torch

    from fusegrad.runtime.cuda import CudaProgram, device_chip

    dev = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name(dev)} ({device_chip(dev)}), torch "
          f"{torch.__version__}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    failures = 0
    report: dict = {"device": torch.cuda.get_device_name(dev), "checks": {}, "timings": {}}
    for name, (_, _, _, fname) in CASES.items():
        if only and name not in only:
            continue
        path = os.path.join(art, name)
        if not os.path.exists(path):
            print(f"{name}: no artifact")
            continue
        for kind in (["cubin", "ptx"] if not _big(name)
                     else ["cubin"]):
            prog = CudaProgram.load(path)
            if kind == "ptx":  # force the driver JIT path: drop the cubins
                for m in prog.plan.modules.values():
                    for img in m.images.values():
                        img.cubin = None
            f = prog.plan.functions[fname]
            xs = _inputs(f.inputs, gen)
            outs = prog.run(fname, *xs)
            refs = REFS[fname](*xs)
            torch.cuda.synchronize()
            errs = []
            for o, r in zip(outs, refs):
                r = r.to(o.dtype)
                denom = r.double().norm().item() or 1.0
                errs.append((o.double() - r.double()).norm().item() / denom)
            # 16-bit results: one rounding apart (an approximate exp rounds either way)
            ok = all(e < (1e-2 if o.element_size() == 2 else 1e-5) for e, o in zip(errs, outs)) \
                and all(torch.isfinite(o).all() for o in outs)
            failures += not ok
            report["checks"][f"{name}/{kind}"] = errs
            print(f"{'ok  ' if ok else 'FAIL'} {name:22s} {kind:5s} rel.err "
                  + " ".join(f"{e:.2e}" for e in errs))
            if _big(name):
                bytes_moved = sum(x.numel() * x.element_size() for x in xs) + sum(
                    o.numel() * o.element_size() for o in outs)
                ms = _median_ms(lambda: prog.run(fname, *xs))
                eager = _median_ms(lambda: REFS[fname](*xs))
                src = torch.randn(bytes_moved // 8, device="cuda")
                dst = torch.empty_like(src)
                copy_ms = _median_ms(lambda: dst.copy_(src))
                bw, cbw = bytes_moved / ms / 1e6, bytes_moved / copy_ms / 1e6
                report["timings"][name] = {"ms": ms, "eager_ms": eager, "copy_ms": copy_ms,
                                           "GBps": bw, "copy_GBps": cbw,
                                           "bytes": bytes_moved}
                print(f"     {name:22s} {ms:.3f} ms  {bw:.0f} GB/s  = {bw / cbw:.1%} of copy "
                      f"({cbw:.0f} GB/s, {copy_ms:.3f} ms)  eager {eager:.3f} ms "
                      f"({bytes_moved / eager / 1e6:.0f} GB/s)")
                del src, dst
            prog.close()
    for name in MODELS:
        path = os.path.join(art, name)
        if only and name not in only:
            continue
        if not os.path.exists(path):  # its build failed: say so, do not skip it quietly
            print(f"FAIL {name:32s} not built (see the build's output)")
            failures += 1
            continue
        io = torch.load(os.path.join(path, "io.pt"))
        prog = CudaProgram.load(path)
        for fname, (ins, refs) in io.items():
            outs = prog.run(fname, *[x.to(dev) for x in ins])
            torch.cuda.synchronize()
            errs = [((o.double().cpu() - r.double()).norm() / (r.double().norm() or 1.0)).item()
                    for o, r in zip(outs, refs)]
            ok = all(e < 1e-4 for e in errs)
            failures += not ok
            report["checks"][f"{name}/{fname}"] = errs
            print(f"{'ok  ' if ok else 'FAIL'} {name + '.' + fname:32s} {len(outs)} outputs, "
                  f"max rel.err {max(errs):.2e}")
        prog.close()
    if results:
        with open(results, "w") as fh:
            json.dump(report, fh, indent=1)
    print("FAILURES:", failures)
    return 1 if failures else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["build", "run"])
    p.add_argument("dir")
    p.add_argument("--only", nargs="*", default=[])
    p.add_argument("--results", default=None, help="run: write a JSON report here")
    a = p.parse_args()
    if a.mode == "build":
        build(a.dir, a.only)
        return 0
    return run(a.dir, a.only, a.results)


if __name__ == "__main__":
    sys.exit(main())

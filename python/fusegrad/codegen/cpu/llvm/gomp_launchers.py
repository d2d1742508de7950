"""dg-gomp-launchers: define `@K__parallel` (declared by dg-cpu-kernels) with libgomp.

Runs on the LLVM dialect, where a kernel `@K(lo, hi, args...)` has a flat list
of LLVM parameters (memrefs expanded into descriptor fields). For each
declaration `@K__parallel(rows, args...)` it emits

    @K__parallel(rows, args...): pack (rows, args...) in a stack struct,
                                 GOMP_parallel(@K__thread, &struct, 0, 0)
    @K__thread(ctx):             unpack; rows split in equal contiguous chunks by
                                 omp_get_thread_num()/omp_get_num_threads();
                                 @K(lo, hi, args...)

`GOMP_parallel` is the entry point of libgomp, the OpenMP runtime PyTorch's
CPU library ships and uses: compiled kernels run on PyTorch's threads, and
`num_threads = 0` takes the team size PyTorch set (`torch.set_num_threads`).
Launchers are `noinline`, like kernels: inlined, their argument stores made one
long block of stores in the entry that LLVM's SLP vectorizer took 0.5 s over
(a small CNN's training backward).
(MLIR's own OpenMP lowering calls `__kmpc_*`, which libgomp does not provide;
a second OpenMP runtime would compete with PyTorch's for the cores.)
"""
from __future__ import annotations

from mlir import ir

from ..kernels import PARALLEL_SUFFIX
from ....passes import PassError

_DECLS = """
llvm.func @GOMP_parallel(!llvm.ptr, !llvm.ptr, i32, i32)
llvm.func @omp_get_thread_num() -> i32
llvm.func @omp_get_num_threads() -> i32
"""


def _launcher_text(kernel: str, params: list[str]) -> tuple[str, str]:
    """MLIR (LLVM dialect) of `@kernel__parallel` and `@kernel__thread`, and the
    definition of the type alias their argument struct is named by (spelled out in
    each of their hundreds of getelementptrs, it made most of the text to parse)."""
    fields = ["i64"] + params  # rows, then the kernel's arguments after (lo, hi)
    struct = f"!ctx_{kernel}"
    alias = f"{struct} = !llvm.struct<({', '.join(fields)})>\n"
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(fields))
    stores = "\n".join(
        f"  %p{i} = llvm.getelementptr %ctx[0, {i}] : (!llvm.ptr) -> !llvm.ptr, {struct}\n"
        f"  llvm.store %a{i}, %p{i} : {t}, !llvm.ptr" for i, t in enumerate(fields))
    loads = "\n".join(
        f"  %p{i} = llvm.getelementptr %ctx[0, {i}] : (!llvm.ptr) -> !llvm.ptr, {struct}\n"
        f"  %v{i} = llvm.load %p{i} : !llvm.ptr -> {t}" for i, t in enumerate(fields))
    call_args = ", ".join(f"%v{i}" for i in range(1, len(fields)))
    call_types = ", ".join(["i64", "i64"] + params)
    sep = ", " if call_args else ""
    return alias, f"""
llvm.func @{kernel}{PARALLEL_SUFFIX}({args}) attributes {{passthrough = ["noinline"], sym_visibility = "private"}} {{
  %one = llvm.mlir.constant(1 : i64) : i64
  %ctx = llvm.alloca %one x {struct} : (i64) -> !llvm.ptr
{stores}
  %fn = llvm.mlir.addressof @{kernel}__thread : !llvm.ptr
  %zero = llvm.mlir.constant(0 : i32) : i32
  llvm.call @GOMP_parallel(%fn, %ctx, %zero, %zero) : (!llvm.ptr, !llvm.ptr, i32, i32) -> ()
  llvm.return
}}
llvm.func @{kernel}__thread(%ctx: !llvm.ptr) attributes {{sym_visibility = "private"}} {{
{loads}
  %tid32 = llvm.call @omp_get_thread_num() : () -> i32
  %nt32 = llvm.call @omp_get_num_threads() : () -> i32
  %tid = llvm.sext %tid32 : i32 to i64
  %nt = llvm.sext %nt32 : i32 to i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %rows_m1 = llvm.add %v0, %nt : i64
  %rows_up = llvm.sub %rows_m1, %c1 : i64
  %chunk = llvm.sdiv %rows_up, %nt : i64
  %lo0 = llvm.mul %tid, %chunk : i64
  %lo = llvm.intr.smin(%lo0, %v0) : (i64, i64) -> i64
  %hi0 = llvm.add %lo, %chunk : i64
  %hi = llvm.intr.smin(%hi0, %v0) : (i64, i64) -> i64
  llvm.call @{kernel}(%lo, %hi{sep}{call_args}) : ({call_types}) -> ()
  llvm.return
}}
"""


def _llvm_funcs(module: ir.Operation) -> dict[str, ir.Operation]:
    out = {}
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "llvm.func":
            out[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return out


def _params(fn: ir.Operation) -> list[str]:
    """The LLVM parameter types of the defined function `fn`, as they print."""
    return [str(a.type) for a in fn.regions[0].blocks[0].arguments]


def gomp_launchers(module: ir.Operation) -> None:
    funcs = _llvm_funcs(module)
    launchers = [n for n, f in funcs.items()
                 if n.endswith(PARALLEL_SUFFIX) and not f.regions[0].blocks]
    if not launchers:
        return
    body = module.regions[0].blocks[0]
    aliases, text = "", _DECLS
    for name in launchers:
        kernel = name[:-len(PARALLEL_SUFFIX)]
        if kernel not in funcs or not funcs[kernel].regions[0].blocks:
            raise PassError(f"launcher @{name} has no kernel @{kernel} defined",
                            funcs[name].location)
        params = _params(funcs[kernel])
        if params[:2] != ["i64", "i64"]:
            raise PassError(f"kernel @{kernel} does not start with (lo: i64, hi: i64): {params}",
                            funcs[kernel].location)
        # the kernel is declared so the launcher text parses on its own
        text += f"llvm.func @{kernel}({', '.join(params)})\n"
        alias, launcher = _launcher_text(kernel, params[2:])
        aliases += alias
        text += launcher
        funcs[name].erase()
    existing = set(_llvm_funcs(module))
    for op in ir.Module.parse(aliases + text).body.operations:
        if ir.StringAttr(op.operation.attributes["sym_name"]).value not in existing:
            body.append(op.operation.clone())

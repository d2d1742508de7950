"""dg-gpu-kernels: linalg on static memrefs -> `gpu.launch` kernels (CUDA target).

Runs after bufferization (the host function holds memrefs, allocs and linalg
ops); every linalg op except the contractions becomes part of a `gpu.launch`
emitted from a template, so the mapping to blocks and threads is explicit:

- **Pointwise** (fills, all-parallel generics, copies, transposes): one thread
  per element. When the innermost dim has >= `POINTWISE_2D_MIN` elements it runs
  on `threadIdx.x + blockIdx.x * B * C` (consecutive threads read consecutive
  addresses, no division per element), each thread taking C columns B apart
  where one column reads few bytes (`POINTWISE_READ_BYTES`), and the outer dims
  are flattened onto `blockIdx.y` (and `z` beyond 65535); otherwise the whole
  iteration space is flattened onto a 1-D grid.
- **Row kernels** (a run of ops parallel over the same rows, at least one of
  them a reduction over trailing dims with an associative combiner (float or
  integer: a sum, a max, a count, an "any" flag), touching shared
  buffers only row by row; softmax's max, sum and normalisation, a layer
  norm): one block per row, a row being every leading parallel dim the
  group's writes stay within (batch x tokens for a layer norm over
  (batch, tokens, hidden)), up to `row_block` threads (about 8 elements
  each). Each reduction is a
  thread-strided partial (coalesced) followed by `gpu.all_reduce` (warp
  shuffles plus a small shared array after `convert-gpu-to-nvvm`); per-row
  values (the max, the sum) stay in registers and reach global memory only
  if something outside the kernel reads them. Never one thread per row.
- **Other reductions** (over leading or middle dims: a bias gradient, a batch
  norm's per-channel sums): with such combiners and fewer than
  `THREAD_PER_OUTPUT_MIN` outputs, one block per output element, its threads
  striding over the flattened reduced dims, then `gpu.all_reduce`; otherwise
  (many outputs, or another combiner) one thread per output element, the
  reduction loops serial in registers (the threads of a warp read consecutive
  columns). One thread per output on a few outputs leaves the GPU idle: a
  batch norm's 64 channel sums over 32K elements each took milliseconds.
  Both add float sums in f64 (`wide_sums`).
- **Contractions** (`linalg.matmul`, `linalg.batch_matmul`, convolutions)
  stay on the host: the launch plan calls PyTorch (cuBLAS/cuDNN) for them. A
  zero fill directly feeding a matmul is dropped and the matmul marked
  `dg.gpu.overwrite` (the library call writes instead of accumulating).

Memrefs of run-time sizes (a program compiled once for every size) get the same
templates: a loop size is then a host value (`run_time_sizes.extents`), grids are
computed from it on the host and loop bounds in the kernel; choices that need a number
(pointwise grid shape, threads per row, block or thread per output) weigh a run-time
size at its hint (`loops.size_hint`), and a row of run-time length runs
`RUN_TIME_ROW_THREADS` threads. Kernels take such sizes as i64 parameters and buffers
of run-time sizes as pointers (`run_time_sizes.pass_sizes`).

Anything else at the host level that computes (a linalg op this pass cannot
map, `memref.store`, ...) fails the pass with the op named.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from mlir import ir
from mlir.dialects import arith, gpu, llvm, memref, scf

from ..common.loops import (DynSize, LoopOp, SizeClasses, clone_body, combine, identity,
                            mark_reassoc, parse as parse_loop_op, reduction_combiners,
                            size_hint)
from ..common.outline import CONV_GRAD_CALL as CONV_GRAD
from ...conversion.index_check import TAKE_ERROR
from ...conversion.scans import SCAN_ATTR
from ..common.memrefs import (VIEWS, Access, buffer_root, row_conflict,
                              static_layout, static_memref)
from ...passes import PassError, functions
from .run_time_sizes import (Extent, ceil_div, extents, index, is_empty, minimum,
                             pass_sizes, product, reshapes_as_casts)
from .wide_sums import WideSums

log = logging.getLogger(__name__)

POINTWISE_BLOCK = 256
# row kernels: at most this many threads per block, about ROW_ELEMS_PER_THREAD
# elements per thread (8192-wide f32 softmax on an H100: 256 threads 59% of copy
# bandwidth, 512 76%, 1024 85%; docs/CUDA.md)
ROW_BLOCK = 1024
ROW_ELEMS_PER_THREAD = 8
# strided loops in row and full-reduction kernels: copies per iteration. 1: LLVM
# already unrolls these loops fully when the trip count is small (tid < maxntid);
# 4 measured no faster for row sums and slower for softmax (H100, docs/CUDA.md)
UNROLL = 1
# row kernels that would keep at most `row-cache` values per thread (a read-only operand's
# elements of a row per thread, summed over the operands) keep them in registers: the
# loops are unrolled, and a later pass over the row (softmax's sum and normalisation
# after its max, a layer norm's variance and output after its mean) reuses the values the
# first pass loaded instead of reading the row again. On an H200 (docs/CUDA.md): softmax
# 8192 wide 83% -> 95% of copy bandwidth, 32768 wide 56% -> 75%, 1024 wide 90% -> 100%.
# The budget bounds registers: at 32 a 32768-wide softmax backward (two operands) would
# spill, so it reads its rows in loops
ROW_CACHE = 32
# full reductions (to one value): one block up to this many elements, else two stages
FULL_REDUCE_ONE_BLOCK = 1 << 16
FULL_REDUCE_MAX_BLOCKS = 1024
# copies per iteration of a full reduction's grid-strided loop: a row sum's short loops
# are unrolled by LLVM (eight loads in flight per thread), a full sum's long ones are
# not; on an H200 a 256 MB sum reached 95% of copy bandwidth at 1, 97% at 4 and 82% at 8
FULL_REDUCE_UNROLL = 1
# innermost-dim size from which pointwise kernels use a 2-D grid
POINTWISE_2D_MIN = 128
# 2-D pointwise kernels: each thread takes up to POINTWISE_MAX_COLUMNS columns (a block's
# width apart, so every load stays coalesced) until it reads about POINTWISE_READ_BYTES
# per pass: the loads one thread has in flight are what hide memory latency. On an H200
# at GPT-2 124M's size, one column per thread read a single f32 operand at 25-46% of copy
# bandwidth, while `exp(a+b)*c` (12 bytes read per column) reached 92%
POINTWISE_READ_BYTES = 16
POINTWISE_MAX_COLUMNS = 4
# threads per row of a run-time length (the 8 elements per thread of ROW_ELEMS_PER_THREAD
# at the size hint, 64, would take 32): rows of sequences, hundreds to thousands long
RUN_TIME_ROW_THREADS = 256
# reductions shorter than this run one thread per output instead of one block
ROW_REDUCE_MIN = 32
# other reductions: from this many outputs, one thread per output fills the GPU
# (132 SMs x 512 threads), below it one block per output
THREAD_PER_OUTPUT_MIN = 1 << 16
MAX_GRID_Y = 65535
MAX_GRID_X = (1 << 31) - 1

CONTRACTIONS = ("linalg.matmul", "linalg.batch_matmul", "linalg.conv_2d_nchw_fchw",
                "linalg.conv_2d_ngchw_gfchw")
OVERWRITE_ATTR = "dg.gpu.overwrite"
# host ops the launch plan understands without a kernel
HOST_OPS = ("memref.alloc", "memref.dealloc", "memref.copy", "memref.expand_shape",
            "memref.collapse_shape", "memref.subview", "memref.cast",
            "memref.reinterpret_cast", "memref.get_global", "memref.dim", "arith.constant",
            "func.return", "func.call", "gpu.launch", "gpu.launch_func") + CONTRACTIONS
_PURE = VIEWS + ("memref.alloc", "memref.dim", "arith.constant")

_ALL_REDUCE = {"arith.addf": "add", "arith.mulf": "mul", "arith.maximumf": "maximumf",
               "arith.minimumf": "minimumf", "arith.maxnumf": "maxnumf",
               "arith.minnumf": "minnumf", "arith.addi": "add", "arith.muli": "mul",
               "arith.ori": "or", "arith.xori": "xor", "arith.andi": "and",
               "arith.maxui": "maxui", "arith.minui": "minui", "arith.maxsi": "maxsi",
               "arith.minsi": "minsi"}


# ---------------------------------------------------------------- loop ops

@dataclass
class Kop:
    """A linalg op as a loop nest (`common.loops.LoopOp`), plus copies/transposes."""

    lop: LoopOp
    copy: bool = False  # body is `yield in0` (linalg.copy, linalg.transpose)
    # a reduction's outputs whose fill was folded into it: buffer -> the fill's constant,
    # read instead of the buffer's initial value (`_fold_fills`), and the erased fills
    inits: dict = field(default_factory=dict)
    folded: list = field(default_factory=list)
    # the sizes as the kernel reads them (ints, host values of run-time sizes), set on
    # the host before its launch (`run_time_sizes.extents`)
    extents: list = field(default_factory=list)

    @property
    def affine(self) -> bool:
        """Reads an input through an affine expression other than a dim (a flip)."""
        return any(isinstance(d, ir.AffineExpr) for acc in self.lop.accesses for d in acc)

    @property
    def op(self) -> ir.Operation:
        return self.lop.op

    @property
    def sizes(self) -> list:
        return self.lop.sizes

    @property
    def iterators(self) -> list:
        return self.lop.iterators

    def red_dims(self) -> list:
        return [k for k, it in enumerate(self.iterators) if it == "reduction"]

    def is_pointwise(self) -> bool:
        return not self.red_dims()

    def combiners(self) -> Optional[list[str]]:
        """The combiner per output when every output is `acc = combiner(acc, value)` with an
        associative combiner `gpu.all_reduce` has (float, or integer: `_ALL_REDUCE`), the
        accumulator feeding only the combiner."""
        if self.copy:
            return None
        return reduction_combiners(self.lop, _ALL_REDUCE, sole_use=True)

    def row_reducible(self) -> bool:
        """A reduction over trailing dims (not dim 0), `combiners()`, long enough."""
        red = self.red_dims()
        n = len(self.sizes)
        if not red or red != list(range(n - len(red), n)) or red[0] == 0:
            return False
        if self.combiners() is None:
            return False
        return _work([self.sizes[d] for d in red]) >= ROW_REDUCE_MIN

    def full_reducible(self) -> bool:
        """Every dim reduced (a loss), `combiners()`: one block reduces it."""
        return (len(self.red_dims()) == len(self.sizes) > 0
                and self.combiners() is not None and _work(self.sizes) >= ROW_REDUCE_MIN)

    def block_reducible(self) -> bool:
        """Few outputs, each a long reduction: one block per output (see module doc)."""
        par = [n for n, it in zip(self.sizes, self.iterators) if it == "parallel"]
        red = [self.sizes[d] for d in self.red_dims()]
        return (bool(red) and self.combiners() is not None and _work(red) >= ROW_REDUCE_MIN
                and _work(par) < THREAD_PER_OUTPUT_MIN)

    def read_extents(self, read: dict) -> list:
        """Set `extents` at the insertion point (on the host; `read`: see `extents`)."""
        self.extents = extents(self.sizes, read)
        return self.extents

    def buffers(self):
        return self.lop.buffers()


def parse(op: ir.Operation, sizes: SizeClasses) -> Optional[Kop]:
    """The op as a Kop, or None when it is not a loop nest this pass can emit. `sizes`:
    which run-time sizes of the function are equal (`loops.SizeClasses`)."""
    if op.name in ("linalg.generic", "linalg.fill"):
        lop = parse_loop_op(op, regions=True, affine_ins=True, sizes=sizes)
        return Kop(lop) if lop is not None else None
    if op.name in ("memref.copy", "linalg.transpose"):
        lop = parse_loop_op(op, sizes=sizes)  # strided copies stay host copies (torch)
        return Kop(lop, copy=True) if lop is not None else None
    if op.name == "linalg.copy":
        src, dst = op.operands[0], op.operands[1]  # (input, init)
        if not (static_memref(src.type) and static_memref(dst.type)):
            lop = parse_loop_op(op, sizes=sizes)
            return Kop(lop, copy=True) if lop is not None else None
        acc = tuple(range(ir.MemRefType(dst.type).rank))
        lop = LoopOp(op, [src], [dst], [acc, acc], list(ir.MemRefType(dst.type).shape),
                     ["parallel"] * len(acc))
        return Kop(lop, copy=True)
    return None


# ---------------------------------------------------------------- IR helpers

def _idx(v: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), v).result


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _prod(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _work(sizes: Sequence) -> int:
    """The product of loop sizes, a run-time one at its hint: what the choices weigh."""
    return _prod([size_hint(s) for s in sizes])


def _delinearize(flat: ir.Value, sizes: Sequence[Extent]) -> list:
    """Row-major multi-index of `flat` in `sizes` (constant divisors where static)."""
    out: list = [None] * len(sizes)
    rest = flat
    for k in range(len(sizes) - 1, -1, -1):
        if k == 0:
            out[k] = rest
        else:
            s = index(sizes[k])
            out[k] = arith.remui(rest, s)
            rest = arith.divui(rest, s)
    return out


_LAUNCHES: list = []  # launches emitted by the current run (views are sunk into them)


def _launch(grid: Sequence[Extent], block: Sequence[int]) -> tuple[gpu.LaunchOp, list, list]:
    for g in grid:
        if isinstance(g, int) and g > MAX_GRID_X:
            raise PassError(f"dg-gpu-kernels: grid {list(grid)} too large")
    launch = gpu.LaunchOp(tuple(index(g) for g in grid), tuple(_idx(b) for b in block))
    _LAUNCHES.append(launch.operation)
    args = list(launch.regions[0].blocks[0].arguments)
    return launch, args[0:3], args[3:6]


def _sinkable(op: ir.Operation) -> bool:
    """Host ops a kernel recomputes instead of taking their results as arguments: views
    of its buffers, and scalar arithmetic on loads from the function's arguments (the
    random-number keys dropout derives from its seed input): loads from an argument or
    from a buffer a kernel wrote (whose deallocation `_free_after_last_use` moves), or
    from a view of one (a 0-d index expanded to 1-d: the view is sunk with the load)."""
    if op.name in VIEWS or (op.name.startswith("arith.") and op.name != "arith.constant") \
            or op.name == "affine.apply":  # (size arithmetic of run-time sizes)
        return True
    if op.name != "memref.load":
        return False
    source = buffer_root(op.operands[0]).owner
    return (source.owner.operation.name == "func.func" if isinstance(source, ir.Block)
            else source.operation.name == "memref.alloc")


def _sink_views(launch: ir.Operation) -> None:
    """Clone the host ops a kernel uses that it can compute itself (`_sinkable`) into it.

    The kernel then takes the root buffers (contiguous: allocs and arguments)
    as bare pointers, and computes the views inside (`expand-strided-metadata`),
    and loads scalars it derives values from itself.
    """
    body = launch.regions[0].blocks[0]
    first = body.operations[0]
    clones: dict = {}

    def inside(v: ir.Value) -> ir.Value:
        if v in clones:
            return clones[v]
        if isinstance(v.owner, ir.Block) or not _sinkable(v.owner.operation):
            return v
        producer = v.owner.operation
        if producer.parent == launch or _is_inside(producer, launch):
            return v
        operands = [inside(x) for x in producer.operands]
        with ir.InsertionPoint(first):
            c = producer.clone()
        for i, x in enumerate(operands):
            if x != producer.operands[i]:
                c.operands[i] = x
        for r_old, r_new in zip(producer.results, c.results):
            clones[r_old] = r_new
        return clones[v]

    def visit(op: ir.Operation) -> None:
        for i, v in enumerate(list(op.operands)):
            nv = inside(v)
            if nv != v:
                op.operands[i] = nv
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner.operation)

    for op in list(body.operations):
        visit(op.operation)


def _nested(op: ir.Operation, name: str | None = None) -> list[ir.Operation]:
    """`op` and the ops nested in it (those named `name`, if given)."""
    found: list[ir.Operation] = []

    def visit(o: ir.Operation) -> ir.WalkResult:
        if name is None or o.name == name:
            found.append(o)
        return ir.WalkResult.ADVANCE
    op.walk(visit)
    return found


def _free_after_last_use(block: ir.Block) -> None:
    """Move each host `memref.dealloc` after the last op using its buffer: a load sunk into
    a kernel (`_sink_views`) reads the buffer later than the host load did."""
    ops = [o.operation for o in block.operations]
    last: dict = {}  # value -> the last top-level op using it, itself or nested
    for op in ops:
        for inner in _nested(op):
            for v in inner.operands:
                last[v] = op
    for op in ops:
        if op.name == "memref.dealloc" and last.get(op.operands[0], op) != op:
            op.move_after(last[op.operands[0]])


def _expand_integer_abs(op: ir.Operation) -> None:
    """`math.absi` (T5's relative position buckets) as `maxsi(x, 0 - x)`: the NVVM
    lowering has no pattern for it."""
    for inner in _nested(op, "math.absi"):
        x = inner.operands[0]
        with ir.InsertionPoint(inner), inner.location:
            zero = arith.ConstantOp(x.type, 0).result
            r = arith.maxsi(x, arith.subi(zero, x))
        inner.results[0].replace_all_uses_with(r)
        inner.erase()


def _erase_host_scalars(block: ir.Block) -> None:
    """Erase the host scalar ops left without users once their kernels compute them
    (`_sink_views`); a load still used on the host (a size read from device memory) has
    no place to run."""
    for op in reversed([o.operation for o in block.operations]):
        if (op.name.startswith("arith.") or op.name == "memref.load") and \
                not any(len(list(r.uses)) for r in op.results):
            op.erase()
    for op in block.operations:
        if op.operation.name == "memref.load":
            raise PassError("dg-gpu-kernels: 'memref.load' computes on the CUDA host side a "
                            "value that later host code uses (only allocations, views, "
                            "copies, kernels and library contractions run there)",
                            op.location)


def _hoist_globals(launch: ir.Operation) -> None:
    """Move the `memref.get_global`s in a kernel (the index-error flag an out-of-range
    gather sets, conversion/index_check.py) before its launch: the kernel then takes the
    global's buffer as an argument, which the launch plan binds to device memory; the
    global itself stays on the host side."""
    for op in _nested(launch, "memref.get_global"):
        op.move_before(launch)


def _is_inside(op: ir.Operation, ancestor: ir.Operation) -> bool:
    p = op.parent
    while p is not None:
        if p == ancestor:
            return True
        p = p.parent if hasattr(p, "parent") else None
    return False


def _lt(a: ir.Value, b: Extent) -> ir.Value:
    return arith.cmpi(arith.CmpIPredicate.ult, a, index(b))


def strided_loop(start: ir.Value, total: Extent, step: Extent, inits: list,
                 body: Callable[[ir.Value, list], list], combiners: Sequence[str],
                 unroll: int) -> list:
    """`for k in range(start, total, step)` carrying `inits`, unrolled `unroll` times.

    The unrolled part keeps one set of accumulators per copy (independent loads
    in flight: one load per thread per iteration leaves HBM idle), combined with
    `combiners` after the loop; a remainder loop finishes. `body(k, accs)`
    returns the new accumulators. `start` must be below `step`. A run-time `total` or
    `step` (a host value) runs without unrolling.
    """
    n = len(inits)
    accs = list(inits)
    if unroll > 1 and isinstance(total, int) and isinstance(step, int) and \
            total >= unroll * step:
        main_end = (total // (unroll * step)) * (unroll * step)
        loop = scf.ForOp(start, _idx(main_end), _idx(unroll * step), accs * unroll)
        with ir.InsertionPoint(loop.body):
            carried = list(loop.inner_iter_args)
            out: list = []
            for u in range(unroll):
                k = loop.induction_variable if u == 0 else arith.addi(
                    loop.induction_variable, _idx(u * step))
                out += body(k, carried[u * n:(u + 1) * n])
            scf.YieldOp(out)
        res = list(loop.results)
        accs = res[:n]
        for u in range(1, unroll):
            accs = [combine(c, a, b) for c, a, b in zip(combiners, accs, res[u * n:(u + 1) * n])]
        if main_end == total:
            return accs
        start = arith.addi(start, _idx(main_end))
    loop = scf.ForOp(start, index(total), index(step), accs)
    with ir.InsertionPoint(loop.body):
        scf.YieldOp(body(loop.induction_variable, list(loop.inner_iter_args)))
    return list(loop.results)


def _affine_index(e: ir.AffineExpr, ivs: list) -> ir.Value:
    """`e` (an input's affine index expression) evaluated at loop indices `ivs`."""
    if isinstance(e, ir.AffineDimExpr):
        return ivs[e.position]
    if isinstance(e, ir.AffineConstantExpr):
        return _idx(e.value)
    for kind, emit in ((ir.AffineAddExpr, arith.addi), (ir.AffineMulExpr, arith.muli),
                       (ir.AffineModExpr, arith.remsi),
                       (ir.AffineFloorDivExpr, arith.floordivsi),
                       (ir.AffineCeilDivExpr, arith.ceildivsi)):
        if isinstance(e, kind):
            return emit(_affine_index(e.lhs, ivs), _affine_index(e.rhs, ivs))
    raise PassError(f"dg-gpu-kernels: unsupported affine index {e}")


class Emitter:
    """Emits one op's body for given loop ivs inside a kernel.

    `forwarded` maps row buffers (shaped like the rows, indexed by the row) to the SSA value
    this kernel holds for them; loads from them use the value instead.
    """

    def __init__(self, k: Kop, ivs: list, forwarded: Optional[dict] = None,
                 cache: Optional["RowCache"] = None) -> None:
        self.k = k
        self.ivs = ivs
        self.forwarded = forwarded if forwarded is not None else {}
        self.cache = cache
        self.zero = _idx(0)

    def index(self, acc: Access) -> list:
        return [self.zero if d is None else self.ivs[d] if isinstance(d, int)
                else _affine_index(d, self.ivs) for d in acc]

    def load(self, buf: ir.Value, acc: Access) -> ir.Value:
        if buf in self.forwarded:
            return self.forwarded[buf]
        key = self.cache.key(buf, acc) if self.cache else None
        if key is not None and key in self.cache.values:
            return self.cache.values[key]
        v = memref.LoadOp(buf, self.index(acc)).result
        if key is not None:
            self.cache.values[key] = v
        return v

    def store(self, v: ir.Value, buf: ir.Value, acc: Access) -> None:
        if self.cache is not None and self.cache.valid is not None:
            guard = scf.IfOp(self.cache.valid)  # the clamped tail of an unrolled row loop
            with ir.InsertionPoint(guard.then_block):
                memref.StoreOp(v, buf, self.index(acc))
                scf.YieldOp([])
            return
        memref.StoreOp(v, buf, self.index(acc))

    def out_accesses(self) -> list:
        return self.k.lop.accesses[len(self.k.lop.ins):]

    def compute(self, out_values: Sequence[Optional[ir.Value]]) -> list:
        """The body's results at the current ivs; `out_values` replace loads of the outs."""
        return clone_body(self.k.lop, self.load, out_values, self.ivs, copy=self.k.copy)


# ---------------------------------------------------------------- kernels

def emit_pointwise(k: Kop, block_size: int, read_bytes: int = POINTWISE_READ_BYTES) -> None:
    """One thread per element of an all-parallel op (at the current insertion point); in
    the 2-D form several columns per thread, up to about `read_bytes` read (0: one)."""
    sizes = k.read_extents({})
    total = product(sizes)
    if is_empty(total):
        return
    if len(sizes) >= 1 and size_hint(k.sizes[-1]) >= POINTWISE_2D_MIN:
        inner, outer = sizes[-1], product(sizes[:-1])
        bx = block_size
        columns = _columns_per_thread(k, bx, read_bytes)
        gy = minimum(outer, MAX_GRID_Y)
        gz = ceil_div(outer, gy)
        launch, bid, tid = _launch((ceil_div(inner, bx * columns), gy, gz), (bx, 1, 1))
        with ir.InsertionPoint(launch.regions[0].blocks[0]):
            first = arith.addi(arith.muli(bid[0], _idx(bx * columns)), tid[0])
            # (a run-time `outer` may need blockIdx.z, and a guard on the rows)
            static = isinstance(gz, int)
            row = arith.addi(arith.muli(bid[2], index(gy)), bid[1]) \
                if not static or gz > 1 else bid[1]
            row_ok = _lt(row, outer) if not static or gz * gy != outer else None
            outer_ivs = _delinearize(row, sizes[:-1])
            cols = [arith.addi(first, _idx(c * bx)) if c else first for c in range(columns)]

            def guarded(j: ir.Value) -> ir.Value:
                return _lt(j, inner) if row_ok is None else arith.andi(_lt(j, inner), row_ok)
            if columns == 1:
                _guarded_columns(k, outer_ivs, cols, guarded)
            else:  # a whole tile in straight-line code, the row's last one column by column
                tile = scf.IfOp(guarded(cols[-1]), [], has_else=True)
                with ir.InsertionPoint(tile.then_block):
                    _pointwise_columns(k, outer_ivs, cols)
                    scf.YieldOp([])
                with ir.InsertionPoint(tile.else_block):
                    _guarded_columns(k, outer_ivs, cols, guarded)
                    scf.YieldOp([])
            gpu.TerminatorOp()
    else:
        _thread_per_index(sizes, block_size, lambda ivs: _pointwise_body(k, ivs))


def _columns_per_thread(k: Kop, block_size: int, read_bytes: int) -> int:
    """How many columns each thread of a 2-D pointwise kernel takes to read about
    `read_bytes` (POINTWISE_READ_BYTES): no more than the rows have for a block of
    `block_size` threads."""
    read = sum(_element_bytes(v) for v in k.lop.ins)
    wanted = max(1, min(POINTWISE_MAX_COLUMNS, read_bytes // max(read, 1)))
    return min(wanted, -(-size_hint(k.sizes[-1]) // block_size))


def _element_bytes(v: ir.Value) -> int:
    t = ir.ShapedType(v.type).element_type
    if isinstance(t, ir.IndexType):
        return 8
    width = t.width if isinstance(t, (ir.FloatType, ir.IntegerType)) else 32
    return max(1, width // 8)


def _thread_per_index(sizes: Sequence[Extent], block_size: int,
                      body: Callable[[list], None]) -> None:
    """A flat 1-D launch with one thread per row-major index of `sizes`, each running
    `body(indices)` (at most `block_size` threads per block, fewer for small static
    sizes)."""
    total = product(sizes)
    bx = min(block_size, max(32, 1 << (total - 1).bit_length())) \
        if isinstance(total, int) else block_size
    launch, bid, tid = _launch((ceil_div(total, bx), 1, 1), (bx, 1, 1))
    with ir.InsertionPoint(launch.regions[0].blocks[0]):
        flat = arith.addi(arith.muli(bid[0], _idx(bx)), tid[0])
        guard = scf.IfOp(_lt(flat, total))
        with ir.InsertionPoint(guard.then_block):
            body(_delinearize(flat, sizes) if sizes else [])
            scf.YieldOp([])
        gpu.TerminatorOp()


def _const_index(v: ir.Value) -> Optional[int]:
    if isinstance(v.owner, ir.Block) or v.owner.operation.name != "arith.constant":
        return None
    return ir.IntegerAttr(v.owner.operation.attributes["value"]).value


def scatter_nest(op: ir.Operation) -> Optional[tuple[list[ir.Operation], ir.Operation]]:
    """(loops, store) if `op` is a scatter on the host (dg.scatter_add, the gradient of a
    gather or an embedding, or dg.scatter, `x[i] = v`): a nest of `scf.for` from 0 by 1
    to constants or run-time sizes computed before the nest (an outer body may compute
    scalars before its loop: an embedding gradient's row index) whose innermost body
    ends storing, to `buf[i]`, either a value combined from `load(buf[i])`
    (`_accumulated`: a sum, maximum, ...) or a value that reads nothing of `buf`; else
    None."""
    loops: list[ir.Operation] = []
    host = op.block
    while op.name == "scf.for" and not len(op.results):
        lb, ub, step = list(op.operands)[:3]
        if _const_index(lb) != 0 or _const_index(step) != 1 or (
                _const_index(ub) is None and
                (ub.owner if isinstance(ub.owner, ir.Block) else ub.owner.operation.block)
                != host):
            return None
        loops.append(op)
        body = [o.operation for o in op.regions[0].blocks[0].operations]
        if len(body) >= 2 and body[-2].name == "scf.for" and \
                not any(o.name == "scf.for" for o in body[:-2]):
            op = body[-2]
            continue
        stores = [o for o in body if o.name == "memref.store"]
        if len(stores) != 1 or body[-2] != stores[0]:
            return None
        store = stores[0]
        buf = store.operands[1]
        reads = [o for o in body if o.name == "memref.load" and o.operands[0] == buf]
        if _accumulated(store) is None and reads:
            return None
        return loops, store
    return None


@dataclass
class _Combine:
    """A scatter's read-modify-write of one element: `old` (the load of the stored
    element) and the ops computing the stored value from it. When they are one op with
    an atomic instruction (`_ATOMIC`), its kind and other operand; else they run in a
    compare-and-swap loop."""

    old: ir.Value
    ops: list
    kind: Optional[str] = None
    operand: Optional[ir.Value] = None


# single combining ops with an atomic instruction on the GPU (float sums in f32/f64)
_ATOMIC = {"arith.addf": "addf", "arith.addi": "addi", "arith.maxsi": "maxs",
           "arith.minsi": "mins"}


def _accumulated(store: ir.Operation) -> Optional[_Combine]:
    """The combine when `store` writes to `buf[i]` a value computed from `load(buf[i])`
    (a scatter-add, -max, -min or -mul) by ops of the store's block, else None."""
    value, buf, idx = store.operands[0], store.operands[1], list(store.operands)[2:]
    block = [o.operation for o in store.block.operations]
    loads = [o for o in block if o.name == "memref.load" and o.operands[0] == buf and
             list(o.operands)[1:] == idx]
    if len(loads) != 1:
        return None
    old = loads[0].results[0]
    chain, reached = [], {old}
    for op in block[block.index(loads[0]) + 1:block.index(store)]:
        if any(v in reached for v in op.operands):
            chain.append(op)
            reached.update(op.results)
    inside = chain + [store]
    used_outside = any(u.owner.operation not in inside for v in reached for u in v.uses)
    if not chain or value not in reached or used_outside:
        return None
    if str(ir.MemRefType(buf.type).element_type) == "i1":  # stored as bytes, no CAS loop
        return None
    (op,) = chain if len(chain) == 1 else (None,)
    if op is None or op.name not in _ATOMIC or op.name == "arith.addf" and \
            str(ir.MemRefType(buf.type).element_type) not in ("f32", "f64"):
        return _Combine(old, chain)
    a, b = op.operands
    return _Combine(old, chain, _ATOMIC[op.name], b if a == old else a)


def _clone_ops(ops: Sequence[ir.Operation], mapping: dict) -> None:
    """Clone `ops` at the insertion point, reading `mapping`'s values for its keys (and
    each clone's results for the original's, added to `mapping`)."""
    for op in ops:
        clone = op.clone()
        _remap(clone, mapping)
        mapping.update(zip(op.results, clone.results))


def _remap(op: ir.Operation, mapping: dict) -> None:
    """Replace `mapping`'s keys among the operands of `op` and of the ops nested in it."""
    for inner in _nested(op):
        for i, v in enumerate(list(inner.operands)):
            if v in mapping:
                inner.operands[i] = mapping[v]


def emit_scatter(loops: list[ir.Operation], store: ir.Operation, block_size: int) -> None:
    """One thread per iteration of a scatter nest (`scatter_nest`). A scatter-add adds
    with `memref.atomic_rmw`: iterations that hit one element run concurrently (the
    order of their float additions is not fixed, as in PyTorch's CUDA index_add_);
    integer max/min are atomic too, other combines (float max/min, products) run in
    `memref.generic_atomic_rmw`, a compare-and-swap loop. A scatter stores: of repeated indices one stays, which one is not fixed (as in
    PyTorch's CUDA index_put_)."""
    trips = [_const_index(ub) if _const_index(ub) is not None else ub
             for ub in (list(f.operands)[1] for f in loops)]
    if any(is_empty(t) for t in trips):
        return
    value, buf, idx = store.operands[0], store.operands[1], list(store.operands)[2:]
    combine = _accumulated(store)
    skip = {store}
    if combine is not None:
        skip |= {combine.old.owner.operation, *combine.ops}

    def body(ivs: list) -> None:
        mapping = dict(zip([f.regions[0].blocks[0].arguments[0] for f in loops], ivs))
        for outer in loops[:-1]:  # the scalars computed before each inner loop
            _clone_ops([o.operation for o in outer.regions[0].blocks[0].operations][:-2],
                       mapping)
        _clone_ops([o.operation for o in loops[-1].regions[0].blocks[0].operations
                    if o.operation not in skip and o.operation.name != "scf.yield"], mapping)
        where = [mapping.get(i, i) for i in idx]
        if combine is None:
            memref.StoreOp(mapping.get(value, value), buf, where)
        elif combine.kind is not None:
            memref.AtomicRMWOp(getattr(arith.AtomicRMWKind, combine.kind),
                               mapping.get(combine.operand, combine.operand), buf, where)
        else:
            _compare_and_swap(buf, where, combine, value, mapping)

    _thread_per_index(trips, block_size, body)


def emit_scan(nest: ir.Operation, block_size: int) -> None:
    """dg.scan's loop nest (conversion/scans.py: loops over the other dims, which carry
    nothing, around the serial loop along the scanned dim, which carries the running
    value): one thread per iteration of the other dims, each running the serial loop
    with its running value in registers. Threads take the other dims row-major, so
    along a scanned dim that is not the last, neighbouring threads read neighbouring
    elements; along the last dim each thread walks a row of its own."""
    loops = []
    op = nest
    while not len(op.results):
        loops.append(op)
        op = next(o.operation for o in op.regions[0].blocks[0].operations
                  if SCAN_ATTR in o.operation.attributes)
    trips = [_const_index(ub) if _const_index(ub) is not None else ub
             for ub in (list(f.operands)[1] for f in loops)]
    if any(is_empty(t) for t in trips):
        return

    def body(ivs: list) -> None:
        mapping = dict(zip([f.regions[0].blocks[0].arguments[0] for f in loops], ivs))
        _clone_ops([o.operation for f in loops for o in f.regions[0].blocks[0].operations
                    if o.operation.name != "scf.yield" and
                    SCAN_ATTR not in o.operation.attributes] + [op], mapping)

    _thread_per_index(trips, block_size, body)


def _compare_and_swap(buf: ir.Value, where: list, combine: _Combine, value: ir.Value,
                      mapping: dict) -> None:
    """buf[where] = `value` computed from its old content by `combine.ops`, in a loop of
    compare-and-swaps of the element's bits. memref.generic_atomic_rmw does the same on
    the element type, which LLVM rejects for floats (and a float comparison would never
    match a NaN element)."""
    element = ir.MemRefType(buf.type).element_type
    bits = ir.IntegerType.get_signless(element.width)
    meta = memref.ExtractStridedMetadataOp(buf)
    strides = list(meta.results)[2 + len(where):]
    linear = meta.results[1]
    for i, stride in zip(where, strides):
        linear = arith.addi(linear, arith.muli(i, stride))
    base = memref.ExtractAlignedPointerAsIndexOp(buf).result
    address = arith.addi(base, arith.muli(linear, arith.constant(ir.IndexType.get(),
                                                                 element.width // 8)))
    ptr = llvm.IntToPtrOp(ir.Type.parse("!llvm.ptr"),
                          arith.index_cast(ir.IntegerType.get_signless(64), address)).result
    loop = scf.WhileOp([bits], [llvm.LoadOp(bits, ptr, alignment=element.width // 8).result])
    before = loop.before.blocks.append(bits)
    with ir.InsertionPoint(before):
        old = before.arguments[0]
        inner = {**mapping, combine.old: arith.bitcast(element, old)}
        _clone_ops(combine.ops, inner)
        swap = llvm.AtomicCmpXchgOp(ptr, old, arith.bitcast(bits, inner[value]),
                                    llvm.AtomicOrdering.monotonic,
                                    llvm.AtomicOrdering.monotonic, syncscope="device").result
        seen = llvm.ExtractValueOp(bits, swap, [0]).result
        swapped = llvm.ExtractValueOp(ir.IntegerType.get_signless(1), swap, [1]).result
        scf.ConditionOp(arith.xori(swapped, arith.constant(swapped.type, 1)), [seen])
    after = loop.after.blocks.append(bits)
    with ir.InsertionPoint(after):
        scf.YieldOp(list(after.arguments))


# ops a single-thread kernel may hold: scalar code the canonicalizer left without loops
# (a scatter-add into a 0-d tensor, whose one-trip loop was folded away)
_SERIAL = ("memref.load", "memref.store", "memref.get_global", "scf.if", "scf.yield")


def _serial_op(op: ir.Operation) -> bool:
    return all(o.name in _SERIAL or o.name.startswith(("arith.", "math."))
               for o in _nested(op))


def emit_serial(ops: list[ir.Operation]) -> None:
    """`ops`, straight-line scalar code reading and writing device buffers, as one kernel
    of one thread (it has no loop to spread over threads)."""
    launch, _, _ = _launch((1, 1, 1), (1, 1, 1))
    with ir.InsertionPoint(launch.regions[0].blocks[0]):
        _clone_ops(ops, {})
        gpu.TerminatorOp()


def _pointwise_body(k: Kop, ivs: list) -> None:
    _pointwise_points(k, [ivs])


def _pointwise_columns(k: Kop, outer_ivs: list, cols: list) -> None:
    """Pointwise `k` at columns `cols` of one row (`_pointwise_points`)."""
    _pointwise_points(k, [outer_ivs + [j] for j in cols])


def _pointwise_points(k: Kop, points: list[list]) -> None:
    """Pointwise `k` at each index list of `points`: every point's loads and arithmetic
    before any store, so that a thread's loads are in flight together (as far as the
    compiler knows the buffers may alias, so a store would order later loads after it)."""
    emitters = [Emitter(k, ivs) for ivs in points]
    values = [em.compute([None] * len(k.lop.outs)) for em in emitters]
    for em, vs in zip(emitters, values):
        for buf, v, acc in zip(k.lop.outs, vs, em.out_accesses()):
            em.store(v, buf, acc)


def _guarded_columns(k: Kop, outer_ivs: list, cols: list,
                     guarded: Callable[[ir.Value], ir.Value]) -> None:
    """Pointwise `k` at each column of `cols` where `guarded(column)` holds."""
    for j in cols:
        guard = scf.IfOp(guarded(j))
        with ir.InsertionPoint(guard.then_block):
            _pointwise_columns(k, outer_ivs, [j])
            scf.YieldOp([])


def emit_thread_per_output(k: Kop, block_size: int) -> None:
    """A reduction with one thread per output element, reduction loops serial (a long
    float sum in a wide accumulator: `wide_sums`)."""
    par = [d for d, it in enumerate(k.iterators) if it == "parallel"]
    red = k.red_dims()
    sizes = k.read_extents({})
    par_sizes = [sizes[d] for d in par]
    if any(is_empty(s) for s in par_sizes):
        return
    sums = WideSums.of(k.combiners(), k.lop.outs, [k.sizes[d] for d in red])

    def body(par_ivs: list) -> None:
        ivs: list = [None] * len(k.sizes)
        for d, v in zip(par, par_ivs):
            ivs[d] = v
        em = Emitter(k, ivs, dict(k.inits))
        outs, oacc = k.lop.outs, em.out_accesses()
        inits = sums.widen([em.load(b, a) for b, a in zip(outs, oacc)])
        results = sums.narrow(_serial_reduce(em, red, 0, inits,
                                             lambda accs: sums.step(accs, em.compute)))
        for b, v, a in zip(outs, results, oacc):
            em.store(v, b, a)

    _thread_per_index(par_sizes, block_size, body)


def emit_block_per_output(k: Kop, row_block: int) -> None:
    """A reduction with one block per output element: its threads stride over the
    flattened reduced dims (row-major, so consecutive threads read consecutive
    addresses when the innermost reduced dim is contiguous), then `gpu.all_reduce` (a
    float sum's partials and tree in a wide type, rounded once: `wide_sums`)."""
    par = [d for d, it in enumerate(k.iterators) if it == "parallel"]
    red = k.red_dims()
    sizes = k.read_extents({})
    par_sizes = [sizes[d] for d in par]
    red_sizes = [sizes[d] for d in red]
    outputs, total = product(par_sizes), product(red_sizes)
    if is_empty(outputs):
        return
    combiners = k.combiners()
    sums = WideSums.of(combiners, k.lop.outs, [k.sizes[d] for d in red])
    bx = row_threads(total if isinstance(total, int) else None, row_block)
    launch, bid, tid = _launch((outputs, 1, 1), (bx, 1, 1))
    with ir.InsertionPoint(launch.regions[0].blocks[0]):
        par_ivs = _delinearize(bid[0], par_sizes)

        def ivs_at(red_ivs: list) -> list:
            ivs: list = [None] * len(k.sizes)
            for d, v in zip(par + red, par_ivs + red_ivs):
                ivs[d] = v
            return ivs

        def step(i: ir.Value, accs: list) -> list:
            em = Emitter(k, ivs_at(_delinearize(i, red_sizes)))
            results = sums.step(accs, em.compute)
            mark_reassoc(results)
            return results

        parts = strided_loop(tid[0], total, bx, sums.identities(), step, combiners, UNROLL)
        totals = [_all_reduce(p, c) for p, c in zip(parts, combiners)]
        first = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, tid[0], _idx(0)))
        with ir.InsertionPoint(first.then_block):
            em = Emitter(k, ivs_at([None] * len(red)), dict(k.inits))
            outs, accesses = k.lop.outs, em.out_accesses()
            inits = sums.widen([em.load(buf, acc) for buf, acc in zip(outs, accesses)])
            results = sums.narrow([combine(c, a, v)
                                   for c, a, v in zip(combiners, inits, totals)])
            for v, buf, acc in zip(results, outs, accesses):
                em.store(v, buf, acc)
            scf.YieldOp([])
        gpu.TerminatorOp()


def _serial_reduce(em: Emitter, red: list, pos: int, accs: list,
                   step: Callable[[list], list]) -> list:
    """The loops over the reduced dims `red[pos:]` carrying `accs`, updated by `step(accs)`
    at each element (at `em`'s ivs)."""
    if pos == len(red):
        return step(accs)
    d = red[pos]
    loop = scf.ForOp(_idx(0), index(em.k.extents[d]), _idx(1), list(accs))
    with ir.InsertionPoint(loop.body):
        em.ivs[d] = loop.induction_variable
        scf.YieldOp(_serial_reduce(em, red, pos + 1, list(loop.inner_iter_args), step))
    return list(loop.results)


def emit_full_reduce(k: Kop, block_size: int, unroll: int = FULL_REDUCE_UNROLL) -> None:
    """A reduction of every dim to one value (a loss).

    Up to FULL_REDUCE_ONE_BLOCK elements: one block, thread-strided, `gpu.all_reduce`.
    Beyond, and for a run-time number of elements: two launches, a grid-strided partial
    per block into a temporary (one value per block, FULL_REDUCE_MAX_BLOCKS of them for
    a run-time block count), then one block combining the partials.
    """
    sizes = k.read_extents({})
    total = product(sizes)
    combiners = k.combiners()
    if isinstance(total, int) and total <= FULL_REDUCE_ONE_BLOCK:
        launch, bid, tid = _launch((1, 1, 1), (block_size, 1, 1))
        with ir.InsertionPoint(launch.regions[0].blocks[0]):
            ivs: list = [None] * len(k.sizes)
            _reduce_into(k, 0, ivs, tid[0], block_size, dict(k.inits), set(), combiners)
            gpu.TerminatorOp()
        return
    nblocks = minimum(ceil_div(total, block_size * ROW_ELEMS_PER_THREAD),
                      FULL_REDUCE_MAX_BLOCKS)
    outs = k.lop.outs
    ftypes = [ir.MemRefType(b.type).element_type for b in outs]
    slots = nblocks if isinstance(nblocks, int) else FULL_REDUCE_MAX_BLOCKS
    partials = [memref.AllocOp(ir.MemRefType.get([slots], ft), [], []).result
                for ft in ftypes]
    stride = product([nblocks, block_size])
    # stage 1: block b reduces flat indices b*B + t, stepping by the whole grid
    launch, bid, tid = _launch((nblocks, 1, 1), (block_size, 1, 1))
    with ir.InsertionPoint(launch.regions[0].blocks[0]):
        start = arith.addi(arith.muli(bid[0], _idx(block_size)), tid[0])

        def red(i: ir.Value, accs: list) -> list:
            results = Emitter(k, _delinearize(i, sizes)).compute(accs)
            mark_reassoc(results)
            return results

        parts = strided_loop(start, total, stride,
                             [identity(c, ft) for c, ft in zip(combiners, ftypes)], red,
                             combiners, unroll)
        sums = [_all_reduce(p, c) for p, c in zip(parts, combiners)]
        first = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, tid[0], _idx(0)))
        with ir.InsertionPoint(first.then_block):
            for v, buf in zip(sums, partials):
                memref.StoreOp(v, buf, [bid[0]])
            scf.YieldOp([])
        gpu.TerminatorOp()
    # stage 2: one block combines the partials into the output
    bx = min(block_size, max(32, 1 << (nblocks - 1).bit_length())) \
        if isinstance(nblocks, int) else block_size
    launch, bid, tid = _launch((1, 1, 1), (bx, 1, 1))
    with ir.InsertionPoint(launch.regions[0].blocks[0]):
        loop = scf.ForOp(tid[0], index(nblocks), _idx(bx),
                         [identity(c, ft) for c, ft in zip(combiners, ftypes)])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp([combine(c, acc, memref.LoadOp(buf, [loop.induction_variable]).result)
                         for c, acc, buf in zip(combiners, loop.inner_iter_args, partials)])
        em = Emitter(k, [None] * len(k.sizes), dict(k.inits))
        sums = [_all_reduce(p, c) for p, c in zip(loop.results, combiners)]
        first = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, tid[0], _idx(0)))
        with ir.InsertionPoint(first.then_block):
            for v, c, buf, acc in zip(sums, combiners, outs, em.out_accesses()):
                em.store(combine(c, em.load(buf, acc), v), buf, acc)
            scf.YieldOp([])
        gpu.TerminatorOp()
    for buf in partials:
        memref.DeallocOp(buf)


def _all_reduce(v: ir.Value, combiner: str) -> ir.Value:
    """A block-wide `gpu.all_reduce`. Warp shuffles move 32-bit values (64-bit ones as
    two), so 16-bit floats go through f32 (`nvvm.shfl.sync` rejects f16/bf16) and
    narrower integers (a boolean flag) through i32, sign-extended for the signed
    combiners, whose order they keep, zero-extended for the others."""
    red_op = ir.Attribute.parse(f"#gpu<all_reduce_op {_ALL_REDUCE[combiner]}>")
    t = v.type
    if isinstance(t, (ir.F16Type, ir.BF16Type)):
        wide = arith.extf(ir.F32Type.get(), v)
        return arith.truncf(t, gpu.AllReduceOp(wide, op=red_op, uniform=True).result)
    if isinstance(t, ir.IntegerType) and t.width < 32:
        i32 = ir.IntegerType.get_signless(32)
        wide = (arith.extsi if combiner in ("arith.maxsi", "arith.minsi") else arith.extui)(
            i32, v)
        return arith.trunci(t, gpu.AllReduceOp(wide, op=red_op, uniform=True).result)
    return gpu.AllReduceOp(v, op=red_op, uniform=True).result


class RowCache:
    """The values a row kernel's threads loaded, by element, while its loops are unrolled
    (`ROW_CACHE`): the unrolled step `slot` of a loop over a member's trailing dims
    `sizes` reads the same element in every member with those dims, in the same thread.
    Only buffers the kernel never writes are cached, so no value goes stale."""

    def __init__(self, written_roots: set) -> None:
        self.written = written_roots
        self.values: dict = {}
        self.slot: Optional[tuple] = None  # (trailing sizes, unrolled step) being emitted
        self.valid: Optional[ir.Value] = None  # in the last step: is this thread's index real

    def key(self, buf: ir.Value, acc: Access) -> Optional[tuple]:
        if self.slot is None or buffer_root(buf) in self.written:
            return None
        return (buf, acc, self.slot)


def _row_loop(t: ir.Value, total: Extent, step: int, inits: list, sizes: tuple,
              body: Callable[[ir.Value, list], list], combiners: Sequence[str],
              cache: Optional[RowCache]) -> list:
    """A row kernel's thread-strided loop: `strided_loop`, or with a `cache`, unrolled
    (at most ROW_CACHE steps) into straight-line code whose loads the cache shares. The
    last step, when `total` is not a multiple of `step`, reads a clamped index; its
    stores are guarded and its reduction values dropped. (A cache takes a static
    `total`: `_row_cache`.)"""
    if cache is None:
        return strided_loop(t, total, step, inits, body, combiners, UNROLL)
    accs = list(inits)
    for j in range(_cdiv(total, step)):
        k = arith.addi(t, _idx(j * step)) if j else t
        cache.valid = _lt(k, total) if (j + 1) * step > total else None
        if cache.valid is not None:
            k = arith.minui(k, _idx(total - 1))
        cache.slot = (sizes, j)
        new = body(k, accs)
        if cache.valid is not None:
            new = [arith.select(cache.valid, n, a) for n, a in zip(new, accs)]
        accs = new
    cache.slot, cache.valid = None, None
    return accs


def _row_cache(rk: "RowKernel", bx: int, limit: int) -> Optional[RowCache]:
    """A cache for the kernel when the values it would keep per thread (each read-only
    operand's elements per thread, summed) number at most `limit`, so every loop over a
    row unrolls into straight-line code, and no reduction member loops serially over
    parallel dims inside the row. (A row of run-time length has none: its steps are
    unknown.)"""
    if limit <= 0:
        return None
    k = rk.row_dims
    written = {buffer_root(b) for m in rk.members for b, _, w in m.buffers() if w}
    kept: dict = {}  # (buffer, access, trailing sizes) -> elements per thread
    for m in rk.members:
        if m.red_dims() and m.red_dims()[0] != k or \
                any(isinstance(s, DynSize) for s in m.sizes[k:]):
            return None
        steps = _cdiv(_prod(m.sizes[k:]), bx)
        if steps > limit:
            return None
        for b, acc, w in m.buffers():
            if acc is not None and not w and b not in rk.forwardable and \
                    buffer_root(b) not in written:
                kept[(b, tuple(acc), tuple(m.sizes[k:]))] = steps
    if sum(kept.values()) > limit:
        return None
    return RowCache(written)


@dataclass
class RowKernel:
    members: list[Kop]
    temps: list = field(default_factory=list)  # allocs used only here, kept in registers
    forwardable: set = field(default_factory=set)  # row buffers held as values
    row_dims: int = 1  # leading loop dims indexing a row (`_row_dims`)


def _row_dims(group: list[Kop]) -> int:
    """How many leading loop dims make a row: dim 0, and more while every member loops
    over them in parallel with the same sizes and touches what the group writes only
    within its own row. A layer norm over (batch, tokens, hidden) then runs batch x
    tokens blocks, not batch blocks each looping over the tokens; operands the group
    only reads may be indexed any way (a transposed input, a broadcast position table)."""
    written = {buffer_root(b) for m in group for b, _, w in m.buffers() if w}
    k = 1
    while all(len(m.sizes) > k for m in group):
        lead = tuple(range(k + 1))
        if any(m.sizes[:k + 1] != group[0].sizes[:k + 1] or
               any(it != "parallel" for it in m.iterators[:k + 1]) for m in group):
            break
        if any(buffer_root(b) in written and (tuple(acc[:k + 1]) != lead or
                                              not _keeps_leading(b, k + 1))
               for m in group for b, acc, _ in m.buffers()):
            break
        k += 1
    return k


def _rows(group: list[Kop]) -> int:
    """How many rows (blocks) a row kernel of `group` runs (at the size hints)."""
    return _work(group[0].sizes[:_row_dims(group)])


def _narrows(group: list[Kop], k: Kop) -> bool:
    """Would `k` joining `group` leave fewer rows than either alone? An attention's causal
    mask (batch x 1 x queries x keys, written per batch element) in the row kernel of the
    scores' max cut its rows from batch x heads x queries to the batch: 8 blocks, each
    looping over 512 rows (294 us of a small GPT-2's step on an H200). Apart, the mask is
    a pointwise kernel and the max runs a block per row."""
    return _rows(group + [k]) < min(_rows(group), _rows([k]))


def _keeps_leading(v: ir.Value, k: int) -> bool:
    """Is `v` its buffer, or a view of it that merges no dims before dim k?"""
    while not isinstance(v.owner, ir.Block) and v.owner.operation.name in VIEWS:
        view = v.owner.operation
        if view.name != "memref.collapse_shape":
            return False
        groups = [[ir.IntegerAttr(d).value for d in ir.ArrayAttr(g)]
                  for g in ir.ArrayAttr(view.attributes["reassociation"])]
        if groups[:k] != [[d] for d in range(k)]:
            return False
        v = view.operands[0]
    return True


def _forwardable(group: list[Kop], row_dims: int) -> set:
    """Buffers shaped like the rows that every member indexes by the row only (a row
    dim of run-time size: the buffer's dim is that size, as the row index reads it)."""
    rows = group[0].sizes[:row_dims]
    lead = tuple(range(row_dims))
    accs: dict = {}
    for m in group:
        for b, acc, _ in m.buffers():
            accs.setdefault(b, []).append(acc)
    out = set()
    for b, acc_list in accs.items():
        t = b.type
        if not (isinstance(t, ir.MemRefType) and t.rank == len(rows) and
                all(isinstance(r, DynSize) or s == r for s, r in zip(t.shape, rows))):
            continue
        if all(a == lead for a in acc_list):
            out.add(b)
    return out


def _temps(group: list[Kop], forwardable: set) -> list:
    members = {m.op for m in group}
    temps = []
    for b in forwardable:
        if isinstance(b.owner, ir.Block) or b.owner.operation.name != "memref.alloc":
            continue
        users = [u.owner.operation for u in b.uses]
        if all(u in members or u.name == "memref.dealloc" for u in users):
            temps.append(b)
    return temps


def row_threads(inner: Optional[int], row_block: int) -> int:
    """Threads per row: a power of two in [32, row_block], ~ROW_ELEMS_PER_THREAD each
    (RUN_TIME_ROW_THREADS for a row of run-time length, `inner` None)."""
    if inner is None:
        return min(row_block, RUN_TIME_ROW_THREADS)
    want = _cdiv(max(1, inner), ROW_ELEMS_PER_THREAD)
    return min(row_block, max(32, 1 << (want - 1).bit_length()))


def emit_row_kernel(rk: RowKernel, row_block: int, row_cache: int = ROW_CACHE) -> None:
    """One block per row: thread-strided loops, gpu.all_reduce for reductions."""
    group, k = rk.members, rk.row_dims
    read: dict = {}
    for m in group:
        m.read_extents(read)
    rows = product(group[0].extents[:k])
    if is_empty(rows):
        return
    run_time = any(isinstance(s, DynSize) for m in group for s in m.sizes[k:])
    bx = row_threads(None if run_time else max(_prod(m.sizes[k:]) for m in group), row_block)
    cache = _row_cache(rk, bx, row_cache)
    launch, bid, tid = _launch((rows, 1, 1), (bx, 1, 1))
    body = launch.regions[0].blocks[0]
    with ir.InsertionPoint(body):
        row, t = _delinearize(bid[0], group[0].extents[:k]), tid[0]
        forwarded: dict = {}
        dirty: list = []  # forwarded buffers whose value must reach memory
        # roots written / read through memory since the last barrier: a member that
        # reads what another thread wrote, or writes what another thread read, waits
        written: set = set()
        read: set = set()
        for m in group:
            with m.op.location:
                reads = {buffer_root(b) for b, _, w in m.buffers() if not w and b not in forwarded}
                writes = {buffer_root(b) for b, _, w in m.buffers() if w and b not in rk.forwardable}
                if reads & written or writes & read:
                    gpu.BarrierOp()
                    written.clear()
                    read.clear()
                _row_member(m, row, t, bx, forwarded, rk.forwardable, cache)
                read |= reads
                for b, _, w in m.buffers():
                    if w:
                        if b in rk.forwardable:
                            if b not in dirty:
                                dirty.append(b)
                        else:
                            written.add(buffer_root(b))
        temps = set(rk.temps)
        stores = [b for b in dirty if b not in temps]
        if stores:
            if {buffer_root(b) for b in stores} & read:
                gpu.BarrierOp()
            first = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, t, _idx(0)))
            with ir.InsertionPoint(first.then_block):
                for b in stores:
                    memref.StoreOp(forwarded[b], b, row)
                scf.YieldOp([])
        gpu.TerminatorOp()


def _row_member(m: Kop, row: list, t: ir.Value, bx: int, forwarded: dict,
                forwardable: set, cache: Optional[RowCache]) -> None:
    """Member `m` of a row kernel for the row with loop indices `row` (its leading dims)."""
    n, k = len(m.sizes), len(row)
    red = m.red_dims()
    outs = m.lop.outs
    if not red:
        inner = m.extents[k:]
        total = product(inner)
        if isinstance(total, int) and total == 1:
            # per-row scalar work: every thread computes it (uniform value)
            ivs = row + [_idx(0)] * (n - k)
            em = Emitter(m, ivs, forwarded)
            results = em.compute([None] * len(outs))
            for b, v, a in zip(outs, results, em.out_accesses()):
                if b in forwardable:
                    forwarded[b] = v
                else:
                    first = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, t, _idx(0)))
                    with ir.InsertionPoint(first.then_block):
                        em.store(v, b, a)
                        scf.YieldOp([])
            return
        if any(b in forwardable for b in outs):
            raise PassError("dg-gpu-kernels: internal: row value written per element",
                            m.op.location)
        def pw(i: ir.Value, accs: list) -> list:
            _pointwise_body_fwd(m, row + _delinearize(i, inner), forwarded, cache)
            return []

        _row_loop(t, total, bx, [], tuple(inner), pw, [], cache)
        return
    # reduction over trailing dims red; parallel inner dims k..red[0] serial (uniform)
    ivs: list = row + [None] * (n - k)
    _reduce_into(m, k, ivs, t, bx, forwarded, forwardable, m.combiners(), cache)


def _pointwise_body_fwd(m: Kop, ivs: list, forwarded: dict,
                        cache: Optional[RowCache] = None) -> None:
    em = Emitter(m, ivs, forwarded, cache)
    for buf, v, acc in zip(m.lop.outs, em.compute([None] * len(m.lop.outs)),
                           em.out_accesses()):
        em.store(v, buf, acc)


def _reduce_into(m: Kop, d: int, ivs: list, t: ir.Value, bx: int, forwarded: dict,
                 forwardable: set, combiners: list, cache: Optional[RowCache] = None) -> None:
    """Parallel dims d..first_red serial (uniform over the block), then the trailing
    reduction dims thread-strided, `gpu.all_reduce`, combined into the output."""
    first_red = m.red_dims()[0]
    if d < first_red:
        loop = scf.ForOp(_idx(0), index(m.extents[d]), _idx(1))
        with ir.InsertionPoint(loop.body):
            ivs[d] = loop.induction_variable
            _reduce_into(m, d + 1, ivs, t, bx, forwarded, forwardable, combiners)
            scf.YieldOp([])
        return
    red_sizes = m.extents[first_red:]
    total = product(red_sizes)
    outs = m.lop.outs
    em = Emitter(m, ivs, forwarded, cache)
    ftypes = [ir.MemRefType(b.type).element_type for b in outs]

    def red(k: ir.Value, accs: list) -> list:
        for dd, v in zip(range(first_red, len(m.sizes)), _delinearize(k, red_sizes)):
            ivs[dd] = v
        results = em.compute(accs)
        mark_reassoc(results)
        return results

    partials = _row_loop(t, total, bx, [identity(c, ft) for c, ft in zip(combiners, ftypes)],
                         tuple(red_sizes), red, combiners, cache)
    for dd in range(first_red, len(m.sizes)):
        ivs[dd] = None
    for i, (b, c, partial) in enumerate(zip(outs, combiners, partials)):
        total_v = _all_reduce(partial, c)
        acc = em.out_accesses()[i]
        init = em.load(b, acc)
        final = combine(c, init, total_v)
        if b in forwardable:
            forwarded[b] = final
        else:
            first = scf.IfOp(arith.cmpi(arith.CmpIPredicate.eq, t, _idx(0)))
            with ir.InsertionPoint(first.then_block):
                em.store(final, b, acc)
                scf.YieldOp([])


# ---------------------------------------------------------------- the pass

def _row_eligible(k: Kop) -> bool:
    if not k.sizes or k.iterators[0] != "parallel" or k.affine:
        return False
    return k.is_pointwise() or k.row_reducible()


def _host_scalar(op: ir.Operation) -> bool:
    """A scalar computation the kernels using it will recompute (`_sinkable`)."""
    return _sinkable(op) and op.name not in VIEWS and \
        all(not isinstance(r.type, (ir.ShapedType,)) for r in op.results)


def _plan_block(block: ir.Block, sizes: SizeClasses) -> list:
    """Kernels for a function body, in order: ('row', RowKernel) | ('pw', Kop) | ('tpo', Kop)
    | ('bpo', Kop)
    | ('full', Kop) | ('scatter', (loops, store)) | ('scan', nest) | ('serial', ops). `sizes`: which
    run-time sizes of the block are equal."""
    kernels: list = []
    current: list[Kop] = []
    serial: list[ir.Operation] = []  # a single-thread kernel's ops (`emit_serial`)
    computed: set = set()  # their results
    stored: set = set()  # the roots of the buffers they store to

    def add_serial(op: ir.Operation) -> None:
        serial.append(op)
        computed.update(op.results)
        stored.update(buffer_root(o.operands[1]) for o in _nested(op, "memref.store"))

    def reads_stored(op: ir.Operation) -> bool:
        """A load the kernel must do in order: from a buffer it stored to before."""
        return op.name == "memref.load" and buffer_root(op.operands[0]) in stored

    def close_serial() -> None:
        nonlocal serial
        if serial:
            inside = set()
            for op in serial:
                inside.update(_nested(op))
            for op in serial:
                for r in op.results:
                    for use in r.uses:
                        if use.owner.operation not in inside:
                            raise PassError(
                                f"dg-gpu-kernels: '{op.name}' computes on the CUDA host side "
                                "a value that later host code uses (only allocations, views, "
                                "copies, kernels and library contractions run there)",
                                op.location)
            kernels.append(("serial", serial))
        serial = []
        computed.clear()
        stored.clear()

    def close() -> None:
        nonlocal current
        if current:
            if any(not m.is_pointwise() for m in current):
                k = _row_dims(current)
                fw = _forwardable(current, k)
                kernels.append(("row", RowKernel(current, _temps(current, fw), fw, k)))
            else:
                kernels.extend(("pw", m) for m in current)
        current = []

    position = {op.operation: i for i, op in enumerate(block.operations)}
    for op in block.operations:
        op = op.operation
        if serial and op.name not in HOST_OPS and _serial_op(op):
            # host scalars independent of the kernel's values stay (kernels recompute them)
            if not _host_scalar(op) or reads_stored(op) or any(
                    v in computed for o in _nested(op) for v in o.operands):
                add_serial(op)
            continue
        close_serial()
        k = parse(op, sizes) if op.name == "memref.copy" else None
        if k is not None or (op.name.startswith("linalg.") and op.name not in CONTRACTIONS):
            k = k or parse(op, sizes)
            if k is None:
                raise PassError(f"dg-gpu-kernels: cannot map '{op.name}' to a GPU kernel "
                                "(needs affine indexing maps with plain output maps, "
                                "and a body without regions)", op.location)
            if _row_eligible(k):
                if current and (current[0].sizes[0] != k.sizes[0] or
                                row_conflict(current, k, sizes) or _narrows(current, k)):
                    close()
                current.append(k)
                continue
            close()
            if k.is_pointwise():
                kernels.append(("pw", k))
                continue
            _fold_fills(k, kernels, position)
            if k.full_reducible():
                kernels.append(("full", k))
            elif k.block_reducible():
                kernels.append(("bpo", k))
            else:
                kernels.append(("tpo", k))
            continue
        if op.name not in _PURE and not _host_scalar(op):
            close()
        if op.name == "scf.for" and SCAN_ATTR in op.attributes:
            kernels.append(("scan", op))
            continue
        nest = scatter_nest(op) if op.name == "scf.for" else None
        if nest is not None:
            kernels.append(("scatter", nest))
            continue
        if op.name not in HOST_OPS and not _host_scalar(op) and _serial_op(op):
            add_serial(op)
            continue
        if op.name not in HOST_OPS and not _host_scalar(op):
            raise PassError(f"dg-gpu-kernels: '{op.name}' cannot run on the CUDA host side "
                            "(only allocations, views, copies, kernels and library "
                            "contractions can)", op.location)
    close_serial()
    close()
    return kernels


def _fold_fills(k: Kop, kernels: list, position: dict) -> None:
    """A reduction whose every output element one thread writes once (thread per output,
    block per output, full) starts from the constant of a fill of its output buffer
    just before it, instead of a fill kernel and a load: the last planned kernels, while
    they are such fills, each the op right before the next (`position`: op -> index in
    the block), and of a buffer the reduction does not also read as an input."""
    nxt = k.op
    while kernels and kernels[-1][0] == "pw":
        fill = kernels[-1][1]
        value = fill.lop.fill
        buf = fill.lop.outs[0] if fill.lop.outs else None
        if value is None or buf not in k.lop.outs or buf in k.inits or \
                buffer_root(buf) in {buffer_root(x) for x in k.lop.ins} or \
                isinstance(value.owner, ir.Block) or \
                value.owner.operation.name != "arith.constant" or \
                position.get(fill.op, -2) + 1 != position[nxt]:
            return
        k.inits[buf] = value
        k.folded.append(fill.op)
        kernels.pop()
        nxt = fill.op


def _view_transposed_operands(block: ir.Block) -> None:
    """A transpose whose result only feeds contractions (a linear layer's weight, the
    `x^T @ dy` of its weight gradient) becomes a strided view of its input: the library
    call reads it transposed (cuBLAS's transpose flags), and no kernel copies it."""
    # collected first: rewriting one erases its alloc and deallocs from the block
    for op in [o.operation for o in block.operations if o.operation.name == "linalg.transpose"]:
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        src, dst = op.operands
        n = len(perm)
        if n < 2 or perm != list(range(n - 2)) + [n - 1, n - 2] or \
                isinstance(dst.owner, ir.Block) or dst.owner.operation.name != "memref.alloc" \
                or static_layout(ir.MemRefType(src.type)) is None:  # (run-time sizes: a kernel)
            continue
        users = [u.owner.operation for u in dst.uses if u.owner.operation != op]
        if not all(u.name in ("linalg.matmul", "linalg.batch_matmul", "memref.dealloc")
                   for u in users) or not any(u.name != "memref.dealloc" for u in users) or \
                any(u.name != "memref.dealloc" and dst in list(u.opview.outputs) for u in users) \
                or not _unchanged_until(src, op, [u for u in users if u.name != "memref.dealloc"]):
            continue
        src_type = ir.MemRefType(src.type)
        strides, offset = src_type.get_strides_and_offset()
        strides = [strides[p] for p in perm]
        shape = list(ir.MemRefType(dst.type).shape)
        view_type = ir.MemRefType.get(shape, src_type.element_type,
                                      ir.StridedLayoutAttr.get(offset, strides))
        with ir.InsertionPoint(op), op.location:
            view = memref.ReinterpretCastOp(view_type, src, [], [], [], [offset], shape,
                                            strides).result
        for u in users:
            if u.name == "memref.dealloc":
                u.erase()
            else:
                for i, v in enumerate(list(u.operands)):
                    if v == dst:
                        u.operands[i] = view
        alloc = dst.owner.operation
        op.erase()
        alloc.erase()


def _unchanged_until(buf: ir.Value, start: ir.Operation, readers: list) -> bool:
    """Does `buf`'s buffer keep its contents from `start` to the last of `readers` (same
    block)? Only ops that merely read it may come between: no write, no view (it may be
    written through), no dealloc (its memory may be reused)."""
    root = buffer_root(buf)
    ops = [o.operation for o in start.block.operations]
    first = ops.index(start)
    last = max(ops.index(r) for r in readers)
    for o in ops[first + 1:last]:
        touching = [v for v in o.operands if buffer_root(v) == root]
        if not touching:
            continue
        if not o.name.startswith("linalg."):
            return False
        view = o.opview
        outs = (list(view.outputs) if hasattr(view, "outputs") else
                list(o.operands)[1:] if o.name == "linalg.transpose" else None)
        if outs is None or any(v in outs for v in touching):
            return False
    return True


def _drop_matmul_zero_fills(block: ir.Block) -> None:
    """fill(0) -> C immediately followed by matmul(.., C): the library call overwrites C."""
    ops = [o.operation for o in block.operations]
    for prev, op in zip(ops, ops[1:]):
        if op.name not in CONTRACTIONS or prev.name != "linalg.fill":
            continue
        fill = prev.opview
        (value,), (buf,) = list(fill.inputs), list(fill.outputs)
        out = list(op.opview.outputs)[0]
        if buf != out or isinstance(value.owner, ir.Block):
            continue
        c = value.owner.operation
        if c.name != "arith.constant":
            continue
        attr = c.attributes["value"]
        if isinstance(attr, ir.FloatAttr) and attr.value == 0.0:
            op.attributes[OVERWRITE_ATTR] = ir.UnitAttr.get()
            prev.erase()


def gpu_kernels(module: ir.Operation, block_size: int = POINTWISE_BLOCK,
                row_block: int = ROW_BLOCK, row_cache: int = ROW_CACHE,
                full_unroll: int = FULL_REDUCE_UNROLL,
                pointwise_bytes: int = POINTWISE_READ_BYTES) -> None:
    for b in (block_size, row_block):
        if b < 32 or b > 1024 or b & (b - 1):
            raise PassError(f"dg-gpu-kernels: block sizes must be powers of two in "
                            f"[32, 1024], got {b}")
    _LAUNCHES.clear()
    for fn in list(functions(module)):
        if ir.StringAttr(fn.attributes["sym_name"]).value == TAKE_ERROR:
            fn.erase()  # the CUDA runtime reads and clears the index-error flag itself
            continue
        if CONV_GRAD in fn.attributes:  # the plan calls the library for it (conv2d_grad);
            continue                    # its body, the decomposition, stays host code
        body = fn.regions[0].blocks[0]
        if len(fn.regions[0].blocks) != 1:
            raise PassError("dg-gpu-kernels: functions must have one block", fn.location)
        reshapes_as_casts(body)
        _view_transposed_operands(body)
        _drop_matmul_zero_fills(body)
        sizes = SizeClasses(body)  # which run-time sizes are equal, before any rewrite
        for kind, k in _plan_block(body, sizes):
            if kind == "serial":
                with ir.InsertionPoint(k[0]), k[0].location:
                    emit_serial(k)
                for op in reversed(k):
                    op.erase()
                continue
            if kind == "scan":
                with ir.InsertionPoint(k), k.location:
                    emit_scan(k, block_size)
                k.erase()
                continue
            if kind == "scatter":
                loops, store = k
                with ir.InsertionPoint(loops[0]), loops[0].location:
                    emit_scatter(loops, store, block_size)
                loops[0].erase()
                continue
            members = k.members if kind == "row" else [k]
            last = members[-1].op
            with ir.InsertionPoint(last), last.location:
                if kind == "row":
                    emit_row_kernel(k, row_block, row_cache)
                elif kind == "pw":
                    emit_pointwise(k, block_size, pointwise_bytes)
                elif kind == "full":
                    emit_full_reduce(k, row_block, full_unroll)
                elif kind == "bpo":
                    emit_block_per_output(k, row_block)
                else:
                    emit_thread_per_output(k, block_size)
            for m in members:
                m.op.erase()
                for fill in m.folded:
                    fill.erase()
            if kind == "row":
                for tmp in k.temps:
                    for u in list(tmp.uses):
                        u.owner.operation.erase()
                    tmp.owner.operation.erase()
        for launch in _LAUNCHES:
            _sink_views(launch)
            _hoist_globals(launch)
            _expand_integer_abs(launch)
            pass_sizes(launch, sizes)
        _LAUNCHES.clear()
    for fn in list(functions(module)):
        if CONV_GRAD not in fn.attributes:
            _erase_host_scalars(fn.regions[0].blocks[0])
        _free_after_last_use(fn.regions[0].blocks[0])

"""dg-cpu-kernels: linalg on memrefs -> row-loop kernels LLVM vectorizes and libgomp threads.

Three things make the CPU code fast, and they are decided here, at the memref
level, where every loop nest and buffer is visible:

1. **Reductions in registers.** Trailing reduction loops carry their
   accumulators as `iter_args` (loaded once, stored once) with the combiner
   marked `fastmath<reassoc>`, so LLVM's loop vectorizer makes vector partial
   sums with one horizontal reduction per block; float sums add such blocks in
   f64 (`blocked_sums`), or add into an f64 buffer where the accumulator stays in
   memory (`Nest._wide_sum`). (Upstream `convert-linalg-to-loops` loads and
   stores the accumulator every iteration; LLVM cannot keep it in a register
   because it may alias the input.)
2. **Row fusion.** Consecutive linalg ops (generics and fills) whose outer loop
   is parallel over the same rows, and that touch shared buffers only row by
   row, run inside one row loop: softmax's max, sum and normalisation read a
   row from DRAM once and from L1 afterwards. A temporary used only inside
   such a loop shrinks to one row on the kernel's stack.
3. **Threads.** Each row loop is outlined into a kernel
   `@<fn>_k<N>(lo, hi, buffers...)`. Large ones are called through
   `@<kernel>__parallel(rows, buffers...)`, which `dg-gomp-launchers` defines
   after LLVM lowering as a `GOMP_parallel` call: PyTorch's own OpenMP
   runtime (libgomp), so compiled kernels share its threads and honour
   `torch.set_num_threads`. A large reduction over rows (a bias gradient) is
   split by blocks of its column dim instead, and the pointwise ops over the
   same loops that follow it (the input gradient next to the bias gradient)
   share its loop nest, so LLVM computes their common subexpressions once.

Loops follow each op's dim order (the fusion lowering puts the contiguous dim
last). Ops this pass does not understand (non-projected indexing maps,
regions in bodies) are left to `convert-linalg-to-loops`.

Memrefs of run-time sizes get the same kernels (`loops.DynSize`): a kernel reads each
size once from its own arguments (`memref.dim`); rows of two ops are the same when the
function proves it (`loops.SizeClasses`); heuristics weigh a run-time size at
DEFAULT_SIZE_HINT, but the caller counts a kernel's iterations when it runs and
chooses its launcher or itself then (`Outliner._call_dynamic`); per-block partials
take a run-time block count (`_dynamic_rows_per_block`); a row temporary of
run-time length is a heap row per kernel call (nothing bounds it for the stack).
Transposing tiles and column splits keep static sizes only.
"""
from __future__ import annotations

import itertools
import math
from typing import Callable, Optional, Sequence

from mlir import ir
from mlir.dialects import arith, func, memref, scf, vector

from ..common.loops import (FLOAT_IDENTITY, DynSize, LoopOp, SizeClasses, clone_body, combine,
                            identity, is_dynamic, mark_reassoc, parse, reduction_combiners,
                            size_hint)
from ..common.memrefs import (VIEWS, Access, buffer_root, dynamic_offset,
                              passed_as, row_conflict, row_local)
from . import blocked_sums
from ...passes import PassError, functions

PARALLEL_SUFFIX = "__parallel"
# kernel attribute: LLVM parameter positions of pointers no other parameter aliases
NOALIAS_ATTR = "dg.noalias_pointers"
# loop iterations (summed over a kernel's ops) from which a kernel is threaded
PARALLEL_MIN_WORK = 1 << 16
# most loop ops in one kernel: LLVM's loop passes take superlinear time in a function's
# size (GoogLeNet's backward joined 150 loops over its batch of 2 rows into one kernel,
# half of the 70 s of `opt` and `llc` on that module); transformer kernels hold <= 9
ROW_GROUP_MAX_LOOPS = 16
# largest row temporary kept on a kernel's stack
ROW_TEMP_MAX_BYTES = 64 * 1024
# side of the square tiles a transposing copy runs in (`transposed`), and the
# strides (bytes) that make it tile: multiples of this put a column's lines in at most
# 4 of L1's 64 sets (a 4 KiB stride: all in one, 8 ways)
TRANSPOSE_TILE = 16
TRANSPOSE_CONFLICT_STRIDE = 1024
# a reduction over rows inside a row kernel keeps one partial result per block of rows:
# PARTIAL_BLOCKS blocks (enough to balance the threads), more where a block would hold
# more than PARTIAL_BLOCK_MAX_ROWS rows (a block adds its rows one after the other, so
# its rounding error grows with them; the partials combine in f64), each
# block large enough that combining the partials reads at most 1/PARTIAL_COMBINE_SHARE
# of what the reduction reads (for a reduction whose rows each give a whole output, as a
# bias gradient's: 16 rows, within the cap)
PARTIAL_COMBINE_SHARE = 16
PARTIAL_BLOCKS = 64
PARTIAL_BLOCK_MAX_ROWS = 64
# LLVM function attributes of every kernel and outlined loop: inlined into the entry (their only
# caller), a training graph's hundred kernels made one huge function whose
# optimization and code generation cost more than the kernels' own (BERT: LLVM JIT
# 4.3 -> 3.8 s); a call per kernel costs nothing next to its loops
KERNEL_PASSTHROUGH = ("noinline",)
# ... and the vector width LLVM's vectorizers may use: left to -mcpu=native on an AVX-512
# Intel Xeon (LLVM's host CPU "rocketlake", tuned to prefer 256 bits), they chose 256 bits
# for most loops (softmax's exp loop: 8 lanes, no interleaving);
# 512 made the micro benchmarks' forward+backward 8-15% faster (gelu 19.3 -> 16.4 ms,
# layer_norm 13.0 -> 11.9, softmax 16.7 -> 14.7) and a 1024x1024 softmax 0.69 -> 0.59 ms.
# On CPUs without AVX-512 LLVM ignores it.
KERNEL_VECTOR_BITS = "512"

_PURE = VIEWS + ("memref.alloc", "memref.alloca", "arith.constant")
_LOOP_OPS = ("linalg.generic", "linalg.fill", "linalg.transpose", "linalg.copy", "memref.copy")


def _pure(op: ir.Operation) -> bool:
    """May loop ops run as if `op` were not between them: a view, an alloc, a constant,
    or a store into the shape operand of `memref.reshape`s (an index buffer nothing else
    reads: dg-lower-to-linalg's reshapes of run-time sizes)."""
    if op.name in _PURE:
        return True
    if op.name != "memref.store":
        return False
    buf = op.operands[1]
    return isinstance(ir.MemRefType(buf.type).element_type, ir.IndexType) and \
        not isinstance(buf.owner, ir.Block) and buf.owner.operation.name == "memref.alloc" and \
        all(u.owner.operation.name in ("memref.store", "memref.dealloc") or
            (u.owner.operation.name == "memref.reshape" and u.operand_number == 1)
            for u in buf.uses)


# ---------------------------------------------------------------- loop predicates (CPU)

def _float_combiners(lop: LoopOp) -> Optional[list[str]]:
    """Per output, the float op combining the accumulator with a new value, if every
    output of the reduction body has the form `acc = combiner(acc, value)`."""
    return reduction_combiners(lop, FLOAT_IDENTITY)


def row_parallel(lop: LoopOp) -> bool:
    return bool(lop.sizes) and lop.iterators[0] == "parallel"


def column_split(lop: LoopOp, min_work: int) -> Optional[tuple[int, int]]:
    """(dim, block) to thread a reduction over rows (a bias gradient) by blocks of its
    last parallel dim, or None when it has none or is too small to pay."""
    parallel = [k for k, it in enumerate(lop.iterators) if it == "parallel"]
    if row_parallel(lop) or not parallel or not large(lop, min_work) or \
            row_partial(lop, lop.sizes[0]):
        return None
    dim = parallel[-1]
    size = lop.sizes[dim]
    if is_dynamic(size):
        return None
    block = max(16, min(512, (size // 8) // 16 * 16))
    return (dim, block) if size > block else None


def transposed(lop: LoopOp) -> Optional[tuple[int, int]]:
    """(j, i) when this is a transposing copy or pointwise op that needs tiles: all
    loops parallel, an input's contiguous (last) dim is loop j and it reads that input
    with a stride along the innermost loop i that is a multiple of
    TRANSPOSE_CONFLICT_STRIDE bytes. In dim order each step of i touches another line
    of the input, all in a few L1 sets, which hold 8 lines each: an attention head
    transpose (128 x 64 per head, 8 KiB stride) and an NCHW -> NHWC permute (4 KiB)
    ran from L2 at 2.3x and 2.6x the time they take in TRANSPOSE_TILE square tiles
    (`Nest._tiles`). Other strides keep dim order: partial tiles of a 50 x 100
    transpose (6000 bytes) made it 1.5x slower."""
    n = len(lop.sizes)
    if n < 2 or lop.fill is not None or any(it != "parallel" for it in lop.iterators) or \
            lop.dynamic:  # (run-time sizes keep dim order)
        return None
    i = n - 1
    if lop.sizes[i] < TRANSPOSE_TILE:
        return None
    for buf, acc in zip(lop.ins, lop.accesses):
        if not acc or not isinstance(acc[-1], int) or acc[-1] == i or \
                lop.sizes[acc[-1]] < TRANSPOSE_TILE:
            continue
        t = ir.MemRefType(buf.type)
        strides, _ = t.get_strides_and_offset()
        width = getattr(t.element_type, "width", 64)
        for d, stride in zip(acc[:-1], strides):
            if isinstance(d, int) and d == i and stride > 0 and \
                    stride * width // 8 % TRANSPOSE_CONFLICT_STRIDE == 0:
                return acc[-1], i
    return None


def large(lop: LoopOp, min_work: int) -> bool:
    """Is it worth threads (threading on, at least `min_work` iterations)?"""
    return min_work > 0 and lop.work >= min_work


def starts_row_kernel(lop: LoopOp, min_work: int) -> bool:
    """Does a row kernel start at this op: a loop over rows, or a large reduction over
    rows computed row by row as per-block partial results? The partials cost a
    combine of n_blocks x output, but every row is then read whole and in order;
    threaded by column blocks instead, each block read a strided slice of every row
    (a 4096x1024 bias gradient: 512 bytes per 4 KiB page) at a third of the rate. Over a
    run-time number of rows it does whatever its estimate: the kernel's caller counts
    the work when it runs, and the partials cost at most 1/16 of the reduction then."""
    return row_parallel(lop) or (
        bool(lop.sizes) and row_partial(lop, lop.sizes[0]) and
        (large(lop, min_work) or (min_work > 0 and is_dynamic(lop.sizes[0]))))


def row_partial(lop: LoopOp, rows: int) -> bool:
    """Is this a reduction over `rows` rows (its first loop; a weight or bias gradient,
    a loss summed over everything, a per-channel statistic) that a row kernel over the
    same rows can compute as per-block partial results?"""
    return (len(lop.sizes) > 1 and lop.sizes[0] == rows and lop.fill is None
            and lop.iterators[0] == "reduction"
            and all(0 not in a for a in lop.accesses[len(lop.ins):])
            and _float_combiners(lop) is not None)


def carries_in_row(lop: LoopOp) -> bool:
    """Computed row by row, are its reductions within a row the innermost loops, so
    their accumulators stay in registers (else each step loads and stores the
    block's partial, which is in L1)?"""
    rest = lop.iterators[1:]
    n_red = rest.count("reduction")
    return n_red > 0 and all(it == "reduction" for it in rest[len(rest) - n_red:])


class Env:
    """Where a nest is emitted: value remapping (outlined kernels), the row loop, row temps."""

    def __init__(self, mapping: Optional[dict] = None, row: Optional[ir.Value] = None,
                 row_temps: Sequence[ir.Value] = (), split: tuple[int, int] = (0, 1),
                 partials: Sequence[ir.Value] = (), block: Optional[ir.Value] = None,
                 sizes: Optional[dict] = None) -> None:
        self.mapping = mapping if mapping is not None else {}
        self.row = row  # the kernel's loop iv: a row (split (0, 1)) or a block of `split`
        self.split = split  # (loop dim, block size) the kernel's loop runs over
        self.row_temps = set(row_temps)  # outer buffers shrunk to one row (dim 0 indexed by 0)
        # outputs of reductions over rows, mapped to [blocks, ...] partial buffers indexed
        # by the row block `block` first
        self.partials = set(partials)
        self.block = block
        # a kernel's run-time sizes, read once at its start: DynSize key -> index value
        self.sizes = sizes
        # buffers whose current row an earlier nest of the row kernel touched (in L1)
        self.in_cache: set = set()

    def value(self, v: ir.Value) -> ir.Value:
        return self.mapping.get(v, v)

    def size(self, size) -> ir.Value:
        """A loop size as an index value at the current insertion point: a constant, the
        kernel's read of a run-time size, or (inline, in the function that has the
        buffers) `memref.dim` of one of the op's operands that has it."""
        index = ir.IndexType.get()
        if not is_dynamic(size):
            return arith.ConstantOp(index, size).result
        if self.sizes is not None:
            if size.key not in self.sizes:
                raise PassError("dg-cpu-kernels: a run-time size the kernel does not read",
                                ir.Location.current)
            return self.sizes[size.key]
        buf, d = size.sources[0]
        return memref.DimOp(self.value(buf), arith.ConstantOp(index, d).result).result


class Nest:
    """Emits the loops of one LoopOp at the current insertion point.

    `companions`: independent LoopOps over the same loops (a pointwise output next to a
    reduction over rows) computed in the same innermost body, so LLVM computes what
    their bodies share (the loaded values and everything derived from them) once."""

    def __init__(self, lop: LoopOp, env: Env, companions: Sequence[LoopOp] = ()) -> None:
        self.lop = lop
        self.env = env
        self.companions = list(companions)
        n = len(lop.sizes)
        if env.row is not None and env.split == (0, 1) and lop.iterators[0] == "reduction":
            # a reduction over rows computed row by row (`row_partial`): dim 0 is the row
            n_red = sum(it == "reduction" for it in lop.iterators[1:])
            self.order = list(range(n))
            self.carry = carries_in_row(lop)
        else:
            n_red = sum(it == "reduction" for it in lop.iterators)
            self.order = loop_order(lop)
            self.carry = _carries(lop)  # reductions in registers: the innermost loops
        self.first_red = n - n_red if self.carry else n  # a position in `order`
        # transposing op: its loops j, i innermost (all parallel, any order goes), in tiles;
        # when j is the kernel's loop, the kernel runs over blocks of TRANSPOSE_TILE of it
        self.tile = transposed(lop) if self.first_red == n else None
        if self.tile is not None and env.row is not None and \
                env.split not in ((0, 1), (self.tile[0], TRANSPOSE_TILE)):
            self.tile = None  # the kernel runs over blocks of another dim
        if self.tile is not None and env.split == (0, 1) and env.row is not None and \
                self.tile[0] == 0:
            self.tile = None  # j is the kernel's row loop, one row at a time
        if self.tile is not None:
            self.order = [d for d in range(n) if d not in self.tile] + list(self.tile)
        self.staged: dict = {}  # transposed input -> its tile on the stack (`_stage`)
        self.tile_origin: tuple = ()
        self.ivs: list = [None] * n
        self.combiners = _float_combiners(lop) if self.carry else None
        self.zero = arith.ConstantOp(ir.IndexType.get(), 0).result
        self.one = arith.ConstantOp(ir.IndexType.get(), 1).result
        self.start = 1 if env.row is not None and env.split == (0, 1) else 0
        # a sum accumulated in memory: from this position on, into wide buffers
        self.wide_from = self._wide_position()
        self.wide: dict = {}  # output -> its wide buffer, while `_wide_sum` emits

    def emit(self) -> None:
        if self.start:
            self.ivs[0] = self.env.row
        self._nest(self.start)
        if self.start:
            self.env.in_cache.update(b for m in (self.lop, *self.companions)
                                     for b, _, _ in m.buffers())

    def _wide_position(self) -> Optional[int]:
        """The position of the first reduction loop of a float sum whose accumulator
        stays in memory (a column sum, a mean over a middle dim: parallel loops inside
        it), when its outputs fit wide buffers (`_wide_sum`); else None."""
        lop = self.lop
        if self.carry or self.tile is not None or self.companions or \
                not blocked_sums.sums(reduction_combiners(lop, FLOAT_IDENTITY, sole_use=True)):
            return None
        first = next((p for p in range(self.start, len(self.order))
                      if lop.iterators[self.order[p]] == "reduction"), None)
        if first is None or any(out in self.env.partials for out in lop.outs):
            return None
        nbytes = 0
        for out in lop.outs:
            t = self._wide_type(out, self._out_accesses(lop)[lop.outs.index(out)])
            if t is None:
                return None
            nbytes += math.prod(t.shape) * ir.FloatType(t.element_type).width // 8
        return first if nbytes <= WIDE_SUM_MAX_BYTES else None

    def _wide_type(self, out: ir.Value, acc: Access) -> Optional[ir.MemRefType]:
        """The wide buffer of `out`: its shape as the kernel sees it (one row where the
        kernel's row indexes it), in `blocked_sums.wider` elements; None for run-time
        sizes."""
        t = ir.MemRefType(self.env.value(out).type)
        if not t.has_static_shape:
            return None
        shape = list(t.shape)
        if self.start and acc and acc[0] == 0:
            shape[0] = 1
        return ir.MemRefType.get(shape, blocked_sums.wider(t.element_type))

    def _wide_index(self, acc: Access) -> list:
        idx = [self.zero if d is None else self.ivs[d] for d in acc]
        if self.start and acc and acc[0] == 0:
            idx[0] = self.zero
        return idx

    def _wide_sum(self, position: int) -> None:
        """The loops from `position` on, summing into a wide buffer per output (f64 for
        f32, on the stack) loaded from the output before and rounded into it after: a
        sum accumulated in memory row after row rounds at every row (a column sum of 512
        rows erred 6x eager's)."""
        accesses = self._out_accesses(self.lop)
        parallel = [d for d in self.order[position + 1:] if self.lop.iterators[d] == "parallel"]
        self.wide = {out: _entry_alloca(self._wide_type(out, acc))
                     for out, acc in zip(self.lop.outs, accesses)}

        def load() -> None:
            for out, acc in zip(self.lop.outs, accesses):
                v = self._load(out, acc)
                memref.StoreOp(blocked_sums.convert(v, ir.MemRefType(self.wide[out].type)
                                                    .element_type),
                               self.wide[out], self._wide_index(acc))

        def store() -> None:
            for out, acc in zip(self.lop.outs, accesses):
                v = memref.LoadOp(self.wide[out], self._wide_index(acc)).result
                self._store(blocked_sums.convert(v, ir.MemRefType(out.type).element_type),
                            out, acc)
        self._for_dims(parallel, load)
        self._nest(position, wide=False)
        self._for_dims(parallel, store)
        self.wide = {}

    def _for_dims(self, dims: Sequence[int], body: Callable[[], None]) -> None:
        """Loops over `dims` (their ivs set) around `body()`."""
        if not dims:
            body()
            return
        loop = self._loop(dims[0])
        with ir.InsertionPoint(loop.body):
            self._for_dims(dims[1:], body)
            scf.YieldOp([])

    def _dim(self, position: int) -> int:
        return self.order[position]

    def _index(self, buf: ir.Value, acc: Access) -> list:
        if buf in self.staged:  # the staged tile, [j - j0, i - i0]
            j, i = self.tile
            j0, i0 = self.tile_origin
            return [arith.subi(self.ivs[j], j0), arith.subi(self.ivs[i], i0)]
        idx = [self.zero if d is None else self.ivs[d] for d in acc]
        if buf in self.env.row_temps:
            idx[0] = self.zero
        if buf in self.env.partials:
            idx.insert(0, self.env.block)
        return idx

    def _load(self, buf: ir.Value, acc: Access) -> ir.Value:
        source = self.staged[buf] if buf in self.staged else self.env.value(buf)
        return memref.LoadOp(source, self._index(buf, acc)).result

    def _store(self, v: ir.Value, buf: ir.Value, acc: Access) -> None:
        memref.StoreOp(v, self.env.value(buf), self._index(buf, acc))

    def _loop(self, dim: int, inits: Sequence[ir.Value] = (), step: int = 1,
              tile: Optional[ir.Value] = None) -> scf.ForOp:
        """The loop over `dim`: the whole dim, the kernel's block of it, or the tile that
        starts at `tile`. With `step` > 1, the loop over the dim's tile starts instead
        (its iv is no index of the body)."""
        index = ir.IndexType.get()

        def const(v: int) -> ir.Value:
            return arith.ConstantOp(index, v).result
        lb, ub = self.zero, self.env.size(self.lop.sizes[dim])
        split_dim, block = self.env.split
        if tile is not None:
            end = arith.addi(tile, const(TRANSPOSE_TILE))  # full tiles: a static trip count
            lb, ub = tile, end if self.lop.sizes[dim] % TRANSPOSE_TILE == 0 else \
                arith.minsi(end, ub)
        elif self.env.row is not None and dim == split_dim and block > 1:
            lb = arith.muli(self.env.row, const(block))
            ub = arith.minsi(arith.addi(lb, const(block)), ub)
        loop = scf.ForOp(lb, ub, self.one if step == 1 else const(step), list(inits))
        if step == 1:
            self.ivs[dim] = loop.induction_variable
        return loop

    def _nest(self, position: int, wide: bool = True) -> None:
        if wide and position == self.wide_from:
            self._wide_sum(position)
            return
        if position == self.first_red:
            self._inner()
            return
        if self.tile is not None and position == len(self.order) - 2:
            self._tiles()
            return
        loop = self._loop(self._dim(position))
        with ir.InsertionPoint(loop.body):
            self._nest(position + 1, wide)
            scf.YieldOp([])

    def _tiles(self) -> None:
        """The transposing loops j, i (`transposed`) in square tiles: i's tiles, j's
        tiles (or the kernel's block of j), then j and i within the tile, i innermost so
        stores stay contiguous. j's tiles inside i's walk along the input's lines (an
        attention head transpose: 0.24 against 0.27 ms the other way round). Each
        transposed input's tile is first transposed onto the stack (`_stage`)."""
        j, i = self.tile
        index = ir.IndexType.get()
        loops = []
        origin = {}
        if self.env.split == (j, TRANSPOSE_TILE):  # the kernel's loop runs over j's tiles
            origin[j] = arith.muli(self.env.row, arith.ConstantOp(index, TRANSPOSE_TILE).result)
        for d in (i, j):
            if d not in origin:
                with _at_end_of(loops):
                    loops.append(self._loop(d, step=TRANSPOSE_TILE))
                origin[d] = loops[-1].induction_variable
        with _at_end_of(loops):
            self.tile_origin = (origin[j], origin[i])
            self._stage()
            loops.append(self._loop(j, tile=origin[j]))
        with _at_end_of(loops):
            loops.append(self._loop(i, tile=origin[i]))
        with _at_end_of(loops):
            self._inner()
        for loop in loops:
            with ir.InsertionPoint(loop.body):
                scf.YieldOp([])

    def _stage(self) -> None:
        """Transposes the current tile of each input read transposed (contiguous along j,
        indexed by i elsewhere) into a TRANSPOSE_TILE^2 buffer on the kernel's stack, as
        [j - j0, i - i0], so that the body reads it along i, as it writes. Full tiles
        move as vectors: a row load per i, a shuffle network, a row store per j. (Scalar
        copy loops were vectorized by LLVM as gathers across the input's lines.)"""
        j, i = self.tile
        j0, i0 = self.tile_origin
        full = all(self.lop.sizes[d] % TRANSPOSE_TILE == 0 for d in self.tile)
        for buf, acc in zip(self.lop.ins, self.lop.accesses):
            if buf in self.staged or not acc or acc[-1] != j or i not in acc[:-1]:
                continue
            element = ir.MemRefType(buf.type).element_type
            tile = _entry_alloca(ir.MemRefType.get([TRANSPOSE_TILE] * 2, element))
            if full and _vector_element(element):
                self._stage_vectors(buf, acc, tile)
            else:
                ii = self._loop(i, tile=i0)
                with ir.InsertionPoint(ii.body):
                    jj = self._loop(j, tile=j0)
                    with ir.InsertionPoint(jj.body):
                        v = self._load(buf, acc)
                        memref.StoreOp(v, tile, [arith.subi(self.ivs[j], j0),
                                                 arith.subi(self.ivs[i], i0)])
                        scf.YieldOp([])
                    scf.YieldOp([])
            self.staged[buf] = tile

    def _stage_vectors(self, buf: ir.Value, acc: Access, tile: ir.Value) -> None:
        j, i = self.tile
        j0, i0 = self.tile_origin
        index = ir.IndexType.get()
        row_type = ir.VectorType.get([TRANSPOSE_TILE], ir.MemRefType(buf.type).element_type)
        rows = []
        for k in range(TRANSPOSE_TILE):
            self.ivs[i] = arith.addi(i0, arith.ConstantOp(index, k).result)
            self.ivs[j] = j0
            rows.append(vector.LoadOp(row_type, self.env.value(buf),
                                      self._index(buf, acc)).result)
        for k, row in enumerate(transpose_rows(rows)):
            vector.StoreOp(row, tile, [arith.ConstantOp(index, k).result, self.zero])

    @staticmethod
    def _out_accesses(lop: LoopOp) -> list:
        return lop.accesses[len(lop.ins):]

    def _inner(self) -> None:
        outs = self.lop.outs
        if self.wide:
            self._accumulate_wide()
            return
        if not self.carry:
            results = self._compute(self.lop, [None] * len(outs))
        else:
            inits = [self._load(b, a) for b, a in zip(outs, self._out_accesses(self.lop))]
            results = self._reduce(self.first_red, inits)
        for buf, v, acc in zip(outs, results, self._out_accesses(self.lop)):
            self._store(v, buf, acc)
        for c in self.companions:
            values = self._compute(c, [None] * len(c.outs))
            for buf, v, acc in zip(c.outs, values, self._out_accesses(c)):
                self._store(v, buf, acc)

    def _accumulate_wide(self) -> None:
        """The body's values (its accumulators read as the identity), added to the wide
        buffers (`_wide_sum`)."""
        combiners = reduction_combiners(self.lop, FLOAT_IDENTITY)
        types = [ir.MemRefType(out.type).element_type for out in self.lop.outs]
        values = self._compute(self.lop, [blocked_sums.neutral(c, t)
                                          for c, t in zip(combiners, types)])
        for out, v, c, acc in zip(self.lop.outs, values, combiners,
                                  self._out_accesses(self.lop)):
            buf, idx = self.wide[out], self._wide_index(acc)
            wide = blocked_sums.convert(v, ir.MemRefType(buf.type).element_type)
            memref.StoreOp(combine(c, memref.LoadOp(buf, idx).result, wide, reassoc=False),
                           buf, idx)

    def _reduce(self, position: int, accs: list) -> list:
        lanes = self._lanes(position) if position == len(self.order) - 1 else 0
        if lanes:
            return self._reduce_in_lanes(position, accs, lanes)
        if blocked_sums.sums(self.combiners):
            return self._reduce_blocked(position, accs)
        loop = self._loop(self._dim(position), accs)
        with ir.InsertionPoint(loop.body):
            carried = list(loop.inner_iter_args)
            if position == len(self.order) - 1:
                results = self._compute(self.lop, carried)
                mark_reassoc(results)
            elif self.combiners is not None:
                # each inner reduction starts from the identity and is combined once:
                # rounding error grows with the loop lengths, not their product
                inner = self._reduce(position + 1, [identity(c, v.type)
                                                    for c, v in zip(self.combiners, carried)])
                results = [combine(c, a, b) for c, a, b in zip(self.combiners, carried, inner)]
            else:
                results = self._reduce(position + 1, carried)
            scf.YieldOp(results)
        return list(loop.results)

    def _reduce_blocked(self, position: int, accs: list) -> list:
        """The reduction loop at `position` as a blocked sum (`blocked_sums`): the
        innermost in blocks LLVM vectorizes, an outer one (its elements being the inner
        loops' sums) in blocks of OUTER_BLOCK."""
        dim = self._dim(position)
        size = self.lop.sizes[dim]
        innermost = position == len(self.order) - 1
        if innermost:
            # rows an earlier nest of the row kernel read stay in L1 and get no prefetch
            # chunks: longer blocks, fewer horizontal reductions
            cached = bool(self.start) and all(
                buf in self.env.in_cache for buf, acc in zip(self.lop.ins, self.lop.accesses)
                if dim in acc)
            block = blocked_sums.block_elements(
                [ir.MemRefType(v.type).element_type for v in (*self.lop.ins, *self.lop.outs)],
                cached)
        else:
            block = blocked_sums.OUTER_BLOCK

        def element(iv: ir.Value, carried: list) -> list:
            self.ivs[dim] = iv
            if innermost:
                results = self._compute(self.lop, carried)
                mark_reassoc(results)
                return results
            inner = self._reduce(position + 1, [blocked_sums.neutral(c, v.type)
                                                for c, v in zip(self.combiners, carried)])
            return [combine(c, a, b, reassoc=False)
                    for c, a, b in zip(self.combiners, carried, inner)]
        return blocked_sums.emit(self.env.size(size), None if is_dynamic(size) else size,
                                 block, accs, self.combiners, element, innermost)

    def _lanes(self, position: int) -> int:
        """Accumulator lanes for the innermost reduction loop at `position`, or 0. LLVM
        recognises a `maximumf`/`minimumf` (NaN-propagating) reduction but neither
        vectorizes it nor breaks its dependency chain: a softmax's row max then runs at
        several cycles per element, slower than the exp pass after it. Independent lanes
        give the out-of-order core (and the SLP vectorizer) parallel chains."""
        dim = self._dim(position)
        split_dim, block = self.env.split
        if self.combiners is None or not any(c in ("arith.maximumf", "arith.minimumf")
                                             for c in self.combiners):
            return 0
        if self.env.row is not None and dim == split_dim and block > 1:
            return 0
        if len(self.lop.op.regions[0].blocks[0].operations) > MINMAX_LANES_MAX_BODY:
            return 0
        widest = max(ir.FloatType(ir.MemRefType(b.type).element_type).width
                     for b in self.lop.outs)
        lanes = MINMAX_LANE_BYTES // (widest // 8)
        size = self.lop.sizes[dim]
        return lanes if is_dynamic(size) or size >= 2 * lanes else 0

    def _reduce_in_lanes(self, position: int, accs: list, lanes: int) -> list:
        """The innermost reduction as `lanes` independent accumulators per output over
        the loop's first multiple of lanes, combined once, then the remainder."""
        dim = self._dim(position)
        size, n = self.lop.sizes[dim], len(accs)
        index = ir.IndexType.get()

        def const(v: int) -> ir.Value:
            return arith.ConstantOp(index, v).result
        if is_dynamic(size):  # the run-time size's first multiple of lanes
            size = self.env.size(size)
            main = arith.muli(arith.divui(size, const(lanes)), const(lanes))
        else:
            main = size // lanes * lanes
        inits = [identity(c, a.type) for c, a in zip(self.combiners, accs)] * lanes
        loop = scf.ForOp(self.zero, main if isinstance(main, ir.Value) else const(main),
                         const(lanes), inits)
        with ir.InsertionPoint(loop.body):
            carried = list(loop.inner_iter_args)
            results = []
            for k in range(lanes):
                self.ivs[dim] = arith.addi(loop.induction_variable, const(k))
                lane = self._compute(self.lop, carried[k * n:(k + 1) * n])
                mark_reassoc(lane)
                results += lane
            scf.YieldOp(results)
        out = list(accs)
        for k in range(lanes):
            out = [combine(c, a, b) for c, a, b in
                   zip(self.combiners, out, list(loop.results)[k * n:(k + 1) * n])]
        if isinstance(main, ir.Value):
            rest = scf.ForOp(main, size, self.one, out)
        elif main == size:
            return out
        else:
            rest = scf.ForOp(const(main), const(size), self.one, out)
        with ir.InsertionPoint(rest.body):
            self.ivs[dim] = rest.induction_variable
            tail = self._compute(self.lop, list(rest.inner_iter_args))
            mark_reassoc(tail)
            scf.YieldOp(tail)
        return list(rest.results)

    def _compute(self, lop: LoopOp, out_values: Sequence[Optional[ir.Value]]) -> list:
        """`lop`'s body results for the current ivs; `out_values`: the outs' carried values."""
        return clone_body(lop, self._load, out_values, self.ivs, self.env.value, copy=lop.copy)


def transpose_rows(rows: list[ir.Value]) -> list[ir.Value]:
    """The rows of the transpose of the square matrix whose rows are the 1-D vectors
    `rows` (a power of two of them): at each distance d = n/2, ..., 1, rows r and r + d
    (r & d == 0) swap their off-diagonal d x d blocks, two two-source shuffles per pair
    (n log2 n shuffles in all; AVX-512 does each in one vpermt2ps)."""
    n = len(rows)
    rows = list(rows)
    d = n // 2
    while d:
        for r in range(n):
            if r & d:
                continue
            a, b = rows[r], rows[r + d]
            # shuffle indices: a's lanes are 0..n-1, b's are n..2n-1
            low = [c if c & d == 0 else n + c - d for c in range(n)]
            high = [c + d if c & d == 0 else n + c for c in range(n)]
            rows[r] = vector.ShuffleOp(a, b, low).result
            rows[r + d] = vector.ShuffleOp(a, b, high).result
        d //= 2
    return rows


def _vector_element(t: ir.Type) -> bool:
    """Can a staged tile of `t` move as vectors (not i1, which dg-widen-bool-memrefs
    stores as bytes later)?"""
    return isinstance(t, (ir.F32Type, ir.F64Type, ir.F16Type, ir.BF16Type)) or \
        (isinstance(t, ir.IntegerType) and t.width >= 8)


def _at_end_of(loops: list) -> ir.InsertionPoint:
    """The insertion point inside the last of `loops`, or the current one if none."""
    return ir.InsertionPoint(loops[-1].body) if loops else ir.InsertionPoint.current


def _entry_alloca(t: ir.MemRefType) -> ir.Value:
    """A stack buffer allocated once at the start of the enclosing function (an alloca
    inside a loop would grow the stack every iteration)."""
    op = ir.InsertionPoint.current.block.owner.operation
    while op.name != "func.func":
        op = op.parent
    with ir.InsertionPoint.at_block_begin(op.regions[0].blocks[0]):
        return memref.AllocaOp(t, [], []).result


# most bytes of the wide buffers a sum accumulated in memory adds into (`Nest._wide_sum`)
WIDE_SUM_MAX_BYTES = 64 * 1024
# a max/min reduction loop runs this many independent accumulator lanes (one 64-byte
# vector of them), when its body has at most MINMAX_LANES_MAX_BODY ops
MINMAX_LANE_BYTES = 64
MINMAX_LANES_MAX_BODY = 16


def loop_order(lop: LoopOp) -> list[int]:
    """Loops in dim order, except that a reduction over the last (contiguous) dim with a
    parallel dim outside a reduction (a batch-norm statistic over N, H, W per channel)
    runs its parallel loops outermost: its reductions then stay in registers."""
    n = len(lop.sizes)
    parallel = [k for k, it in enumerate(lop.iterators) if it == "parallel"]
    reduction = [k for k, it in enumerate(lop.iterators) if it == "reduction"]
    if not reduction or not parallel or lop.iterators[-1] != "reduction" or \
            reduction == list(range(n - len(reduction), n)):
        return list(range(n))
    return parallel + reduction


def _carries(lop: LoopOp) -> bool:
    """Are `lop`'s reductions its innermost loops (accumulators carried in registers)?"""
    order = loop_order(lop)
    red = [k for k, it in enumerate(lop.iterators) if it == "reduction"]
    return bool(red) and sorted(order[len(order) - len(red):]) == red


# ---------------------------------------------------------------- row groups

def _companion(group: list[LoopOp], lop: LoopOp) -> bool:
    """Can `lop` share the loop nest of a reduction over rows: an all-parallel op over the
    same loops that touches no buffer another member writes or reads what it writes?"""
    if lop.fill is not None or lop.sizes != group[0].sizes or \
            any(it != "parallel" for it in lop.iterators) or _carries(group[0]):
        return False
    return all(_independent(member, lop) for member in group)


def row_groups(block: ir.Block, min_work: int = PARALLEL_MIN_WORK,
               max_loops: int = ROW_GROUP_MAX_LOOPS,
               sizes: Optional[SizeClasses] = None) -> list[list[LoopOp]]:
    """Maximal runs of row-parallel LoopOps over equal rows, separated only by pure ops,
    with the reductions over the same rows that follow them (`row_partial`), at most
    `max_loops` ops a run; and other
    large reductions over rows, split by column blocks, each with the independent
    all-parallel ops over the same loops that follow it (its companions). An op that
    transposes along its rows (`_row_tiles`) is a group of its own."""
    groups: list[list[LoopOp]] = []
    current: list[LoopOp] = []
    split = False  # is `current` a reduction over rows (plus companions)?

    def close() -> None:
        nonlocal current
        if current:
            groups.append(current)
        current = []

    for op in block.operations:
        op = op.operation
        lop = parse(op, sizes=sizes) if op.name in _LOOP_OPS else None
        full = len(current) >= max_loops
        if lop is not None and current and not split and not full and \
                row_partial(lop, current[0].sizes[0]) and not row_conflict(current, lop, sizes):
            current.append(lop)  # per-block partial results in the row kernel
            continue
        if lop is not None and column_split(lop, min_work) is not None:
            close()
            current = [lop]  # threaded by column blocks, with its companions
            split = True
            continue
        if split:
            if lop is not None and not full and _companion(current, lop):
                current.append(lop)
                continue
            if lop is None and _pure(op):
                continue
            close()
            split = False
        if lop is None or not starts_row_kernel(lop, min_work):
            if not _pure(op):
                close()
            continue
        if current and (full or current[0].sizes[0] != lop.sizes[0] or
                        row_conflict(current, lop, sizes) or _row_tiles(current) or
                        _row_tiles([lop])):
            close()
        current.append(lop)
    close()
    return groups


def _row_tiles(group: list[LoopOp]) -> Optional[tuple[int, int]]:
    """(0, TRANSPOSE_TILE) for a group of one op whose transposing loop j is its rows (a
    2-D `t().contiguous()`): its kernel runs over blocks of TRANSPOSE_TILE rows, each in
    tiles (`Nest._tiles`). One row at a time, a 1024 x 1024 transpose read each column
    of its input from L3 (0.19x eager's speed)."""
    if len(group) == 1 and row_parallel(group[0]):
        tile = transposed(group[0])
        if tile is not None and tile[0] == 0:
            return (0, TRANSPOSE_TILE)
    return None


def _independent(a: LoopOp, b: LoopOp) -> bool:
    """Do `a` and `b` touch no common memory that either writes (any order is the same)?"""
    for x, _, writes_x in a.buffers():
        for y, _, writes_y in b.buffers():
            if buffer_root(x) == buffer_root(y) and (writes_x or writes_y):
                return False
    return True


def _hoisted_above_run(moved: list, start: int, end: int, ops: list) -> Optional[list]:
    """`moved` with the allocs, views and constants inside the run `ops[start:end + 1]`
    that they use (an earlier move left them there: the buffer of a count computed from a
    run-time size), in block order, when the operands of all of them are defined above
    `ops[start]` or among them; else None."""
    above = set(ops[:start])
    pulled: list = []
    pending = list(moved)
    while pending:
        op = pending.pop()
        for v in op.operands:
            owner = None if isinstance(v.owner, ir.Block) else v.owner.operation
            if owner is None or owner in above or owner in moved or owner in pulled:
                continue
            if owner not in ops[start:end + 1] or not _pure(owner):
                return None
            pulled.append(owner)
            pending.append(owner)
    return sorted(pulled + list(moved), key=ops.index)


def join_row_runs(block: ir.Block, sizes: Optional[SizeClasses] = None) -> None:
    """Move ops that are not row loops (a column reduction, a small fill) out from between
    two row loops over the same rows, so that the two share one kernel and a layer norm's
    backward reads its inputs from DRAM once: below the second when independent of it,
    else above the first run when independent of that (the fill and copies that
    initialise a weight gradient the next reduction over rows accumulates into)."""
    ops = [o.operation for o in block.operations]
    parsed = {op: lop for op in ops
              if op.name in _LOOP_OPS and (lop := parse(op, sizes=sizes)) is not None}

    def continues(lop: Optional[LoopOp], rows: Optional[int]) -> bool:
        if lop is None:
            return False
        if row_parallel(lop):
            return rows in (None, lop.sizes[0])
        return rows is not None and row_partial(lop, rows)

    last_rows = None  # rows of the current run of row loops
    run_start = run_end = 0  # indices of its first and last loop ops
    i = 0
    while i < len(ops):
        lop = parsed.get(ops[i])
        if continues(lop, last_rows):
            if last_rows is None:
                last_rows, run_start = lop.sizes[0], i
            run_end = i
            i += 1
            continue
        if lop is None or last_rows is None:
            if not _pure(ops[i]):
                last_rows = None
            i += 1
            continue
        # ops[i] is a loop op after a run: gather what stands before the next row loop
        j = i
        while j < len(ops) and not continues(parsed.get(ops[j]), last_rows) and \
                (ops[j] in parsed or _pure(ops[j])):
            j += 1
        nxt = parsed.get(ops[j]) if j < len(ops) else None
        between = ops[run_end + 1:j]  # with the allocs the deferred ops use
        deferred = [parsed[op] for op in between if op in parsed]
        run = [parsed[op] for op in ops[run_start:run_end + 1] if op in parsed]
        # `ops` follows the moves (rebuilding it from the block after each was quadratic:
        # 0.8 s of a 16-layer GPT-2's training graph)
        if continues(nxt, last_rows) and all(_independent(d, nxt) for d in deferred):
            for d in reversed(deferred):
                d.op.move_after(nxt.op)
            moved = {d.op for d in deferred}
            stay = [op for op in between if op not in moved]
            ops[run_end + 1:j + 1] = stay + [nxt.op] + [d.op for d in deferred]
            i = run_end + 1 + len(stay)
        elif continues(nxt, last_rows) and \
                (hoisted := _hoisted_above_run(between, run_start, run_end, ops)) is not None \
                and all(_independent(d, r) for d in deferred for r in run):
            for op in hoisted:
                op.move_before(ops[run_start])
            kept = [op for op in ops[run_start:run_end + 1] if op not in hoisted]
            ops[run_start:j] = hoisted + kept
            run_start += len(hoisted)
            run_end = run_start + len(kept) - 1
            i = j
        else:
            last_rows = None
            i = max(j, i + 1)


def _row_temps(group: list[LoopOp]) -> list[ir.Value]:
    """Allocs used only by this group, row by row (and freed): they shrink to one row. A
    row of static size at most ROW_TEMP_MAX_BYTES goes on the kernel's stack; a row of a
    run-time size (`_heap_row`) is allocated on the heap once per kernel call, since
    nothing bounds it."""
    members = {m.op for m in group}
    touched: dict = {}
    for m in group:
        for b, acc, _ in m.buffers():
            touched.setdefault(b, []).append(acc)
    temps = []
    for b, accs in touched.items():
        if isinstance(b.owner, ir.Block) or b.owner.operation.name != "memref.alloc":
            continue
        if not all(row_local(a) for a in accs):
            continue
        t = ir.MemRefType(b.type)
        if not _heap_row(t):
            row_bytes = t.element_type.width // 8 if hasattr(t.element_type, "width") else 8
            for s in t.shape[1:]:
                row_bytes *= s
            if row_bytes > ROW_TEMP_MAX_BYTES:
                continue
        users = [u.owner.operation for u in b.uses]
        if all(u in members or u.name == "memref.dealloc" for u in users):
            temps.append(b)
    return temps


def _heap_row(t: ir.MemRefType) -> bool:
    """Is a row of `t` (all dims but the first) of a size only the run time knows?"""
    return any(ir.ShapedType.is_dynamic_size(s) for s in t.shape[1:])


def _dim_sizes(group: list[LoopOp]) -> dict:
    """The group's run-time loop sizes, as {DynSize key: [(buffer, dim), ...]}: every
    operand dim of the group that has it."""
    found: dict = {}
    for m in group:
        for size in m.sizes:
            if is_dynamic(size):
                found.setdefault(size.key, [])
                found[size.key] += [s for s in size.sources if s not in found[size.key]]
    return found


def _temp_dim_keys(group: list[LoopOp], temp: ir.Value) -> dict:
    """Per dynamic dim (after the first) of row temp `temp`, the key of its size."""
    keys: dict = {}
    for m in group:
        for b, acc, _ in m.buffers():
            if b != temp or acc is None:
                continue
            for d, loop in enumerate(acc):
                if d > 0 and isinstance(loop, int) and is_dynamic(m.sizes[loop]):
                    keys[d] = m.sizes[loop].key
    return keys


def _ceil_div(a: ir.Value, b: ir.Value) -> ir.Value:
    one = arith.ConstantOp(ir.IndexType.get(), 1).result
    return arith.divui(arith.subi(arith.addi(a, b), one), b)


def _dynamic_rows_per_block(rows: ir.Value, reducers: list[LoopOp]) -> ir.Value:
    """`_rows_per_block` for a run-time number of rows (at least 1): the combine's share
    is weighed with the other loop sizes at their estimates."""
    index = ir.IndexType.get()
    least = 1
    for m in reducers:
        out = max(math.prod(size_hint(s) for s in _out_sizes(m, v)) for v in m.outs)
        inner = max(1, m.work // max(1, size_hint(m.sizes[0])))
        least = max(least, -(-PARTIAL_COMBINE_SHARE * out // inner))
    per_block = arith.minui(_ceil_div(rows, arith.ConstantOp(index, PARTIAL_BLOCKS).result),
                            arith.ConstantOp(index, PARTIAL_BLOCK_MAX_ROWS).result)
    per_block = arith.maxui(per_block, arith.ConstantOp(index, least).result)
    return arith.maxui(arith.minui(per_block, rows), arith.ConstantOp(index, 1).result)


def _out_sizes(m: LoopOp, out: ir.Value) -> list:
    """The sizes of output `out`'s dims (static, or the loop's DynSize)."""
    acc = m.accesses[len(m.ins) + m.outs.index(out)]
    shape = ir.MemRefType(out.type).shape
    return [m.sizes[d] if ir.ShapedType.is_dynamic_size(s) else s for d, s in zip(acc, shape)]


def _shape_values(buf: ir.Value, skip: int = 0) -> list:
    """`buf`'s dims from `skip` on: ints where static, else `memref.dim` values."""
    index = ir.IndexType.get()
    t = ir.MemRefType(buf.type)
    return [memref.DimOp(buf, arith.ConstantOp(index, d).result).result
            if ir.ShapedType.is_dynamic_size(t.shape[d]) else t.shape[d]
            for d in range(skip, t.rank)]


class Outliner:
    """Turns each row group into a private kernel function and a call."""

    def __init__(self, module: ir.Operation, parallel_min_work: int) -> None:
        self.module = module
        self.parallel_min_work = parallel_min_work
        self.names = set()
        for op in module.regions[0].blocks[0].operations:
            if "sym_name" in op.operation.attributes:
                self.names.add(ir.StringAttr(op.operation.attributes["sym_name"]).value)
        self.counter = itertools.count()

    def _fresh(self, base: str) -> str:
        while True:
            name = f"{base}_k{next(self.counter)}"
            if name not in self.names:
                self.names.add(name)
                return name

    def outline(self, fn: ir.Operation, group: list[LoopOp]) -> bool:
        """Outline `group`; False (nothing changed) when a run-time size it needs has no
        operand to read it from inside the kernel."""
        split = column_split(group[0], self.parallel_min_work) or _row_tiles(group) or (0, 1)
        temps = _row_temps(group) if split == (0, 1) else []
        last = group[-1].op
        loc = last.location
        index = ir.IndexType.get()
        reducers = [m for m in group if split == (0, 1) and not row_parallel(m)]
        dim, block = split
        dynamic = any(m.dynamic for m in group)
        self.outer_sizes: dict = {}  # DynSize key -> its value where the kernel is called
        reads: dict = {}  # DynSize key -> (outer value, dim) the kernel reads it from
        if dynamic:
            reads = self._size_reads(group, temps, reducers)
            if reads is None:
                return False
            whole = reads.pop(None)
            temps = [t for t in temps if t not in whole]
        # the row count, and per-block partial results, as ints or (run time) values
        with ir.InsertionPoint(last), loc:
            rows_size = group[0].sizes[dim]
            if is_dynamic(rows_size):
                total = self._outer_size(rows_size, group, temps)
            if reducers and is_dynamic(rows_size):
                n_blocks = _ceil_div(total, _dynamic_rows_per_block(total, reducers))
                rows_per_block = None
            elif reducers:
                rows_per_block = _rows_per_block(rows_size, reducers)
                n_blocks = -(-rows_size // rows_per_block)
        partials = {}  # output of a reduction over rows -> its [blocks, ...] partial buffer
        with ir.InsertionPoint(last), loc:
            for m in reducers:
                for out in m.outs:
                    t = ir.MemRefType(out.type)
                    dims = [] if t.has_static_shape else \
                        [v for v in _shape_values(out) if isinstance(v, ir.Value)]
                    if isinstance(n_blocks, int):
                        first, operands = n_blocks, []
                    else:
                        first, operands = ir.ShapedType.get_dynamic_size(), [n_blocks]
                    partials[out] = memref.AllocOp(
                        ir.MemRefType.get([first, *t.shape], t.element_type), operands + dims,
                        []).result
        args: list = []  # outer values passed to the kernel
        constants: list = []  # outer arith.constants cloned into the kernel
        for m in group:
            values = [*m.ins, *m.outs, *m.captured] + ([m.fill] if m.fill is not None else [])
            for v in values:
                v = partials.get(v, v)
                if v in temps or v in args or v in constants:
                    continue
                if not isinstance(v.owner, ir.Block) and v.owner.operation.name == "arith.constant":
                    constants.append(v)
                else:
                    args.append(v)
        fname = ir.StringAttr(fn.attributes["sym_name"]).value
        name = self._fresh(fname)
        params = [dynamic_offset(v.type) for v in args]
        ftype = ir.FunctionType.get([index, index] + params, [])
        with ir.InsertionPoint(fn), loc:
            kernel = func.FuncOp(name, ftype, visibility="private")
        mark_kernel(kernel, args, 2)
        block_ = kernel.add_entry_block()
        with ir.InsertionPoint(block_), loc:
            mapping = dict(zip(args, list(block_.arguments)[2:]))
            for out, buf in partials.items():
                mapping[out] = mapping[buf]
            for c in constants:
                mapping[c] = c.owner.operation.clone().results[0]
            sizes = None
            if dynamic:  # the run-time sizes, read once from the kernel's arguments
                sizes = {key: memref.DimOp(mapping[v], arith.ConstantOp(index, d).result).result
                         for key, (v, d) in reads.items()}
            heap = []
            for t in temps:
                mt = ir.MemRefType(t.type)
                row = ir.MemRefType.get([1] + list(mt.shape[1:]), mt.element_type)
                if _heap_row(mt):
                    keys = _temp_dim_keys(group, t)
                    mapping[t] = memref.AllocOp(row, [sizes[keys[d]] for d in range(1, mt.rank)
                                                      if d in keys], []).result
                    heap.append(mapping[t])
                else:
                    mapping[t] = memref.AllocaOp(row, [], []).result
            if reducers and is_dynamic(rows_size):
                rows_per_block = _dynamic_rows_per_block(sizes[rows_size.key], reducers)
            one = arith.ConstantOp(index, 1).result
            lo, hi = list(block_.arguments)[:2]
            loop = scf.ForOp(lo, hi, one)
            with ir.InsertionPoint(loop.body):
                if reducers:
                    self._block_of_rows(group, reducers, mapping, temps, loop.induction_variable,
                                        rows_per_block, sizes)
                else:
                    env = Env(mapping, row=loop.induction_variable, row_temps=temps, split=split,
                              sizes=sizes)
                    if split == (0, 1):
                        for m in group:
                            with m.op.location:
                                Nest(m, env).emit()
                    else:  # one nest: a reduction over rows and its companions, or tiles
                        with group[0].op.location:
                            Nest(group[0], env, companions=group[1:]).emit()
                scf.YieldOp([])
            for h in heap:
                memref.DeallocOp(h)
            func.ReturnOp([])
        if not dynamic:
            rows = n_blocks if reducers else -(-group[0].sizes[dim] // block)
            work = sum(m.work for m in group)
        with ir.InsertionPoint(last), loc:
            args = passed_as(args, params)
            if dynamic:
                self._call_dynamic(fn, name, params, args, group, temps, reducers,
                                   n_blocks if reducers else None, split)
            elif work >= self.parallel_min_work and rows >= 2 and self.parallel_min_work > 0:
                launcher = name + PARALLEL_SUFFIX
                ltype = ir.FunctionType.get([index] + params, [])
                with ir.InsertionPoint(fn):
                    func.FuncOp(launcher, ltype, visibility="private")
                func.CallOp([], ir.FlatSymbolRefAttr.get(launcher),
                            [arith.ConstantOp(index, rows).result, *args])
            else:
                func.CallOp([], ir.FlatSymbolRefAttr.get(name),
                            [arith.ConstantOp(index, 0).result,
                             arith.ConstantOp(index, rows).result, *args])
            for m in reducers:
                for out, combiner in zip(m.outs, _float_combiners(m)):
                    _combine_partials(out, partials[out], combiner,
                                      None if isinstance(n_blocks, int) else n_blocks)
                    memref.DeallocOp(partials[out])
        for m in group:
            m.op.erase()
        for t in temps:
            for u in list(t.uses):
                u.owner.operation.erase()  # the deallocs
            t.owner.operation.erase()
        return True

    @staticmethod
    def _size_reads(group: list[LoopOp], temps: list, reducers: list) -> Optional[dict]:
        """For a group with run-time sizes: per DynSize key, an operand the kernel gets
        (not a row temp, not a reduction's output, which becomes its partials) and the dim
        that has it; under key None, the row temps that stay whole because no operand
        has a run-time size of their row. None when some loop's size has no operand."""
        outs = {v for m in reducers for v in m.outs}
        known = _dim_sizes(group)
        reads: dict = {None: []}

        def usable(skip: set) -> dict:
            found = {}
            for key, sources in known.items():
                for v, d in sources:
                    if v not in skip and v not in outs:
                        found[key] = (v, d)
                        break
            return found
        found = usable(set(temps))
        for t in temps:
            mt = ir.MemRefType(t.type)
            keys = _temp_dim_keys(group, t)
            if _heap_row(mt) and not all(
                    d in keys and keys[d] in found for d in range(1, mt.rank)
                    if ir.ShapedType.is_dynamic_size(mt.shape[d])):
                reads[None].append(t)  # kept whole: its row's sizes are read nowhere
        found = usable(set(temps) - set(reads[None]))
        if len(found) != len(known):
            return None
        reads.update(found)
        return reads

    def _outer_size(self, size, group: list[LoopOp], temps: Sequence[ir.Value]) -> ir.Value:
        """A run-time size of the group, read in the function that calls its kernel (from
        an operand, or a row temp's alloc, which goes), once per outlined group."""
        if size.key in self.outer_sizes:
            return self.outer_sizes[size.key]
        index = ir.IndexType.get()
        sources = _dim_sizes(group).get(size.key, size.sources)
        found = None
        for v, d in sources:
            if v not in temps:
                found = memref.DimOp(v, arith.ConstantOp(index, d).result).result
                break
        if found is None:
            v, d = sources[0]
            t = ir.MemRefType(v.type)
            k = sum(ir.ShapedType.is_dynamic_size(s) for s in t.shape[:d])
            found = v.owner.operation.operands[k]
        self.outer_sizes[size.key] = found
        return found

    def _call_dynamic(self, fn: ir.Operation, name: str, params: list, args: list,
                      group: list[LoopOp], temps: list, reducers: list,
                      n_blocks: Optional[object], split: tuple[int, int]) -> None:
        """The call of a kernel with run-time sizes: through its `__parallel` launcher when
        the group's iterations, counted at run time, reach PARALLEL_MIN_WORK and there
        are at least two rows (blocks) to share, else directly."""
        index = ir.IndexType.get()

        def value(size) -> ir.Value:
            return self._outer_size(size, group, temps) if is_dynamic(size) else \
                arith.ConstantOp(index, size).result
        dim, block = split
        if n_blocks is not None:
            rows = n_blocks if isinstance(n_blocks, ir.Value) else \
                arith.ConstantOp(index, n_blocks).result
        elif block == 1:
            rows = value(group[0].sizes[dim])
        else:
            rows = _ceil_div(value(group[0].sizes[dim]), arith.ConstantOp(index, block).result)
        zero = arith.ConstantOp(index, 0).result
        if self.parallel_min_work <= 0:
            func.CallOp([], ir.FlatSymbolRefAttr.get(name), [zero, rows, *args])
            return
        work = None
        for m in group:
            n = None
            for size in m.sizes:
                n = value(size) if n is None else arith.muli(n, value(size))
            n = n if n is not None else arith.ConstantOp(index, 1).result
            work = n if work is None else arith.addi(work, n)
        threads = arith.andi(
            arith.cmpi(arith.CmpIPredicate.uge, work,
                       arith.ConstantOp(index, self.parallel_min_work).result),
            arith.cmpi(arith.CmpIPredicate.uge, rows, arith.ConstantOp(index, 2).result))
        launcher = name + PARALLEL_SUFFIX
        with ir.InsertionPoint(fn):
            func.FuncOp(launcher, ir.FunctionType.get([index] + params, []), visibility="private")
        branch = scf.IfOp(threads, [], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            func.CallOp([], ir.FlatSymbolRefAttr.get(launcher), [rows, *args])
            scf.YieldOp([])
        with ir.InsertionPoint(branch.else_block):
            func.CallOp([], ir.FlatSymbolRefAttr.get(name), [zero, rows, *args])
            scf.YieldOp([])

    @staticmethod
    def _block_of_rows(group: list[LoopOp], reducers: list[LoopOp], mapping: dict,
                       temps: list, block: ir.Value, rows_per_block, sizes: Optional[dict]) -> None:
        """Kernel body for row block `block` of a group with reductions over rows: their
        partial results for the block start from the identity, then every member runs
        row by row over the block's rows. `rows_per_block`: an int, or a run-time value
        (the group's rows then being read from `sizes`)."""
        index = ir.IndexType.get()
        partial_outs = [out for m in reducers for out in m.outs]
        for m in reducers:
            for out, combiner in zip(m.outs, _float_combiners(m)):
                t = ir.MemRefType(out.type)
                init = identity(combiner, t.element_type)
                buf = mapping[out]
                shape = list(t.shape) if t.has_static_shape else _shape_values(buf, 1)
                _for_each(shape, lambda ivs: memref.StoreOp(init, buf, [block, *ivs]))
        rows = group[0].sizes[0]
        if isinstance(rows_per_block, int):
            size = arith.ConstantOp(index, rows_per_block).result
        else:
            size = rows_per_block
        first = arith.muli(block, size)
        end = arith.minsi(arith.addi(first, size),
                          sizes[rows.key] if is_dynamic(rows) else
                          arith.ConstantOp(index, rows).result)
        loop = scf.ForOp(first, end, arith.ConstantOp(index, 1).result)
        with ir.InsertionPoint(loop.body):
            env = Env(mapping, row=loop.induction_variable, row_temps=temps,
                      partials=partial_outs, block=block, sizes=sizes)
            for run in _shared_nests(group):
                with run[0].op.location:
                    Nest(run[0], env, companions=run[1:]).emit()
            scf.YieldOp([])


def _rows_per_block(rows: int, reducers: list[LoopOp]) -> int:
    """Rows per block of a row kernel's per-block partial results (see PARTIAL_*)."""
    per_block = min(-(-rows // PARTIAL_BLOCKS), PARTIAL_BLOCK_MAX_ROWS)
    for m in reducers:
        out = max(math.prod(size_hint(s) for s in _out_sizes(m, v)) for v in m.outs)
        per_block = max(per_block, -(-PARTIAL_COMBINE_SHARE * out * rows // m.work))
    return min(per_block, rows)


def _shared_nests(group: list[LoopOp]) -> list[list[LoopOp]]:
    """A row block's members as runs sharing one nest: consecutive ops over the same loops,
    pointwise within the row (a reduction over rows accumulates its block's partial row),
    none touching what another writes. LLVM then computes what their bodies share once: a
    gelu backward's input gradient and its bias and weight gradients evaluate the erf and
    exp once per element, not three times."""
    def pointwise_in_row(m: LoopOp) -> bool:
        return m.fill is None and all(it == "parallel" for it in m.iterators[1:])

    runs: list[list[LoopOp]] = []
    for m in group:
        run = runs[-1] if runs else None
        if run is not None and pointwise_in_row(m) and pointwise_in_row(run[0]) and \
                m.sizes == run[0].sizes and all(_independent(x, m) for x in run):
            run.append(m)
        else:
            runs.append([m])
    return runs


def _for_each(shape: Sequence, body: Callable[[list], object]) -> None:
    """Nested scf.for loops over `shape` (ints, or index values) at the current insertion
    point; `body(ivs)` emits the innermost body."""
    index = ir.IndexType.get()
    zero, one = arith.ConstantOp(index, 0).result, arith.ConstantOp(index, 1).result

    def nest(ivs: list) -> None:
        if len(ivs) == len(shape):
            body(ivs)
            return
        size = shape[len(ivs)]
        loop = scf.ForOp(zero, size if isinstance(size, ir.Value) else
                         arith.ConstantOp(index, size).result, one)
        with ir.InsertionPoint(loop.body):
            nest(ivs + [loop.induction_variable])
            scf.YieldOp([])
    nest([])


def _combine_partials(out: ir.Value, partial: ir.Value, combiner: str,
                      blocks: Optional[ir.Value] = None) -> None:
    """out = combiner(out, partial[0], ..., partial[blocks - 1]), in block order (so the
    result does not depend on the number of threads), a sum in a buffer of
    `blocked_sums.wider` elements rounded into `out` once: the 64 partial sums of a batch
    norm's statistics added in f32 erred twice eager's. `blocks`: a run-time count (else
    the partial buffer's first dim)."""
    t = ir.MemRefType(out.type)
    dims = t.shape if t.has_static_shape else _shape_values(out)
    element = blocked_sums.wider(t.element_type) if blocked_sums.sums([combiner]) \
        else t.element_type
    total = memref.AllocOp(ir.MemRefType.get(t.shape, element),
                           [v for v in dims if isinstance(v, ir.Value)], []).result
    count = ir.MemRefType(partial.type).shape[0] if blocks is None else blocks

    def load(ivs: list) -> None:
        v = memref.LoadOp(out, ivs).result
        memref.StoreOp(blocked_sums.convert(v, element), total, ivs)

    def add(ivs: list) -> None:
        v = blocked_sums.convert(memref.LoadOp(partial, ivs).result, element)
        acc = memref.LoadOp(total, ivs[1:]).result
        memref.StoreOp(combine(combiner, acc, v, reassoc=False), total, ivs[1:])

    def store(ivs: list) -> None:
        v = memref.LoadOp(total, ivs).result
        memref.StoreOp(blocked_sums.convert(v, t.element_type), out, ivs)
    _for_each(dims, load)
    _for_each([count, *dims], add)
    _for_each(dims, store)
    memref.DeallocOp(total)


def mark_kernel(fn: ir.Operation, args: Sequence[ir.Value], leading: int) -> None:
    """Attributes of an outlined function `fn(leading scalars..., *args)` (a kernel, an
    outlined loop): its distinct pointers, for dg-noalias-kernel-args, KERNEL_PASSTHROUGH
    and KERNEL_VECTOR_BITS."""
    fn.attributes[NOALIAS_ATTR] = ir.DenseI64ArrayAttr.get(_distinct_pointers(args, leading))
    fn.attributes["passthrough"] = ir.ArrayAttr.get(
        [ir.StringAttr.get(a) for a in KERNEL_PASSTHROUGH] +
        [ir.ArrayAttr.get([ir.StringAttr.get("prefer-vector-width"),
                           ir.StringAttr.get(KERNEL_VECTOR_BITS)])])


def _distinct_pointers(args: Sequence[ir.Value], leading: int) -> list[int]:
    """Positions, among the LLVM parameters of a function `(leading scalars..., *args)`
    (a kernel's lo and hi), of the aligned data pointers of the memref arguments that
    are the only view of their buffer in `args`. Their memory overlaps no other
    argument's: distinct allocs passed to one call are live at once, so even sharing a
    workspace they are disjoint; distinct function arguments are distinct tensors or
    never written (dg-readonly-arguments)."""
    roots = [buffer_root(v) for v in args if isinstance(v.type, ir.MemRefType)]
    positions, position = [], leading
    for v in args:
        if not isinstance(v.type, ir.MemRefType):
            position += 1
            continue
        if roots.count(buffer_root(v)) == 1:
            positions.append(position + 1)  # (allocated, aligned, offset, sizes, strides)
        position += 3 + 2 * ir.MemRefType(v.type).rank
    return positions


def noalias_kernel_args(module: ir.Operation) -> None:
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name != "llvm.func" or NOALIAS_ATTR not in op.attributes:
            continue
        positions = set(ir.DenseI64ArrayAttr(op.attributes[NOALIAS_ATTR]))
        del op.attributes[NOALIAS_ATTR]
        n = len(op.regions[0].blocks[0].arguments)
        old = list(ir.ArrayAttr(op.attributes["arg_attrs"])) if "arg_attrs" in op.attributes \
            else [ir.DictAttr.get({}) for _ in range(n)]
        new = []
        for k, attrs in enumerate(old):
            d = ir.DictAttr(attrs)
            entries = {d[i].name: d[i].attr for i in range(len(d))}
            if k in positions:
                entries["llvm.noalias"] = ir.UnitAttr.get()
            new.append(ir.DictAttr.get(entries))
        op.attributes["arg_attrs"] = ir.ArrayAttr.get(new)


def cpu_kernels(module: ir.Operation, parallel_min_work: int = PARALLEL_MIN_WORK,
                row_group_max_loops: int = ROW_GROUP_MAX_LOOPS) -> None:
    outliner = Outliner(module, parallel_min_work)
    for fn in list(functions(module)):
        body = fn.regions[0].blocks[0]
        sizes = SizeClasses(body)  # which run-time sizes are equal, before any rewrite
        join_row_runs(body, sizes)
        for group in row_groups(body, parallel_min_work, row_group_max_loops, sizes):
            outliner.outline(fn, group)
        # what remains (reductions over rows, rank-0 fills) runs inline; copies that
        # joined no row loop stay memref.copy (memcpy)
        rest = []
        for op in body.operations:
            name = op.operation.name
            lop = parse(op.operation, sizes=sizes) \
                if name in _LOOP_OPS and name != "memref.copy" else None
            if lop is not None:
                rest.append(lop)
        for lop in rest:
            with ir.InsertionPoint(lop.op), lop.op.location:
                Nest(lop, Env()).emit()
            lop.op.erase()
    _check_loop_bounds(module)


def _check_loop_bounds(module: ir.Operation) -> None:
    """A loop bounded by MLIR's dynamic-size marker is a size read from a type where it
    had to be read from a buffer (memref.dim): an empty or huge loop, a wrong result.
    Fail the compile rather than run it."""
    marker = ir.ShapedType.get_dynamic_size()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "scf.for":
            for bound in list(op.operands)[:2]:
                owner = bound.owner
                if not isinstance(owner, ir.Block) and owner.name == "arith.constant" and \
                        isinstance(bound.type, ir.IndexType) and \
                        ir.IntegerAttr(owner.attributes["value"]).value == marker:
                    raise PassError("dg-cpu-kernels: a loop bound is MLIR's dynamic-size "
                                    "marker, not the buffer's run-time size (a compiler "
                                    "bug: please report it)", op.location)
        return ir.WalkResult.ADVANCE
    module.walk(visit)

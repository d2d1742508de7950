"""dg-matmul-to-blas: library-call contractions on the CPU.

Contractions stay library-like kernels: after bufferization, f32/f64
`linalg.matmul` / `linalg.batch_matmul` on row-major memrefs (at any static offset into
their buffers: one part of a split) become calls to
the BLAS `sgemm_`/`dgemm_` (Fortran ABI) that PyTorch's CPU library already
carries (the runtime makes its symbols visible to the JIT). bf16/f16 ones call
PyTorch's `baddbmm` through its C shim (`torch_calls`): oneDNN's kernels, which
accumulate in f32 as eager's matmul does (linalg's loops accumulate in bf16: a
64 x 64 x 64 product 9x further from the exact one than eager's, and as scalar loops). Loops remain for everything else (integers, strided operands).

Transposes cost no copy: an operand that is a `linalg.transpose` of a buffer
(read by nothing but that matmul afterwards) is read in place through BLAS's
transpose flag, and
a matmul result used only by a transpose into another buffer is computed
transposed directly, as (A B)^T = B^T A^T. A linear layer's `x @ W^T` and its
weight gradient `(dY^T X)` then move no extra memory.

Row-major C[m,n] = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so the
call is gemm(tb, ta, n, m, k, 1, B, ldb, A, lda, beta, C, n); beta = 1 keeps
linalg's accumulate-into-outs semantics. beta = 0 writes a transposed result
into a buffer that was never initialised, and overwrites an output that was
only zeroed for the matmul to accumulate into: the zero fill (or the copy of a
zero-filled buffer, when CSE shared one fill among matmuls) goes.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir
from mlir.dialects import arith, func, memref

from ...common.memrefs import (contiguous_memref, erase_buffer, erase_init,
                               first_in_block, last_in_block, overwrites, row_major_offset,
                               touching_ops, untouched_between, zero_init)

from .torch_calls import DTYPE, add_helpers

_GEMM = {"f32": "sgemm_", "f64": "dgemm_"}
_TORCH_GEMM = "__fusegrad_gemm_torch"  # 16-bit floats
_HELPER = "__fusegrad_gemm_{dtype}"

# batch, m, n, k, lda, ldb are i32 (BLAS LP64), ta/tb are 'N' or 'T'; pointers are to
# the first element; every batch's operands are contiguous and one matrix apart
_HELPER_TEXT = """
func.func private @{gemm}(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr,
    !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
func.func private @{helper}(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr, %batch: i32, %m: i32,
                            %n: i32, %k: i32, %ta: i8, %tb: i8, %lda: i32, %ldb: i32,
                            %beta: {t}) {{
  %one = llvm.mlir.constant(1 : i64) : i64
  %pm = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
  %pn = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
  %pk = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
  %plda = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
  %pldb = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
  %pta = llvm.alloca %one x i8 : (i64) -> !llvm.ptr
  %ptb = llvm.alloca %one x i8 : (i64) -> !llvm.ptr
  %ps = llvm.alloca %one x {t} : (i64) -> !llvm.ptr
  %pbeta = llvm.alloca %one x {t} : (i64) -> !llvm.ptr
  llvm.store %m, %pm : i32, !llvm.ptr
  llvm.store %n, %pn : i32, !llvm.ptr
  llvm.store %k, %pk : i32, !llvm.ptr
  llvm.store %lda, %plda : i32, !llvm.ptr
  llvm.store %ldb, %pldb : i32, !llvm.ptr
  llvm.store %ta, %pta : i8, !llvm.ptr
  llvm.store %tb, %ptb : i8, !llvm.ptr
  %s1 = llvm.mlir.constant(1.0 : {t}) : {t}
  llvm.store %s1, %ps : {t}, !llvm.ptr
  llvm.store %beta, %pbeta : {t}, !llvm.ptr
  %mk = arith.muli %m, %k : i32
  %kn = arith.muli %k, %n : i32
  %mn = arith.muli %m, %n : i32
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %batch step %c1 : i32 {{
    %oa = arith.muli %i, %mk : i32
    %ob = arith.muli %i, %kn : i32
    %oc = arith.muli %i, %mn : i32
    %ai = llvm.getelementptr %a[%oa] : (!llvm.ptr, i32) -> !llvm.ptr, {t}
    %bi = llvm.getelementptr %b[%ob] : (!llvm.ptr, i32) -> !llvm.ptr, {t}
    %ci = llvm.getelementptr %c[%oc] : (!llvm.ptr, i32) -> !llvm.ptr, {t}
    func.call @{gemm}(%ptb, %pta, %pn, %pm, %pk, %ps, %bi, %pldb, %ai, %plda, %pbeta, %ci, %pn)
        : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr,
           !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
  }}
  return
}}
"""


# C (batch x m x n) = A B + beta C by PyTorch's baddbmm over tensors viewing the buffers:
# A is batch x m x k, stored k x m per batch when ta; B is batch x k x n, stored n x k
# when tb (a transposed operand is a strided view, not a copy)
_TORCH_GEMM_TEXT = """
llvm.func @aoti_torch_cpu_baddbmm_out(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64,
                                      f64) -> i32

// the tensor (batch, rows, cols) over `data`, stored transposed per batch when `t`;
// returns the failure
llvm.func @__fusegrad_matrices(%data: !llvm.ptr, %batch: i64, %rows: i64, %cols: i64, %t: i1,
                               %dtype: i32, %slot: !llvm.ptr) -> i32 {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %c3 = llvm.mlir.constant(3 : i64) : i64
  %size = llvm.mul %rows, %cols : i64
  %s1 = llvm.select %t, %c1, %cols : i1, i64
  %s2 = llvm.select %t, %rows, %c1 : i1, i64
  %f = llvm.call @__fusegrad_blob_strided(%data, %c3, %batch, %rows, %cols, %c1, %size, %s1,
      %s2, %c1, %dtype, %slot) : (!llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i32,
      !llvm.ptr) -> i32
  llvm.return %f : i32
}

func.func private @__fusegrad_gemm_torch(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr,
    %batch: i64, %m: i64, %n: i64, %k: i64, %ta: i1, %tb: i1, %beta: f64, %dtype: i32) {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %false = llvm.mlir.constant(false) : i1
  %one = llvm.mlir.constant(1.0 : f64) : f64
  %sa = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %sb = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %sc = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %fa = llvm.call @__fusegrad_matrices(%a, %batch, %m, %k, %ta, %dtype, %sa)
      : (!llvm.ptr, i64, i64, i64, i1, i32, !llvm.ptr) -> i32
  %fb = llvm.call @__fusegrad_matrices(%b, %batch, %k, %n, %tb, %dtype, %sb)
      : (!llvm.ptr, i64, i64, i64, i1, i32, !llvm.ptr) -> i32
  %fc = llvm.call @__fusegrad_matrices(%c, %batch, %m, %n, %false, %dtype, %sc)
      : (!llvm.ptr, i64, i64, i64, i1, i32, !llvm.ptr) -> i32
  %fab = llvm.call @__fusegrad_either(%fa, %fb) : (i32, i32) -> i32
  %wrapped = llvm.call @__fusegrad_either(%fab, %fc) : (i32, i32) -> i32
  %ha = llvm.load %sa : !llvm.ptr -> !llvm.ptr
  %hb = llvm.load %sb : !llvm.ptr -> !llvm.ptr
  %hc = llvm.load %sc : !llvm.ptr -> !llvm.ptr
  %ok = llvm.icmp "eq" %wrapped, %z32 : i32
  %computed = scf.if %ok -> (i32) {
    %e = llvm.call @aoti_torch_cpu_baddbmm_out(%hc, %hc, %ha, %hb, %beta, %one)
        : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64, f64) -> i32
    %fk = llvm.call @__fusegrad_check_aoti_torch_cpu_baddbmm_out(%z32, %e) : (i32, i32) -> i32
    scf.yield %fk : i32
  } else {
    scf.yield %wrapped : i32
  }
  %da = llvm.call @__fusegrad_delete(%sa) : (!llvm.ptr) -> i32
  %db = llvm.call @__fusegrad_delete(%sb) : (!llvm.ptr) -> i32
  %dc = llvm.call @__fusegrad_delete(%sc) : (!llvm.ptr) -> i32
  %g1 = llvm.call @__fusegrad_either(%computed, %da) : (i32, i32) -> i32
  %g2 = llvm.call @__fusegrad_either(%g1, %db) : (i32, i32) -> i32
  %failure = llvm.call @__fusegrad_either(%g2, %dc) : (i32, i32) -> i32
  %site = arith.constant SITE<a compiled 16-bit matmul> : i32
  func.call @__fusegrad_library_failed(%failure, %site) : (i32, i32) -> ()
  return
}
"""


def _row_major(t: ir.Type) -> int | None:
    """The static offset of a row-major memref: `row_major_offset`, and 0 for a
    dynamically shaped one of the identity layout (a whole buffer of run-time sizes);
    None for one of strided layout (a third of a QKV projection of run-time sizes)."""
    if isinstance(t, ir.MemRefType) and not t.has_static_shape:
        if not isinstance(t.layout, ir.AffineMapAttr):
            return None
        return 0 if t.layout.value == ir.AffineMap.get_identity(t.rank) else None
    return row_major_offset(t)


# a size of a gemm: static, or dim `k` of a memref, read where the call is made
Size = int | tuple[ir.Value, int]


def _pointer(v: ir.Value) -> ir.Value:
    """The address of `v`'s first element (its buffer's, plus its static offset)."""
    index = memref.ExtractAlignedPointerAsIndexOp(v).result
    offset = _row_major(v.type) or 0
    if offset:
        size = ir.MemRefType(v.type).element_type.width // 8
        index = arith.AddIOp(index, arith.ConstantOp(ir.IndexType.get(), offset * size)).result
    as_int = arith.IndexCastOp(ir.IntegerType.get_signless(64), index).result
    return ir.Operation.create("llvm.inttoptr", results=[ir.Type.parse("!llvm.ptr")],
                               operands=[as_int]).result


def _index(value: Size) -> ir.Value:
    if isinstance(value, int):
        return arith.ConstantOp(ir.IndexType.get(), value).result
    buf, k = value
    return memref.DimOp(buf, arith.ConstantOp(ir.IndexType.get(), k).result).result


def _i32(value: Size) -> ir.Value:
    if isinstance(value, int):
        return arith.ConstantOp(ir.IntegerType.get_signless(32), value).result
    return arith.IndexCastOp(ir.IntegerType.get_signless(32), _index(value)).result


def _i64(value: Size) -> ir.Value:
    if isinstance(value, int):
        return arith.ConstantOp(ir.IntegerType.get_signless(64), value).result
    return arith.IndexCastOp(ir.IntegerType.get_signless(64), _index(value)).result


_DEFAULT_MAPS = {
    "linalg.matmul": "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                     "affine_map<(d0, d1, d2) -> (d0, d1)>]",
    "linalg.batch_matmul": "[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]",
}


def _gemm_dims(op: ir.Operation) -> tuple[Size, Size, Size, Size] | None:
    """(batch, m, n, k) if `op` is a matmul on contiguous float memrefs; a run-time size
    is (memref, dim). (BLAS takes i32 sizes: a product of run-time sizes at or above 2**31
    is out of its range, as a static one is refused here.)"""
    if op.name not in ("linalg.matmul", "linalg.batch_matmul") or len(op.operands) != 3:
        return None
    if "indexing_maps" in op.attributes and \
            str(op.attributes["indexing_maps"]) != _DEFAULT_MAPS[op.name]:
        return None  # transposed/broadcast variants: keep the loops
    types = [v.type for v in op.operands]
    # row-major blocks anywhere in their buffers (the value part of a split QKV projection)
    if not all(_row_major(t) is not None for t in types):
        return None
    dtypes = {str(t.element_type) for t in types}
    if len(dtypes) != 1 or dtypes.pop() not in (*_GEMM, "bf16", "f16"):
        return None
    (a, a_type), (b, b_type) = ((v, v.type) for v in op.operands[:2])

    def size(v: ir.Value, t: ir.MemRefType, k: int) -> Size:
        k %= t.rank
        return (v, k) if t.is_dynamic_dim(k) else t.shape[k]
    batch = size(a, a_type, 0) if op.name == "linalg.batch_matmul" else 1
    m, k, n = size(a, a_type, -2), size(a, a_type, -1), size(b, b_type, -1)
    dims = (batch, m, k, n)
    if all(isinstance(d, int) for d in dims) and \
            max(batch * m * k, batch * k * n, batch * m * n) >= 2 ** 31:
        return None
    return batch, m, n, k


def _ensure_helper(module: ir.Operation, dtype: str, done: set[str]) -> str:
    """The name of the function that runs a `dtype` gemm, added to `module` once."""
    if dtype not in _GEMM:
        if _TORCH_GEMM not in done:
            add_helpers(module, _TORCH_GEMM_TEXT)
            done.add(_TORCH_GEMM)
        return _TORCH_GEMM
    helper = _HELPER.format(dtype=dtype)
    if dtype not in done:
        text = _HELPER_TEXT.format(gemm=_GEMM[dtype], helper=helper, t=dtype)
        parsed = ir.Module.parse(text)
        body = module.regions[0].blocks[0]
        for op in list(parsed.body.operations):
            body.append(op.operation.clone())
        done.add(dtype)
    return helper


def _copies(op: ir.Operation) -> bool:
    """Is `op` a linalg.transpose, or a generic whose body yields its input (else the
    gemm reads an `_untransposed` copy of what it computes)?"""
    if op.name == "linalg.transpose":
        return True
    body = op.regions[0].blocks[0]
    ops = list(body.operations)
    return len(ops) == 1 and ops[0].operation.operands[0] == body.arguments[0]


def _elementwise(op: ir.Operation) -> bool:
    """Is `op` a generic of one input and one output whose body computes from the input
    element alone (a cast: `w.t()` of an f32 weight under bf16 autocast)?"""
    if op.name != "linalg.generic" or len(op.operands) != 2:
        return False
    body = op.regions[0].blocks[0]
    for o in body.operations:
        o = o.operation
        if o.regions or o.name == "linalg.index" or any(
                isinstance(v.owner, ir.Block) and v != body.arguments[0] for v in o.operands):
            return False
    return True


def _swaps_last_two(op: ir.Operation) -> bool:
    """Is `op` (a linalg.transpose, or an `_elementwise` generic, a copy or a cast,
    through a permuted read) a swap of the last two dims? The read may first pick index 0
    of leading dims (a reshape folded in: `b[1].t()` reads the 1 x n x k slice at (0, j,
    i)), which leaves the matrix where a row-major one starts."""
    if op.name == "linalg.transpose":
        perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
    elif not _elementwise(op):
        return False
    else:
        read, write = (ir.AffineMapAttr(a).value for a in op.opview.indexing_maps)
        if write != ir.AffineMap.get_identity(write.n_dims):
            return False
        results = list(read.results)
        while len(results) > write.n_dims and isinstance(results[0], ir.AffineConstantExpr) \
                and ir.AffineConstantExpr(results[0]).value == 0:
            results.pop(0)
        if not all(isinstance(e, ir.AffineDimExpr) for e in results) or \
                sorted(ir.AffineDimExpr(e).position for e in results) != \
                list(range(write.n_dims)):
            return False
        perm = [ir.AffineDimExpr(e).position for e in results]
    n = len(perm)
    return n >= 2 and perm == list(range(n - 2)) + [n - 1, n - 2]


def _only_users(buf: ir.Value, allowed: set) -> bool:
    return all(u.owner.operation in allowed or u.owner.operation.name == "memref.dealloc"
               for u in buf.uses)


def _transposed_source(buf: ir.Value, matmul: ir.Operation) -> ir.Operation | None:
    """The `linalg.transpose` (or permuting copy) that fills `buf` for `matmul` to read:
    after it, nothing but `matmul` touches `buf` (before it, bufferization may have used
    the same buffer for values that are dead by then: the transpose overwrites all of
    it). `buf` is an alloc, or an out-param that bufferization lent as scratch (HF
    BERT's transposed FFN weights went to a later result's buffer): a later op must then
    overwrite it, as its value leaves the function."""
    out_param = isinstance(buf.owner, ir.Block) and \
        buf.owner.owner.operation.name == "func.func"
    if not out_param and (isinstance(buf.owner, ir.Block) or
                          buf.owner.operation.name != "memref.alloc"):
        return None
    writers = [u.owner.operation for u in buf.uses
               if u.owner.operation.name in ("linalg.transpose", "linalg.generic")
               and u.owner.operation.operands[-1] == buf
               and u.owner.operation.block == matmul.block
               and u.owner.operation.is_before_in_block(matmul)]
    if not writers:
        return None
    writer = last_in_block(writers)
    if not _swaps_last_two(writer):
        return None
    source = writer.operands[0]
    # a row-major block anywhere in its buffer (a slice's transpose, `w[i].t()`) is read
    # at its offset (`_pointer`)
    if _row_major(source.type) is None or \
            not untouched_between(source, writer, matmul):
        return None
    touching = touching_ops(buf, matmul.block)
    if touching is None:
        return None
    late = [op for op in touching[0] if op not in (writer, matmul)
            and not op.is_before_in_block(writer)]
    if late and (first_in_block(late).is_before_in_block(matmul) or
                 not overwrites(first_in_block(late), buf)):
        return None
    return writer if late or not out_param else None


def _untransposed(writer: ir.Operation) -> ir.Value:
    """A new buffer in the layout of `writer`'s input, filled by `writer`'s elementwise
    body without the transpose, where `writer` ran: the gemm reads it through its
    transpose flag, as eager's reads the cast weight of an autocast linear layer (a
    contiguous transposed copy sums in another order in PyTorch's f16 gemm)."""
    source = writer.operands[0]
    shape = list(ir.MemRefType(source.type).shape)
    element = ir.MemRefType(writer.operands[1].type).element_type
    with ir.InsertionPoint(writer), writer.location:
        buf = memref.AllocOp(ir.MemRefType.get(shape, element), [], []).result
        clone = writer.clone()
    identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(len(shape)))
    clone.attributes["indexing_maps"] = ir.ArrayAttr.get([identity, identity])
    clone.attributes["iterator_types"] = ir.ArrayAttr.get(
        [ir.Attribute.parse("#linalg.iterator_type<parallel>")] * len(shape))
    clone.operands[1] = buf
    return buf


def _transposed_result(matmul: ir.Operation) -> tuple[ir.Operation, ir.Operation] | None:
    """(fill, transpose) when the matmul's zero-filled alloc is only transposed into another
    buffer: the matmul can write that buffer directly, transposed."""
    out = matmul.operands[2]
    if isinstance(out.owner, ir.Block) or out.owner.operation.name != "memref.alloc":
        return None
    users = [u.owner.operation for u in out.uses]
    fills = [u for u in users if u.name == "linalg.fill"]
    moves = [u for u in users if u.name == "linalg.transpose" and u.operands[0] == out]
    if len(fills) != 1 or len(moves) != 1 or not _swaps_last_two(moves[0]):
        return None
    zero = fills[0].operands[0].owner
    if isinstance(zero, ir.Block) or zero.operation.name != "arith.constant" or \
            ir.FloatAttr(zero.operation.attributes["value"]).value != 0.0:
        return None
    dest = moves[0].operands[1]
    if not contiguous_memref(dest.type) or not untouched_between(dest, matmul, moves[0]):
        return None
    return (fills[0], moves[0]) if _only_users(out, {fills[0], moves[0], matmul}) else None


@dataclass(frozen=True)
class _Gemm:
    """C (batch x m x n) = op(A) op(B) + beta C; op transposes A (B) where ta (tb)."""

    dtype: str
    a: ir.Value
    b: ir.Value
    c: ir.Value
    batch: Size
    m: Size
    n: Size
    k: Size
    ta: bool
    tb: bool
    beta: float

    def blas_args(self) -> list[ir.Value]:
        """The f32/f64 helper's: pointers, i32 sizes, 'N'/'T' flags, leading dims, beta."""
        flags = [arith.ConstantOp(ir.IntegerType.get_signless(8), ord("T" if t else "N")).result
                 for t in (self.ta, self.tb)]
        ftype = ir.F32Type.get() if self.dtype == "f32" else ir.F64Type.get()
        return [_pointer(self.a), _pointer(self.b), _pointer(self.c), _i32(self.batch),
                _i32(self.m), _i32(self.n), _i32(self.k), *flags,
                _i32(self.m if self.ta else self.k), _i32(self.k if self.tb else self.n),
                arith.ConstantOp(ftype, self.beta).result]

    def torch_args(self) -> list[ir.Value]:
        """`@__fusegrad_gemm_torch`'s: pointers, i64 sizes, i1 flags, beta, dtype code."""
        i1, i32, i64 = (ir.IntegerType.get_signless(w) for w in (1, 32, 64))
        return [_pointer(self.a), _pointer(self.b), _pointer(self.c),
                *(_i64(v) for v in (self.batch, self.m, self.n, self.k)),
                *(arith.ConstantOp(i1, int(t)).result for t in (self.ta, self.tb)),
                arith.ConstantOp(ir.F64Type.get(), self.beta).result,
                arith.ConstantOp(i32, DTYPE[self.dtype]).result]


def _lower(op: ir.Operation, module: ir.Operation, done: set[str]) -> None:
    batch, m, n, k = _gemm_dims(op)
    dtype = str(op.operands[0].type.element_type)
    a, b, c = op.operands
    # (value, transposed?) per operand; a transposed operand is read from its source
    ops: list = []
    freed: list = []  # buffers of operands computed untransposed, freed after the call
    for v in (a, b):
        t = _transposed_source(v, op)
        if t is not None and not _copies(t) and not t.operands[0].type.has_static_shape:
            t = None  # (no run-time sized copy: the transposed buffer is read as it is)
        if t is not None and not _copies(t):
            freed.append(_untransposed(t))
            ops.append((freed[-1], True, t))
        else:
            ops.append((t.operands[0], True, t) if t is not None else (v, False, None))
    (a, ta, move_a), (b, tb, move_b) = ops
    beta = 1.0
    result = _transposed_result(op)
    init = zero_init(op, op.operands[2]) if result is None else None
    if init is not None:  # the call overwrites C instead of accumulating into zeros
        erase_init(init)
        beta = 0.0
    if result is not None:  # D = (op(A) op(B))^T = op(B)^T op(A)^T
        fill, move = result
        c = move.operands[1]
        (a, ta), (b, tb) = (b, not tb), (a, not ta)
        m, n = n, m
        beta = 0.0
    gemm = _Gemm(dtype, a, b, c, batch, m, n, k, ta, tb, beta)
    with ir.InsertionPoint(op), op.location:
        func.CallOp([], ir.FlatSymbolRefAttr.get(_ensure_helper(module, dtype, done)),
                    gemm.blas_args() if dtype in _GEMM else gemm.torch_args())
        for buf in freed:
            memref.DeallocOp(buf)
    temp = op.operands[2] if result is not None else None
    op.erase()
    for move in (move_a, move_b):
        if move is not None:
            buf = move.operands[1]
            move.erase()
            # else its earlier values are still computed (or it is an out-param)
            if not isinstance(buf.owner, ir.Block) and _only_users(buf, set()):
                erase_buffer(buf)
    if result is not None:
        result[1].erase()
        result[0].erase()
        erase_buffer(temp)


def matmul_to_blas(module: ir.Operation) -> None:
    matmuls: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _gemm_dims(op) is not None:
            matmuls.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    done: set[str] = set()
    for op in matmuls:
        _lower(op, module, done)

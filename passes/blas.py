"""dg-matmul-to-blas: library-call contractions on the CPU.

Contractions stay library-like kernels: after bufferization, f32/f64
`linalg.matmul` / `linalg.batch_matmul` on contiguous memrefs become calls to
the BLAS `sgemm_`/`dgemm_` (Fortran ABI) that PyTorch's CPU library already
carries (the runtime makes its symbols visible to the JIT). Loops remain for
everything else (other dtypes, strided operands).

Row-major C[m,n] += A[m,k] B[k,n] is column-major C^T = B^T A^T, so the call
is gemm('N', 'N', n, m, k, 1, B, n, A, k, 1, C, n); beta = 1 keeps linalg's
accumulate-into-outs semantics.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref

from .registry import register_pass

_GEMM = {"f32": "sgemm_", "f64": "dgemm_"}
_HELPER = "__fusegrad_gemm_{dtype}"

# batch, m, n, k are i32 (BLAS LP64); pointers are to the first element
_HELPER_TEXT = """
func.func private @{gemm}(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr,
    !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
func.func private @{helper}(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr, %batch: i32, %m: i32,
                            %n: i32, %k: i32) {{
  %one = llvm.mlir.constant(1 : i64) : i64
  %pm = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
  %pn = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
  %pk = llvm.alloca %one x i32 : (i64) -> !llvm.ptr
  %pt = llvm.alloca %one x i8 : (i64) -> !llvm.ptr
  %ps = llvm.alloca %one x {t} : (i64) -> !llvm.ptr
  llvm.store %m, %pm : i32, !llvm.ptr
  llvm.store %n, %pn : i32, !llvm.ptr
  llvm.store %k, %pk : i32, !llvm.ptr
  %no = llvm.mlir.constant(78 : i8) : i8
  llvm.store %no, %pt : i8, !llvm.ptr
  %s1 = llvm.mlir.constant(1.0 : {t}) : {t}
  llvm.store %s1, %ps : {t}, !llvm.ptr
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
    func.call @{gemm}(%pt, %pt, %pn, %pm, %pk, %ps, %bi, %pn, %ai, %pk, %ps, %ci, %pn)
        : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr,
           !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
  }}
  return
}}
"""


def _contiguous(t: ir.Type) -> bool:
    if not isinstance(t, ir.MemRefType) or not t.has_static_shape:
        return False
    strides, offset = t.get_strides_and_offset()
    expected, acc = [], 1
    for size in reversed(t.shape):
        expected.insert(0, acc)
        acc *= size
    return offset == 0 and (list(strides) == expected or t.rank == 0)


def _pointer(v: ir.Value) -> ir.Value:
    index = memref.ExtractAlignedPointerAsIndexOp(v).result
    as_int = arith.IndexCastOp(ir.IntegerType.get_signless(64), index).result
    return ir.Operation.create("llvm.inttoptr", results=[ir.Type.parse("!llvm.ptr")],
                               operands=[as_int]).result


def _i32(value: int) -> ir.Value:
    return arith.ConstantOp(ir.IntegerType.get_signless(32), value).result


def _gemm_dims(op: ir.Operation) -> tuple[int, int, int, int] | None:
    """(batch, m, n, k) if `op` is a matmul on contiguous f32/f64 memrefs."""
    if op.name not in ("linalg.matmul", "linalg.batch_matmul") or len(op.operands) != 3:
        return None
    if "indexing_maps" in op.attributes:  # transposed/broadcast variants: keep the loops
        return None
    types = [v.type for v in op.operands]
    if not all(_contiguous(t) for t in types):
        return None
    dtypes = {str(t.element_type) for t in types}
    if len(dtypes) != 1 or dtypes.pop() not in _GEMM:
        return None
    a, b, _ = (t.shape for t in types)
    batch = a[0] if op.name == "linalg.batch_matmul" else 1
    m, k, n = a[-2], a[-1], b[-1]
    if max(batch * m * k, batch * k * n, batch * m * n) >= 2 ** 31:
        return None
    return batch, m, n, k


def _ensure_helper(module: ir.Operation, dtype: str, done: set[str]) -> str:
    helper = _HELPER.format(dtype=dtype)
    if dtype not in done:
        text = _HELPER_TEXT.format(gemm=_GEMM[dtype], helper=helper, t=dtype)
        parsed = ir.Module.parse(text)
        body = module.regions[0].blocks[0]
        for op in list(parsed.body.operations):
            body.append(op.operation.clone())
        done.add(dtype)
    return helper


@register_pass("dg-matmul-to-blas",
               "f32/f64 linalg.matmul/batch_matmul on contiguous memrefs -> BLAS gemm calls")
def matmul_to_blas(module: ir.Operation) -> None:
    matmuls: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _gemm_dims(op) is not None:
            matmuls.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    done: set[str] = set()
    for op in matmuls:
        batch, m, n, k = _gemm_dims(op)
        dtype = str(op.operands[0].type.element_type)
        helper = _ensure_helper(module, dtype, done)
        with ir.InsertionPoint(op), op.location:
            ptrs = [_pointer(v) for v in op.operands]
            func.CallOp([], ir.FlatSymbolRefAttr.get(helper),
                        [*ptrs, _i32(batch), _i32(m), _i32(n), _i32(k)])
        op.erase()

"""dg-outline-attention, dg-attention-to-torch: dg.attention on the CPU runs PyTorch's flash kernels.

dg.attention and dg.attention_grad (dialects/attention.py) lower to their
decomposition, matmuls and a softmax over a materialized [B, H, L, S] score
matrix. PyTorch's CPU flash kernels (`_scaled_dot_product_flash_attention_for_cpu`
and its backward, what eager runs) work on blocks of it in cache. Two passes do
that (targets without such a kernel decompose the ops before fusion instead:
dg-decompose-attention):

- dg-outline-attention (on dg, before dg-lower-to-linalg): each f32/f64 op
  becomes a call of a private function tagged `dg.attention_call` (codegen/common/outline.py,
  which the CUDA target runs too); one of symbolic sizes writes its results into
  destinations its caller passes.
- dg-attention-to-torch (on memrefs) replaces the body of each tagged function whose
  arguments are dense memrefs (of any sizes: those of run-time size are read from the
  buffers) by a call of the kernel through PyTorch's C shim
  (`aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu[_backward]`); the
  results are copied into the out-params.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref

from .matmul_to_blas import _pointer
from ...common.memrefs import dense_memref
from ...common.outline import ATTENTION_CALL as OUTLINED

from .torch_calls import DTYPE, add_helpers

HELPER = "__fusegrad_attention"
BACKWARD_HELPER = "__fusegrad_attention_backward"

# q, k, v, mask, out, logsumexp: data pointers; dims b, h, l, s, e; mask dims (each 1
# or the full size); scale; causal; dtype code
_TEXT = """
llvm.func @aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(!llvm.ptr, !llvm.ptr,
    !llvm.ptr, f64, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
llvm.func @aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu_backward(!llvm.ptr,
    !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64, i32, !llvm.ptr, !llvm.ptr,
    !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

// tensors over q, k, v (slots %tq, %tk, %tv) and the mask (%tm); returns the failure
llvm.func @__fusegrad_attention_inputs(%q: !llvm.ptr, %k: !llvm.ptr, %v: !llvm.ptr,
    %mask: !llvm.ptr, %b: i64, %h: i64, %l: i64, %s: i64, %e: i64, %mb: i64, %mh: i64,
    %ml: i64, %ms: i64, %dtype: i32, %tq: !llvm.ptr, %tk: !llvm.ptr, %tv: !llvm.ptr,
    %tm: !llvm.ptr) -> i32 {
  %f1 = llvm.call @__fusegrad_blob(%q, %b, %h, %l, %e, %dtype, %tq) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f2 = llvm.call @__fusegrad_blob(%k, %b, %h, %s, %e, %dtype, %tk) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f3 = llvm.call @__fusegrad_blob(%v, %b, %h, %s, %e, %dtype, %tv) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f4 = llvm.call @__fusegrad_blob(%mask, %mb, %mh, %ml, %ms, %dtype, %tm) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f12 = llvm.call @__fusegrad_either(%f1, %f2) : (i32, i32) -> i32
  %f34 = llvm.call @__fusegrad_either(%f3, %f4) : (i32, i32) -> i32
  %f = llvm.call @__fusegrad_either(%f12, %f34) : (i32, i32) -> i32
  llvm.return %f : i32
}

// with `computed` 0 (the kernel succeeded), copies the tensor in slot %from into the one
// in %to; deletes both; returns the first failure, `computed`'s included
llvm.func @__fusegrad_copy_out(%to: !llvm.ptr, %from: !llvm.ptr, %computed: i32) -> i32 {
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %ok = llvm.icmp "eq" %computed, %z32 : i32
  llvm.cond_br %ok, ^copy, ^delete(%computed : i32)
^copy:
  %dst = llvm.load %to : !llvm.ptr -> !llvm.ptr
  %src = llvm.load %from : !llvm.ptr -> !llvm.ptr
  %e = llvm.call @aoti_torch_copy_(%dst, %src, %z32) : (!llvm.ptr, !llvm.ptr, i32) -> i32
  %f = llvm.call @__fusegrad_check_aoti_torch_copy_(%z32, %e) : (i32, i32) -> i32
  llvm.br ^delete(%f : i32)
^delete(%failure: i32):
  %d0 = llvm.call @__fusegrad_delete(%to) : (!llvm.ptr) -> i32
  %d1 = llvm.call @__fusegrad_delete(%from) : (!llvm.ptr) -> i32
  %f0 = llvm.call @__fusegrad_either(%failure, %d0) : (i32, i32) -> i32
  %f1 = llvm.call @__fusegrad_either(%f0, %d1) : (i32, i32) -> i32
  llvm.return %f1 : i32
}

func.func private @__fusegrad_attention(%q: !llvm.ptr, %k: !llvm.ptr, %v: !llvm.ptr,
    %mask: !llvm.ptr, %out: !llvm.ptr, %lse: !llvm.ptr, %b: i64, %h: i64, %l: i64, %s: i64,
    %e: i64, %mb: i64, %mh: i64, %ml: i64, %ms: i64, %scale: f64, %causal: i32, %dtype: i32) {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %zero = llvm.mlir.constant(0.0 : f64) : f64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %null = llvm.mlir.zero : !llvm.ptr
  %tq = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tk = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tv = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tm = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %to = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tl = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %r0 = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %r1 = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %pscale = llvm.alloca %c1 x f64 : (i64) -> !llvm.ptr
  llvm.store %null, %r0 : !llvm.ptr, !llvm.ptr
  llvm.store %null, %r1 : !llvm.ptr, !llvm.ptr
  %f1 = llvm.call @__fusegrad_attention_inputs(%q, %k, %v, %mask, %b, %h, %l, %s, %e, %mb, %mh,
      %ml, %ms, %dtype, %tq, %tk, %tv, %tm) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr,
      i64, i64, i64, i64, i64, i64, i64, i64, i64, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr,
      !llvm.ptr) -> i32
  %f2 = llvm.call @__fusegrad_blob(%out, %b, %h, %l, %e, %dtype, %to) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f3 = llvm.call @__fusegrad_blob3(%lse, %b, %h, %l, %dtype, %tl) : (!llvm.ptr, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f12 = llvm.call @__fusegrad_either(%f1, %f2) : (i32, i32) -> i32
  %wrapped = llvm.call @__fusegrad_either(%f12, %f3) : (i32, i32) -> i32
  llvm.store %scale, %pscale : f64, !llvm.ptr
  %vq = llvm.load %tq : !llvm.ptr -> !llvm.ptr
  %vk = llvm.load %tk : !llvm.ptr -> !llvm.ptr
  %vv = llvm.load %tv : !llvm.ptr -> !llvm.ptr
  %ok = llvm.icmp "eq" %wrapped, %z32 : i32
  %computed = scf.if %ok -> (i32) {
    %err = llvm.call @aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(%vq, %vk, %vv,
        %zero, %causal, %tm, %pscale, %r0, %r1) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, f64, i32,
        !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
    %fk = llvm.call @__fusegrad_check_aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(%z32, %err) : (i32, i32) -> i32
    scf.yield %fk : i32
  } else {
    scf.yield %wrapped : i32
  }
  %g1 = llvm.call @__fusegrad_copy_out(%to, %r0, %computed) : (!llvm.ptr, !llvm.ptr, i32) -> i32
  %g2 = llvm.call @__fusegrad_copy_out(%tl, %r1, %g1) : (!llvm.ptr, !llvm.ptr, i32) -> i32
  %d1 = llvm.call @__fusegrad_delete(%tq) : (!llvm.ptr) -> i32
  %d2 = llvm.call @__fusegrad_delete(%tk) : (!llvm.ptr) -> i32
  %d3 = llvm.call @__fusegrad_delete(%tv) : (!llvm.ptr) -> i32
  %d4 = llvm.call @__fusegrad_delete(%tm) : (!llvm.ptr) -> i32
  %h1 = llvm.call @__fusegrad_either(%g2, %d1) : (i32, i32) -> i32
  %h2 = llvm.call @__fusegrad_either(%h1, %d2) : (i32, i32) -> i32
  %h3 = llvm.call @__fusegrad_either(%h2, %d3) : (i32, i32) -> i32
  %failure = llvm.call @__fusegrad_either(%h3, %d4) : (i32, i32) -> i32
  %site = arith.constant SITE<a compiled attention> : i32
  func.call @__fusegrad_library_failed(%failure, %site) : (i32, i32) -> ()
  return
}

// grad, q, k, v, out, logsumexp, mask, then the gradients of q, k and v: data pointers;
// the rest as for @__fusegrad_attention
func.func private @__fusegrad_attention_backward(%g: !llvm.ptr, %q: !llvm.ptr, %k: !llvm.ptr,
    %v: !llvm.ptr, %out: !llvm.ptr, %lse: !llvm.ptr, %mask: !llvm.ptr, %dq: !llvm.ptr,
    %dk: !llvm.ptr, %dv: !llvm.ptr, %b: i64, %h: i64, %l: i64, %s: i64, %e: i64, %mb: i64,
    %mh: i64, %ml: i64, %ms: i64, %scale: f64, %causal: i32, %dtype: i32) {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %zero = llvm.mlir.constant(0.0 : f64) : f64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %null = llvm.mlir.zero : !llvm.ptr
  %tg = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tq = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tk = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tv = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tm = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %to = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tl = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tdq = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tdk = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tdv = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %r0 = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %r1 = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %r2 = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %pscale = llvm.alloca %c1 x f64 : (i64) -> !llvm.ptr
  llvm.store %null, %r0 : !llvm.ptr, !llvm.ptr
  llvm.store %null, %r1 : !llvm.ptr, !llvm.ptr
  llvm.store %null, %r2 : !llvm.ptr, !llvm.ptr
  %f1 = llvm.call @__fusegrad_attention_inputs(%q, %k, %v, %mask, %b, %h, %l, %s, %e, %mb, %mh,
      %ml, %ms, %dtype, %tq, %tk, %tv, %tm) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr,
      i64, i64, i64, i64, i64, i64, i64, i64, i64, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr,
      !llvm.ptr) -> i32
  %f2 = llvm.call @__fusegrad_blob(%g, %b, %h, %l, %e, %dtype, %tg) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f3 = llvm.call @__fusegrad_blob(%out, %b, %h, %l, %e, %dtype, %to) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f4 = llvm.call @__fusegrad_blob3(%lse, %b, %h, %l, %dtype, %tl) : (!llvm.ptr, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f5 = llvm.call @__fusegrad_blob(%dq, %b, %h, %l, %e, %dtype, %tdq) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f6 = llvm.call @__fusegrad_blob(%dk, %b, %h, %s, %e, %dtype, %tdk) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f7 = llvm.call @__fusegrad_blob(%dv, %b, %h, %s, %e, %dtype, %tdv) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f12 = llvm.call @__fusegrad_either(%f1, %f2) : (i32, i32) -> i32
  %f34 = llvm.call @__fusegrad_either(%f3, %f4) : (i32, i32) -> i32
  %f56 = llvm.call @__fusegrad_either(%f5, %f6) : (i32, i32) -> i32
  %f14 = llvm.call @__fusegrad_either(%f12, %f34) : (i32, i32) -> i32
  %f57 = llvm.call @__fusegrad_either(%f56, %f7) : (i32, i32) -> i32
  %wrapped = llvm.call @__fusegrad_either(%f14, %f57) : (i32, i32) -> i32
  llvm.store %scale, %pscale : f64, !llvm.ptr
  %vg = llvm.load %tg : !llvm.ptr -> !llvm.ptr
  %vq = llvm.load %tq : !llvm.ptr -> !llvm.ptr
  %vk = llvm.load %tk : !llvm.ptr -> !llvm.ptr
  %vv = llvm.load %tv : !llvm.ptr -> !llvm.ptr
  %vo = llvm.load %to : !llvm.ptr -> !llvm.ptr
  %vl = llvm.load %tl : !llvm.ptr -> !llvm.ptr
  %ok = llvm.icmp "eq" %wrapped, %z32 : i32
  %computed = scf.if %ok -> (i32) {
    %err = llvm.call @aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu_backward(%vg,
        %vq, %vk, %vv, %vo, %vl, %zero, %causal, %tm, %pscale, %r0, %r1, %r2) : (!llvm.ptr,
        !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64, i32, !llvm.ptr, !llvm.ptr,
        !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
    %fk = llvm.call @__fusegrad_check_aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu_backward(%z32, %err) : (i32, i32) -> i32
    scf.yield %fk : i32
  } else {
    scf.yield %wrapped : i32
  }
  %g1 = llvm.call @__fusegrad_copy_out(%tdq, %r0, %computed) : (!llvm.ptr, !llvm.ptr, i32) -> i32
  %g2 = llvm.call @__fusegrad_copy_out(%tdk, %r1, %g1) : (!llvm.ptr, !llvm.ptr, i32) -> i32
  %g3 = llvm.call @__fusegrad_copy_out(%tdv, %r2, %g2) : (!llvm.ptr, !llvm.ptr, i32) -> i32
  %d1 = llvm.call @__fusegrad_delete(%tg) : (!llvm.ptr) -> i32
  %d2 = llvm.call @__fusegrad_delete(%tq) : (!llvm.ptr) -> i32
  %d3 = llvm.call @__fusegrad_delete(%tk) : (!llvm.ptr) -> i32
  %d4 = llvm.call @__fusegrad_delete(%tv) : (!llvm.ptr) -> i32
  %d5 = llvm.call @__fusegrad_delete(%tm) : (!llvm.ptr) -> i32
  %d6 = llvm.call @__fusegrad_delete(%to) : (!llvm.ptr) -> i32
  %d7 = llvm.call @__fusegrad_delete(%tl) : (!llvm.ptr) -> i32
  %h1 = llvm.call @__fusegrad_either(%g3, %d1) : (i32, i32) -> i32
  %h2 = llvm.call @__fusegrad_either(%h1, %d2) : (i32, i32) -> i32
  %h3 = llvm.call @__fusegrad_either(%h2, %d3) : (i32, i32) -> i32
  %h4 = llvm.call @__fusegrad_either(%h3, %d4) : (i32, i32) -> i32
  %h5 = llvm.call @__fusegrad_either(%h4, %d5) : (i32, i32) -> i32
  %h6 = llvm.call @__fusegrad_either(%h5, %d6) : (i32, i32) -> i32
  %failure = llvm.call @__fusegrad_either(%h6, %d7) : (i32, i32) -> i32
  %site = arith.constant SITE<a compiled attention's gradient> : i32
  func.call @__fusegrad_library_failed(%failure, %site) : (i32, i32) -> ()
  return
}
"""


def _library_call(fn: ir.Operation) -> tuple[bool, list[ir.Value], dict] | None:
    """(backward?, memref arguments, tag) of an outlined function that can call the
    library, or None."""
    if fn.name != "func.func" or OUTLINED not in fn.attributes:
        return None
    blocks = list(fn.regions[0].blocks)
    if len(blocks) != 1:
        return None
    tag = ir.DictAttr(fn.attributes[OUTLINED])
    backward = ir.StringAttr(tag["op"]).value == "attention_grad"
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    args = list(blocks[0].arguments)
    if ftype.results or len(args) != (10 if backward else 6) or \
            not all(dense_memref(a.type) for a in args):
        return None
    if len({str(a.type.element_type) for a in args}) != 1:
        return None
    return backward, args, {"scale": ir.FloatAttr(tag["scale"]).value,
                            "causal": ir.IntegerAttr(tag["causal"]).value}


def _call_library(fn: ir.Operation, backward: bool, args: list[ir.Value], tag: dict) -> None:
    # forward: q, k, v, mask, out, lse; backward: g, q, k, v, out, lse, mask, dq, dk, dv
    q, k = (args[1], args[2]) if backward else (args[0], args[1])
    mask = args[6] if backward else args[3]
    dims = [(q, 0), (q, 1), (q, 2), (k, 2), (q, 3), *((mask, d) for d in range(4))]
    block = fn.regions[0].blocks[0]
    for op in reversed(list(block.operations)):
        op.erase()
    i64, i32 = ir.IntegerType.get_signless(64), ir.IntegerType.get_signless(32)

    def size(buffer: ir.Value, dim: int) -> ir.Value:
        """A dim of `buffer` as i64: a constant, or read from it at run time."""
        t = ir.MemRefType(buffer.type)
        if not t.is_dynamic_dim(dim):
            return arith.ConstantOp(i64, t.shape[dim]).result
        read = memref.DimOp(buffer, arith.ConstantOp(ir.IndexType.get(), dim).result).result
        return arith.IndexCastOp(i64, read).result

    with ir.InsertionPoint(block), fn.location:
        element = str(q.type.element_type)
        func.CallOp([], ir.FlatSymbolRefAttr.get(BACKWARD_HELPER if backward else HELPER),
                    [*(_pointer(a) for a in args), *(size(*d) for d in dims),
                     arith.ConstantOp(ir.F64Type.get(), tag["scale"]).result,
                     arith.ConstantOp(i32, int(tag["causal"])).result,
                     arith.ConstantOp(i32, DTYPE[element]).result])
        func.ReturnOp([])


def attention_to_torch(module: ir.Operation) -> None:
    calls = 0
    for fn in list(module.regions[0].blocks[0].operations):
        call = _library_call(fn.operation)
        if call is not None:
            _call_library(fn.operation, *call)
            calls += 1
    if calls:
        add_helpers(module, _TEXT)

"""dg-conv-to-torch: f32/f64 convolutions on the CPU run PyTorch's own kernel.

A convolution written as loops is far slower than PyTorch's (oneDNN) kernel,
and im2col plus BLAS measured slower still on small CNNs. So after
bufferization, `linalg.conv_2d_nchw_fchw` (groups = 1) and
`linalg.conv_2d_ngchw_gfchw` on contiguous memrefs whose output was just
zero-filled call `aoti_torch_cpu_convolution`, the C entry point of
`at::convolution` that PyTorch's CPU library exports for AOTInductor. The
operands are wrapped as tensors without copies (`aoti_torch_create_tensor_from_blob`)
and the result is copied into the output buffer. dg's convolution gradients
are themselves convolutions, so this covers the backward too. Padding was
already materialized by the lowering, so the call passes padding 0.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func

from .blas import _pointer
from .memrefs import contiguous_memref
from .registry import register_pass

HELPER = "__fusegrad_conv2d"
# c10::ScalarType codes
_DTYPE = {"f32": 6, "f64": 7}

# x, w, y: data pointers; then x dims (n, c, h, w), weight dims (f, c/g, kh, kw), output
# dims (n, f, oh, ow), stride (2), dilation (2), groups; dtype code
_HELPER_TEXT = """
llvm.func @aoti_torch_create_tensor_from_blob(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, i32,
                                              i32, i32, !llvm.ptr) -> i32
llvm.func @aoti_torch_cpu_convolution(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr,
                                      i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, i64,
                                      !llvm.ptr) -> i32
llvm.func @aoti_torch_copy_(!llvm.ptr, !llvm.ptr, i32) -> i32
llvm.func @aoti_torch_delete_tensor_object(!llvm.ptr) -> i32

llvm.func @__fusegrad_blob(%data: !llvm.ptr, %d0: i64, %d1: i64, %d2: i64, %d3: i64,
                           %dtype: i32, %slot: !llvm.ptr) {
  %c4 = llvm.mlir.constant(4 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %sizes = llvm.alloca %c4 x i64 : (i64) -> !llvm.ptr
  %strides = llvm.alloca %c4 x i64 : (i64) -> !llvm.ptr
  %s1 = llvm.getelementptr %sizes[1] : (!llvm.ptr) -> !llvm.ptr, i64
  %s2 = llvm.getelementptr %sizes[2] : (!llvm.ptr) -> !llvm.ptr, i64
  %s3 = llvm.getelementptr %sizes[3] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %d0, %sizes : i64, !llvm.ptr
  llvm.store %d1, %s1 : i64, !llvm.ptr
  llvm.store %d2, %s2 : i64, !llvm.ptr
  llvm.store %d3, %s3 : i64, !llvm.ptr
  %t2 = llvm.mul %d3, %c1 : i64
  %t1 = llvm.mul %d2, %t2 : i64
  %t0 = llvm.mul %d1, %t1 : i64
  %r1 = llvm.getelementptr %strides[1] : (!llvm.ptr) -> !llvm.ptr, i64
  %r2 = llvm.getelementptr %strides[2] : (!llvm.ptr) -> !llvm.ptr, i64
  %r3 = llvm.getelementptr %strides[3] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %t0, %strides : i64, !llvm.ptr
  llvm.store %t1, %r1 : i64, !llvm.ptr
  llvm.store %t2, %r2 : i64, !llvm.ptr
  llvm.store %c1, %r3 : i64, !llvm.ptr
  %e = llvm.call @aoti_torch_create_tensor_from_blob(%data, %c4, %sizes, %strides, %c0, %dtype,
      %z32, %z32, %slot) : (!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, i32, i32, i32,
      !llvm.ptr) -> i32
  llvm.return
}

func.func private @__fusegrad_conv2d(%x: !llvm.ptr, %w: !llvm.ptr, %y: !llvm.ptr,
    %n: i64, %c: i64, %h: i64, %wd: i64, %f: i64, %cg: i64, %kh: i64, %kw: i64,
    %on: i64, %of: i64, %oh: i64, %ow: i64,
    %sh: i64, %sw: i64, %dh: i64, %dw: i64, %groups: i64, %dtype: i32) {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %c2 = llvm.mlir.constant(2 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %tx = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tw = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %ty = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tr = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  llvm.call @__fusegrad_blob(%x, %n, %c, %h, %wd, %dtype, %tx) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> ()
  llvm.call @__fusegrad_blob(%w, %f, %cg, %kh, %kw, %dtype, %tw) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> ()
  llvm.call @__fusegrad_blob(%y, %on, %of, %oh, %ow, %dtype, %ty) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> ()
  %stride = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %dil = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %zeros = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %stride1 = llvm.getelementptr %stride[1] : (!llvm.ptr) -> !llvm.ptr, i64
  %dil1 = llvm.getelementptr %dil[1] : (!llvm.ptr) -> !llvm.ptr, i64
  %zeros1 = llvm.getelementptr %zeros[1] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %sh, %stride : i64, !llvm.ptr
  llvm.store %sw, %stride1 : i64, !llvm.ptr
  llvm.store %dh, %dil : i64, !llvm.ptr
  llvm.store %dw, %dil1 : i64, !llvm.ptr
  llvm.store %c0, %zeros : i64, !llvm.ptr
  llvm.store %c0, %zeros1 : i64, !llvm.ptr
  %vx = llvm.load %tx : !llvm.ptr -> !llvm.ptr
  %vw = llvm.load %tw : !llvm.ptr -> !llvm.ptr
  %vy = llvm.load %ty : !llvm.ptr -> !llvm.ptr
  %nobias = llvm.mlir.zero : !llvm.ptr
  %e = llvm.call @aoti_torch_cpu_convolution(%vx, %vw, %nobias, %stride, %c2, %zeros, %c2,
      %dil, %c2, %z32, %zeros, %c2, %groups, %tr) : (!llvm.ptr, !llvm.ptr, !llvm.ptr,
      !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, i64, !llvm.ptr) -> i32
  %vr = llvm.load %tr : !llvm.ptr -> !llvm.ptr
  %e2 = llvm.call @aoti_torch_copy_(%vy, %vr, %z32) : (!llvm.ptr, !llvm.ptr, i32) -> i32
  %d0 = llvm.call @aoti_torch_delete_tensor_object(%vr) : (!llvm.ptr) -> i32
  %d1 = llvm.call @aoti_torch_delete_tensor_object(%vx) : (!llvm.ptr) -> i32
  %d2 = llvm.call @aoti_torch_delete_tensor_object(%vw) : (!llvm.ptr) -> i32
  %d3 = llvm.call @aoti_torch_delete_tensor_object(%vy) : (!llvm.ptr) -> i32
  return
}
"""


def _zero_filled_before(op: ir.Operation, buf: ir.Value) -> bool:
    """Is `buf` filled with zeros by the op right before `op` (the lowering's init)?"""
    for use in buf.uses:
        user = use.owner.operation
        if user.name != "linalg.fill" or user.operands[1] != buf:
            continue
        value = user.operands[0].owner
        if isinstance(value, ir.Block) or value.operation.name != "arith.constant":
            continue
        attr = value.operation.attributes["value"]
        if isinstance(attr, ir.FloatAttr) and ir.FloatAttr(attr).value == 0.0:
            return True
    return False


def _conv_call(op: ir.Operation) -> list[int] | None:
    """Shapes and attributes of a library-callable conv, or None."""
    if op.name not in ("linalg.conv_2d_nchw_fchw", "linalg.conv_2d_ngchw_gfchw"):
        return None
    x, w, y = op.operands
    types = [v.type for v in (x, w, y)]
    if not all(contiguous_memref(t) for t in types):
        return None
    dtypes = {str(t.element_type) for t in types}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _DTYPE:
        return None
    if not _zero_filled_before(op, y):
        return None
    strides = list(ir.DenseIntElementsAttr(op.attributes["strides"]))
    dilations = list(ir.DenseIntElementsAttr(op.attributes["dilations"]))
    xs, ws, ys = (list(t.shape) for t in types)
    if op.name == "linalg.conv_2d_nchw_fchw":
        return [*xs, *ws, *ys, *strides, *dilations, 1]
    n, g, cg, h, wd = xs
    gw, fg, cgw, kh, kw = ws
    yn, yg, yf, oh, ow = ys
    return [n, g * cg, h, wd, g * fg, cgw, kh, kw, yn, yg * yf, oh, ow, *strides, *dilations, g]


@register_pass("dg-conv-to-torch",
               "f32/f64 linalg convolutions on contiguous memrefs -> PyTorch's CPU convolution "
               "(aoti_torch_cpu_convolution)")
def conv_to_torch(module: ir.Operation) -> None:
    convs: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _conv_call(op) is not None:
            convs.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    if not convs:
        return
    body = module.regions[0].blocks[0]
    existing = {ir.StringAttr(o.operation.attributes["sym_name"]).value
                for o in body.operations if "sym_name" in o.operation.attributes}
    if HELPER not in existing:
        for o in ir.Module.parse(_HELPER_TEXT).body.operations:
            body.append(o.operation.clone())
    i64 = ir.IntegerType.get_signless(64)
    i32 = ir.IntegerType.get_signless(32)
    for op in convs:
        dims = _conv_call(op)
        dtype = _DTYPE[str(op.operands[0].type.element_type)]
        with ir.InsertionPoint(op), op.location:
            ptrs = [_pointer(v) for v in op.operands]
            scalars = [arith.ConstantOp(i64, d).result for d in dims]
            func.CallOp([], ir.FlatSymbolRefAttr.get(HELPER),
                        [*ptrs, *scalars, arith.ConstantOp(i32, dtype).result])
        op.erase()

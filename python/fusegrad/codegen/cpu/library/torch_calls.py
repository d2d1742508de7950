"""Shared pieces of the passes that call PyTorch's C shim from compiled code.

PyTorch's CPU library exports the `aoti_torch_*` C functions AOTInductor's code
calls: tensors are opaque handles made over our buffers without copies
(`aoti_torch_create_tensor_from_blob`), ops take and return handles, and a result
is copied into the buffer that needs it (`aoti_torch_copy_`). Used by
dg-conv-to-torch and dg-attention-to-torch.
"""
from __future__ import annotations

from mlir import ir

from ...common.outline import symbols

# c10::ScalarType codes of the dtypes the library calls take
DTYPE = {"f16": 5, "f32": 6, "f64": 7, "bf16": 15}

# the shim's tensor functions, and contiguous tensors viewing a buffer: 4-d
# (@__fusegrad_blob) and 3-d (@__fusegrad_blob3), the handle stored in `slot`
BLOB_TEXT = """
llvm.func @aoti_torch_create_tensor_from_blob(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, i32,
                                              i32, i32, !llvm.ptr) -> i32
llvm.func @aoti_torch_copy_(!llvm.ptr, !llvm.ptr, i32) -> i32
llvm.func @aoti_torch_delete_tensor_object(!llvm.ptr) -> i32

// two i64 into the array at `p`
llvm.func @__fusegrad_store2(%p: !llvm.ptr, %a: i64, %b: i64) {
  %p1 = llvm.getelementptr %p[1] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %a, %p : i64, !llvm.ptr
  llvm.store %b, %p1 : i64, !llvm.ptr
  llvm.return
}

// four i64 into the array at `p`
llvm.func @__fusegrad_store4(%p: !llvm.ptr, %a: i64, %b: i64, %c: i64, %d: i64) {
  %p1 = llvm.getelementptr %p[1] : (!llvm.ptr) -> !llvm.ptr, i64
  %p2 = llvm.getelementptr %p[2] : (!llvm.ptr) -> !llvm.ptr, i64
  %p3 = llvm.getelementptr %p[3] : (!llvm.ptr) -> !llvm.ptr, i64
  llvm.store %a, %p : i64, !llvm.ptr
  llvm.store %b, %p1 : i64, !llvm.ptr
  llvm.store %c, %p2 : i64, !llvm.ptr
  llvm.store %d, %p3 : i64, !llvm.ptr
  llvm.return
}

// the first `rank` dims of the tensor of sizes (d0, d1, d2, d3) and strides (s0, s1, s2,
// s3) viewing `data`
llvm.func @__fusegrad_blob_strided(%data: !llvm.ptr, %rank: i64, %d0: i64, %d1: i64,
                                   %d2: i64, %d3: i64, %s0: i64, %s1: i64, %s2: i64, %s3: i64,
                                   %dtype: i32, %slot: !llvm.ptr) {
  %c4 = llvm.mlir.constant(4 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %sizes = llvm.alloca %c4 x i64 : (i64) -> !llvm.ptr
  %strides = llvm.alloca %c4 x i64 : (i64) -> !llvm.ptr
  llvm.call @__fusegrad_store4(%sizes, %d0, %d1, %d2, %d3) : (!llvm.ptr, i64, i64, i64, i64) -> ()
  llvm.call @__fusegrad_store4(%strides, %s0, %s1, %s2, %s3) : (!llvm.ptr, i64, i64, i64, i64) -> ()
  %e = llvm.call @aoti_torch_create_tensor_from_blob(%data, %rank, %sizes, %strides, %c0,
      %dtype, %z32, %z32, %slot) : (!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, i32, i32, i32,
      !llvm.ptr) -> i32
  llvm.return
}

// the first `rank` dims of the contiguous (d0, d1, d2, d3) tensor viewing `data`
// (trailing dims of size 1 stand for absent ones)
llvm.func @__fusegrad_blob_rank(%data: !llvm.ptr, %rank: i64, %d0: i64, %d1: i64, %d2: i64,
                                %d3: i64, %dtype: i32, %slot: !llvm.ptr) {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %t1 = llvm.mul %d2, %d3 : i64
  %t0 = llvm.mul %d1, %t1 : i64
  llvm.call @__fusegrad_blob_strided(%data, %rank, %d0, %d1, %d2, %d3, %t0, %t1, %d3, %c1,
      %dtype, %slot) : (!llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i32,
      !llvm.ptr) -> ()
  llvm.return
}

llvm.func @__fusegrad_blob(%data: !llvm.ptr, %d0: i64, %d1: i64, %d2: i64, %d3: i64,
                           %dtype: i32, %slot: !llvm.ptr) {
  %c4 = llvm.mlir.constant(4 : i64) : i64
  llvm.call @__fusegrad_blob_rank(%data, %c4, %d0, %d1, %d2, %d3, %dtype, %slot) : (!llvm.ptr,
      i64, i64, i64, i64, i64, i32, !llvm.ptr) -> ()
  llvm.return
}

llvm.func @__fusegrad_blob3(%data: !llvm.ptr, %d0: i64, %d1: i64, %d2: i64, %dtype: i32,
                            %slot: !llvm.ptr) {
  %c3 = llvm.mlir.constant(3 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  llvm.call @__fusegrad_blob_rank(%data, %c3, %d0, %d1, %d2, %c1, %dtype, %slot) : (!llvm.ptr,
      i64, i64, i64, i64, i64, i32, !llvm.ptr) -> ()
  llvm.return
}
"""


def add_helpers(module: ir.Operation, text: str) -> None:
    """Append BLOB_TEXT's and `text`'s functions and declarations that `module` lacks."""
    body = module.regions[0].blocks[0]
    existing = symbols(body)
    for o in ir.Module.parse(BLOB_TEXT + text).body.operations:
        if ir.StringAttr(o.operation.attributes["sym_name"]).value not in existing:
            body.append(o.operation.clone())

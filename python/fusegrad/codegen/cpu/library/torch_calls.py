"""Shared pieces of the passes that call PyTorch's C shim from compiled code.

PyTorch's CPU library exports the `aoti_torch_*` C functions AOTInductor's code
calls: tensors are opaque handles made over our buffers without copies
(`aoti_torch_create_tensor_from_blob`), ops take and return handles, and a result
is copied into the buffer that needs it (`aoti_torch_copy_`). Used by
dg-conv-to-torch, dg-attention-to-torch and dg-matmul-to-blas (16-bit floats).

Every shim call returns an error code (a C++ exception inside, caught), and a failed
call leaves its outputs unwritten. So each call's code goes through
`@__fusegrad_check_<function>(failure, code)`, which keeps the first failure of a
helper as the function's number in `runtime.cpu.LIBRARY_CALLS` | code << 8; a helper
returns it, skips what would read a failed call's result (a handle never made, a
result never computed), and the outermost helper passes it to
`index_check.LIBRARY_FAILED` with its site (`SITE<what>` in the helper text, "a
compiled convolution"), so that the runtime raises LibraryCallError after the call.
Slots of handles start null (deleting null is a no-op).
"""
from __future__ import annotations

import re

from mlir import ir

from ....conversion.index_check import LIBRARY_FAILED, library_site
from ....runtime.cpu import LIBRARY_CALLS
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

// the first failure of two (0: none)
llvm.func @__fusegrad_either(%a: i32, %b: i32) -> i32 {
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %failed = llvm.icmp "ne" %a, %z32 : i32
  %r = llvm.select %failed, %a, %b : i1, i32
  llvm.return %r : i32
}

// the first `rank` dims of the tensor of sizes (d0, d1, d2, d3) and strides (s0, s1, s2,
// s3) viewing `data`; returns the failure
llvm.func @__fusegrad_blob_strided(%data: !llvm.ptr, %rank: i64, %d0: i64, %d1: i64,
                                   %d2: i64, %d3: i64, %s0: i64, %s1: i64, %s2: i64, %s3: i64,
                                   %dtype: i32, %slot: !llvm.ptr) -> i32 {
  %c4 = llvm.mlir.constant(4 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %null = llvm.mlir.zero : !llvm.ptr
  llvm.store %null, %slot : !llvm.ptr, !llvm.ptr
  %sizes = llvm.alloca %c4 x i64 : (i64) -> !llvm.ptr
  %strides = llvm.alloca %c4 x i64 : (i64) -> !llvm.ptr
  llvm.call @__fusegrad_store4(%sizes, %d0, %d1, %d2, %d3) : (!llvm.ptr, i64, i64, i64, i64) -> ()
  llvm.call @__fusegrad_store4(%strides, %s0, %s1, %s2, %s3) : (!llvm.ptr, i64, i64, i64, i64) -> ()
  %e = llvm.call @aoti_torch_create_tensor_from_blob(%data, %rank, %sizes, %strides, %c0,
      %dtype, %z32, %z32, %slot) : (!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, i32, i32, i32,
      !llvm.ptr) -> i32
  %f = llvm.call @__fusegrad_check_aoti_torch_create_tensor_from_blob(%z32, %e) : (i32, i32) -> i32
  llvm.return %f : i32
}

// the first `rank` dims of the contiguous (d0, d1, d2, d3) tensor viewing `data`
// (trailing dims of size 1 stand for absent ones)
llvm.func @__fusegrad_blob_rank(%data: !llvm.ptr, %rank: i64, %d0: i64, %d1: i64, %d2: i64,
                                %d3: i64, %dtype: i32, %slot: !llvm.ptr) -> i32 {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %t1 = llvm.mul %d2, %d3 : i64
  %t0 = llvm.mul %d1, %t1 : i64
  %f = llvm.call @__fusegrad_blob_strided(%data, %rank, %d0, %d1, %d2, %d3, %t0, %t1, %d3, %c1,
      %dtype, %slot) : (!llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i32,
      !llvm.ptr) -> i32
  llvm.return %f : i32
}

llvm.func @__fusegrad_blob(%data: !llvm.ptr, %d0: i64, %d1: i64, %d2: i64, %d3: i64,
                           %dtype: i32, %slot: !llvm.ptr) -> i32 {
  %c4 = llvm.mlir.constant(4 : i64) : i64
  %f = llvm.call @__fusegrad_blob_rank(%data, %c4, %d0, %d1, %d2, %d3, %dtype, %slot) : (!llvm.ptr,
      i64, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  llvm.return %f : i32
}

llvm.func @__fusegrad_blob3(%data: !llvm.ptr, %d0: i64, %d1: i64, %d2: i64, %dtype: i32,
                            %slot: !llvm.ptr) -> i32 {
  %c3 = llvm.mlir.constant(3 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %f = llvm.call @__fusegrad_blob_rank(%data, %c3, %d0, %d1, %d2, %c1, %dtype, %slot) : (!llvm.ptr,
      i64, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  llvm.return %f : i32
}

// deletes the tensor in `slot` (if any); returns the failure
llvm.func @__fusegrad_delete(%slot: !llvm.ptr) -> i32 {
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %t = llvm.load %slot : !llvm.ptr -> !llvm.ptr
  %d = llvm.call @aoti_torch_delete_tensor_object(%t) : (!llvm.ptr) -> i32
  %f = llvm.call @__fusegrad_check_aoti_torch_delete_tensor_object(%z32, %d) : (i32, i32) -> i32
  llvm.return %f : i32
}
"""

# `@__fusegrad_check_<function>`: `failure` if not 0 (an earlier call failed), else 0 if
# `code` is (the call succeeded), else the call's failure: its number | code << 8 (codes
# outside 1..127 as 127)
_CHECK_TEXT = """
llvm.func @__fusegrad_check_{name}(%failure: i32, %code: i32) -> i32 {{
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %number = llvm.mlir.constant({number} : i32) : i32
  %c8 = llvm.mlir.constant(8 : i32) : i32
  %max = llvm.mlir.constant(127 : i32) : i32
  %big = llvm.icmp "ugt" %code, %max : i32
  %clipped = llvm.select %big, %max, %code : i1, i32
  %shifted = llvm.shl %clipped, %c8 : i32
  %mine = llvm.or %shifted, %number : i32
  %failed = llvm.icmp "ne" %code, %z32 : i32
  %now = llvm.select %failed, %mine, %z32 : i1, i32
  %earlier = llvm.icmp "ne" %failure, %z32 : i32
  %r = llvm.select %earlier, %failure, %now : i1, i32
  llvm.return %r : i32
}}
"""
_NUMBERS = {name: k for k, (name, _) in enumerate(LIBRARY_CALLS)}
_CHECKED = re.compile(r"@__fusegrad_check_(\w+)\(")
_SITE = re.compile(r"SITE<([^>]*)>")


def add_helpers(module: ir.Operation, text: str) -> None:
    """Append BLOB_TEXT's and `text`'s functions and declarations that `module` lacks,
    with the checkers of the calls they check, and the error sites they report as
    (`SITE<what>`: the number of site `what`)."""
    body = module.regions[0].blocks[0]
    text = BLOB_TEXT + text
    if _SITE.search(text):  # (library_site defines it)
        text = f"func.func private @{LIBRARY_FAILED}(i32, i32)\n" + _SITE.sub(
            lambda m: str(library_site(module, m.group(1))), text)
    text += "".join(_CHECK_TEXT.format(name=name, number=_NUMBERS[name])
                    for name in sorted(set(_CHECKED.findall(text))))
    existing = symbols(body)
    for o in ir.Module.parse(text).body.operations:
        if ir.StringAttr(o.operation.attributes["sym_name"]).value not in existing:
            body.append(o.operation.clone())

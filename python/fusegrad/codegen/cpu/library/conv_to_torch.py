"""dg-conv-to-torch: f32/f64 convolutions on the CPU run PyTorch's own kernels.

A convolution written as loops is far slower than PyTorch's (oneDNN) kernel,
and im2col plus BLAS measured slower still on small CNNs. So after
bufferization, `linalg.conv_2d_nchw_fchw` (groups = 1) and
`linalg.conv_2d_ngchw_gfchw` on contiguous memrefs whose output was just
zero-filled call `aoti_torch_cpu_convolution`, the C entry point of
`at::convolution` that PyTorch's CPU library exports for AOTInductor. The
operands are wrapped as tensors without copies (`aoti_torch_create_tensor_from_blob`)
and the result is copied into the output buffer, so the zero fill goes. The
lowering pads the input into a zero-filled buffer; when only the conv reads it,
the call pads by itself instead (oneDNN on an 18x18 padded input took 3.5 ms
where the 16x16 input with padding 1 took 2.9-3.1 ms, in the benchmark CNN),
and the op that wrote the interior writes a buffer of its own.

The gradients of a convolution, `dg.conv2d_input_grad` and
`dg.conv2d_weight_grad`, lower to forward convolutions of transposed, padded,
flipped copies (dialects/contraction.py), shapes oneDNN runs slowly. On the
CPU they call `aoti_torch_cpu_convolution_backward` (`at::convolution_backward`,
what eager autograd runs) with an output mask that asks for the one gradient
needed. Two passes, so that nothing has to recognize a decomposition in loops:

- dg-outline-conv-grads (on dg, before dg-lower-to-linalg): each f32/f64
  gradient op becomes a call to a private function `@__dg_<op>_<k>` (one per
  op, attributes and types) holding just that op and tagged
  `dg.conv2d_backward = {op = ..., stride = ..., ...}`. The function body
  lowers like any other (the decomposition), so the IR stays correct whether
  or not the next pass runs, and bufferization gives the function identity-layout
  (contiguous) memref arguments with the result as the last, out-param.
- dg-conv-to-torch (on memrefs) replaces the body of each tagged function whose
  three arguments are contiguous f32/f64 memrefs by the library call. The
  output buffer stands in for the operand whose values the call does not read
  (the input for the input gradient, the weight for the weight gradient: only
  its shape is used) and then receives a copy of the result.

The channels-last twins (dg.conv2d_nhwc and its gradients, made by dg-channels-last)
go the same way, all three through `dg-outline-conv-nhwc`: the helpers view their NHWC
buffers with channels-last strides (layout NHWC), so oneDNN runs its channels-last
kernels with no reorder, and the result is copied into the NHWC output as it is.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import arith, func, memref

from .matmul_to_blas import _pointer
from ....dialects.conv_nhwc import TO_NCHW, TWINS
from .conv_layout import NHWC, ConvCall, layout as choose_layout
from ...common.memrefs import (buffer_root, contiguous_memref, erase_buffer, erase_init, overwrites,
                               static_memref, touching_before, untouched_between, zero_fill,
                               zero_fill_of, zero_init)
from ...common.outline import CONV_GRAD_CALL as OUTLINED, outline_ops

from .torch_calls import DTYPE as _DTYPE, add_helpers

HELPER = "__fusegrad_conv2d"
BACKWARD_HELPER = "__fusegrad_conv2d_backward"
NHWC_OUTLINED = "dg.conv2d_nhwc_call"  # attribute of the outlined channels-last functions
NHWC_OPS = tuple(f"dg.{name}" for name in TWINS)

_CHANNELS_LAST_TEXT = """
llvm.func @aoti_torch_empty_strided(i64, !llvm.ptr, !llvm.ptr, i32, i32, i32, !llvm.ptr) -> i32

// with `layout` 1 (conv_layout.CHANNELS_LAST), replaces the (n, c, h, w) tensor in `slot`
// by a channels-last copy; returns the failure
llvm.func @__fusegrad_channels_last(%slot: !llvm.ptr, %d0: i64, %d1: i64, %d2: i64, %d3: i64,
                                    %dtype: i32, %layout: i32) -> i32 {
  %c4 = llvm.mlir.constant(4 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %null = llvm.mlir.zero : !llvm.ptr
  %sizes = llvm.alloca %c4 x i64 : (i64) -> !llvm.ptr
  %strides = llvm.alloca %c4 x i64 : (i64) -> !llvm.ptr
  %fresh = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %keep = llvm.icmp "eq" %layout, %z32 : i32
  llvm.cond_br %keep, ^done(%z32 : i32), ^convert
^convert:
  %row = llvm.mul %d3, %d1 : i64
  %image = llvm.mul %d2, %row : i64
  llvm.call @__fusegrad_store4(%sizes, %d0, %d1, %d2, %d3) : (!llvm.ptr, i64, i64, i64, i64) -> ()
  llvm.call @__fusegrad_store4(%strides, %image, %c1, %row, %d1) : (!llvm.ptr, i64, i64, i64, i64) -> ()
  llvm.store %null, %fresh : !llvm.ptr, !llvm.ptr
  %e = llvm.call @aoti_torch_empty_strided(%c4, %sizes, %strides, %dtype, %z32, %z32, %fresh)
      : (i64, !llvm.ptr, !llvm.ptr, i32, i32, i32, !llvm.ptr) -> i32
  %f = llvm.call @__fusegrad_check_aoti_torch_empty_strided(%z32, %e) : (i32, i32) -> i32
  %made = llvm.icmp "eq" %f, %z32 : i32
  llvm.cond_br %made, ^copy, ^done(%f : i32)
^copy:
  %old = llvm.load %slot : !llvm.ptr -> !llvm.ptr
  %new = llvm.load %fresh : !llvm.ptr -> !llvm.ptr
  %e2 = llvm.call @aoti_torch_copy_(%new, %old, %z32) : (!llvm.ptr, !llvm.ptr, i32) -> i32
  %f2 = llvm.call @__fusegrad_check_aoti_torch_copy_(%f, %e2) : (i32, i32) -> i32
  %e3 = llvm.call @aoti_torch_delete_tensor_object(%old) : (!llvm.ptr) -> i32
  %f3 = llvm.call @__fusegrad_check_aoti_torch_delete_tensor_object(%f2, %e3) : (i32, i32) -> i32
  llvm.store %new, %slot : !llvm.ptr, !llvm.ptr
  llvm.br ^done(%f3 : i32)
^done(%failure: i32):
  llvm.return %failure : i32
}

// the (n, c, h, w) activation viewing `data`: contiguous (layout 0), a channels-last copy
// of that (1), or NHWC data as it is, with channels-last strides (2, conv_layout.NHWC);
// returns the failure
llvm.func @__fusegrad_activation(%data: !llvm.ptr, %n: i64, %c: i64, %h: i64, %w: i64,
                                 %dtype: i32, %layout: i32, %slot: !llvm.ptr) -> i32 {
  %c4 = llvm.mlir.constant(4 : i64) : i64
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %two = llvm.mlir.constant(2 : i32) : i32
  %nhwc = llvm.icmp "eq" %layout, %two : i32
  llvm.cond_br %nhwc, ^strided, ^blob
^strided:
  %row = llvm.mul %w, %c : i64
  %image = llvm.mul %h, %row : i64
  %f = llvm.call @__fusegrad_blob_strided(%data, %c4, %n, %c, %h, %w, %image, %c1, %row, %c,
      %dtype, %slot) : (!llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i32,
      !llvm.ptr) -> i32
  llvm.br ^done(%f : i32)
^blob:
  %f1 = llvm.call @__fusegrad_blob(%data, %n, %c, %h, %w, %dtype, %slot) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %made = llvm.icmp "eq" %f1, %z32 : i32
  llvm.cond_br %made, ^convert, ^done(%f1 : i32)
^convert:
  %f2 = llvm.call @__fusegrad_channels_last(%slot, %n, %c, %h, %w, %dtype, %layout) : (!llvm.ptr, i64, i64, i64, i64, i32, i32) -> i32
  llvm.br ^done(%f2 : i32)
^done(%failure: i32):
  llvm.return %failure : i32
}

// the layout of a result buffer: NHWC data stays so, anything else is contiguous
llvm.func @__fusegrad_result_layout(%layout: i32) -> i32 {
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %two = llvm.mlir.constant(2 : i32) : i32
  %nhwc = llvm.icmp "eq" %layout, %two : i32
  %r = llvm.select %nhwc, %two, %z32 : i1, i32
  llvm.return %r : i32
}
"""

# x, w, y: data pointers; then x dims (n, c, h, w), weight dims (f, c/g, kh, kw), output
# dims (n, f, oh, ow), stride (2), padding (2), dilation (2), groups; dtype code; layout
# (conv_layout: 1 converts x to channels-last first; 2: x and y are NHWC buffers)
_FORWARD_TEXT = """
llvm.func @aoti_torch_cpu_convolution(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr,
                                      i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, i64,
                                      !llvm.ptr) -> i32

llvm.func @aoti_torch_zero_(!llvm.ptr) -> i32
llvm.func @aoti_torch_cpu_mkldnn__convolution_pointwise_binary_(!llvm.ptr, !llvm.ptr, !llvm.ptr,
    !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, i64, !llvm.ptr, !llvm.ptr,
    !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr) -> i32
llvm.mlir.global internal constant @__fusegrad_add("add\00") {addr_space = 0 : i32}

// the convolution of tensors vx and vw into vy. f32 on NHWC buffers: zero vy and add the
// convolution into it in place (mkldnn's fused conv + add), 0.84 -> 0.67 ms for the
// benchmark CNN's first conv against computing a result and copying it; otherwise, or if
// that call fails, at::convolution and a copy (none if it fails). Returns the failure.
llvm.func @__fusegrad_conv_into(%vx: !llvm.ptr, %vw: !llvm.ptr, %vy: !llvm.ptr,
    %stride: !llvm.ptr, %pad: !llvm.ptr, %dil: !llvm.ptr, %zeros: !llvm.ptr, %groups: i64,
    %dtype: i32, %layout: i32) -> i32 {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %c2 = llvm.mlir.constant(2 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %two = llvm.mlir.constant(2 : i32) : i32
  %f32 = llvm.mlir.constant(6 : i32) : i32
  %null = llvm.mlir.zero : !llvm.ptr
  %tr = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  llvm.store %null, %tr : !llvm.ptr, !llvm.ptr
  %nhwc = llvm.icmp "eq" %layout, %two : i32
  %single = llvm.icmp "eq" %dtype, %f32 : i32
  %inplace = llvm.and %nhwc, %single : i1
  llvm.cond_br %inplace, ^zero, ^generic
^zero:
  %ez = llvm.call @aoti_torch_zero_(%vy) : (!llvm.ptr) -> i32
  %zeroed = llvm.icmp "eq" %ez, %z32 : i32
  llvm.cond_br %zeroed, ^add, ^generic
^add:
  %attr = llvm.mlir.addressof @__fusegrad_add : !llvm.ptr
  %ea = llvm.call @aoti_torch_cpu_mkldnn__convolution_pointwise_binary_(%vy, %vx, %vw, %null,
      %pad, %c2, %stride, %c2, %dil, %c2, %groups, %attr, %null, %null, %null, %c0, %null, %tr)
      : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr,
         i64, i64, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr) -> i32
  %added = llvm.icmp "eq" %ea, %z32 : i32
  llvm.cond_br %added, ^release, ^generic
^release:
  %va = llvm.load %tr : !llvm.ptr -> !llvm.ptr
  %da = llvm.call @aoti_torch_delete_tensor_object(%va) : (!llvm.ptr) -> i32
  %fa = llvm.call @__fusegrad_check_aoti_torch_delete_tensor_object(%z32, %da) : (i32, i32) -> i32
  llvm.br ^done(%fa : i32)
^generic:
  %nobias = llvm.mlir.zero : !llvm.ptr
  %e = llvm.call @aoti_torch_cpu_convolution(%vx, %vw, %nobias, %stride, %c2, %pad, %c2,
      %dil, %c2, %z32, %zeros, %c2, %groups, %tr) : (!llvm.ptr, !llvm.ptr, !llvm.ptr,
      !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, i64, !llvm.ptr) -> i32
  %f = llvm.call @__fusegrad_check_aoti_torch_cpu_convolution(%z32, %e) : (i32, i32) -> i32
  %computed = llvm.icmp "eq" %f, %z32 : i32
  llvm.cond_br %computed, ^copy, ^done(%f : i32)
^copy:
  %vr = llvm.load %tr : !llvm.ptr -> !llvm.ptr
  %e2 = llvm.call @aoti_torch_copy_(%vy, %vr, %z32) : (!llvm.ptr, !llvm.ptr, i32) -> i32
  %f2 = llvm.call @__fusegrad_check_aoti_torch_copy_(%f, %e2) : (i32, i32) -> i32
  %d0 = llvm.call @aoti_torch_delete_tensor_object(%vr) : (!llvm.ptr) -> i32
  %f3 = llvm.call @__fusegrad_check_aoti_torch_delete_tensor_object(%f2, %d0) : (i32, i32) -> i32
  llvm.br ^done(%f3 : i32)
^done(%failure: i32):
  llvm.return %failure : i32
}

func.func private @__fusegrad_conv2d(%x: !llvm.ptr, %w: !llvm.ptr, %y: !llvm.ptr,
    %n: i64, %c: i64, %h: i64, %wd: i64, %f: i64, %cg: i64, %kh: i64, %kw: i64,
    %on: i64, %of: i64, %oh: i64, %ow: i64,
    %sh: i64, %sw: i64, %ph: i64, %pw: i64, %dh: i64, %dw: i64, %groups: i64, %dtype: i32,
    %layout: i32) {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %c2 = llvm.mlir.constant(2 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %tx = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tw = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %ty = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %ylayout = llvm.call @__fusegrad_result_layout(%layout) : (i32) -> i32
  %f1 = llvm.call @__fusegrad_activation(%x, %n, %c, %h, %wd, %dtype, %layout, %tx) : (!llvm.ptr, i64, i64, i64, i64, i32, i32, !llvm.ptr) -> i32
  %f2 = llvm.call @__fusegrad_blob(%w, %f, %cg, %kh, %kw, %dtype, %tw) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f3 = llvm.call @__fusegrad_activation(%y, %on, %of, %oh, %ow, %dtype, %ylayout, %ty) : (!llvm.ptr, i64, i64, i64, i64, i32, i32, !llvm.ptr) -> i32
  %f12 = llvm.call @__fusegrad_either(%f1, %f2) : (i32, i32) -> i32
  %wrapped = llvm.call @__fusegrad_either(%f12, %f3) : (i32, i32) -> i32
  %stride = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %pad = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %dil = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %zeros = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  llvm.call @__fusegrad_store2(%stride, %sh, %sw) : (!llvm.ptr, i64, i64) -> ()
  llvm.call @__fusegrad_store2(%pad, %ph, %pw) : (!llvm.ptr, i64, i64) -> ()
  llvm.call @__fusegrad_store2(%dil, %dh, %dw) : (!llvm.ptr, i64, i64) -> ()
  llvm.call @__fusegrad_store2(%zeros, %c0, %c0) : (!llvm.ptr, i64, i64) -> ()
  %vx = llvm.load %tx : !llvm.ptr -> !llvm.ptr
  %vw = llvm.load %tw : !llvm.ptr -> !llvm.ptr
  %vy = llvm.load %ty : !llvm.ptr -> !llvm.ptr
  %ok = llvm.icmp "eq" %wrapped, %z32 : i32
  %computed = scf.if %ok -> (i32) {
    %fc = llvm.call @__fusegrad_conv_into(%vx, %vw, %vy, %stride, %pad, %dil, %zeros, %groups,
        %dtype, %layout) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr,
        !llvm.ptr, i64, i32, i32) -> i32
    scf.yield %fc : i32
  } else {
    scf.yield %wrapped : i32
  }
  %d1 = llvm.call @__fusegrad_delete(%tx) : (!llvm.ptr) -> i32
  %d2 = llvm.call @__fusegrad_delete(%tw) : (!llvm.ptr) -> i32
  %d3 = llvm.call @__fusegrad_delete(%ty) : (!llvm.ptr) -> i32
  %g1 = llvm.call @__fusegrad_either(%computed, %d1) : (i32, i32) -> i32
  %g2 = llvm.call @__fusegrad_either(%g1, %d2) : (i32, i32) -> i32
  %failure = llvm.call @__fusegrad_either(%g2, %d3) : (i32, i32) -> i32
  %site = arith.constant SITE<a compiled convolution> : i32
  func.call @__fusegrad_library_failed(%failure, %site) : (i32, i32) -> ()
  return
}
"""


# go, x, w: data pointers of grad_output, input and weight; then their dims (4 each),
# stride (2), padding (2), dilation (2), groups; which gradient (0: input, written over x;
# 1: weight, written over w; the other of x, w is read); dtype code; layout (conv_layout:
# 1 passes go and x channels-last, x as a copy of its own, whose values the input
# gradient does not read; 2: go and x are NHWC buffers)
_BACKWARD_TEXT = """
llvm.func @aoti_torch_cpu_convolution_backward(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64,
    !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64, i32, !llvm.ptr, i64, i64, !llvm.ptr, i64,
    !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32

func.func private @__fusegrad_conv2d_backward(%go: !llvm.ptr, %x: !llvm.ptr, %w: !llvm.ptr,
    %n: i64, %o: i64, %oh: i64, %ow: i64, %xn: i64, %c: i64, %h: i64, %wd: i64,
    %f: i64, %cg: i64, %kh: i64, %kw: i64,
    %sh: i64, %sw: i64, %ph: i64, %pw: i64, %dh: i64, %dw: i64, %groups: i64,
    %which: i32, %dtype: i32, %layout: i32) {
  %c1 = llvm.mlir.constant(1 : i64) : i64
  %c2 = llvm.mlir.constant(2 : i64) : i64
  %c3 = llvm.mlir.constant(3 : i64) : i64
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %z32 = llvm.mlir.constant(0 : i32) : i32
  %one32 = llvm.mlir.constant(1 : i32) : i32
  %null = llvm.mlir.zero : !llvm.ptr
  %tgo = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tx = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tw = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tr = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %tdst = llvm.alloca %c1 x !llvm.ptr : (i64) -> !llvm.ptr
  %which_input = llvm.icmp "eq" %which, %z32 : i32
  %xlayout = llvm.call @__fusegrad_result_layout(%layout) : (i32) -> i32
  %dstlayout = llvm.select %which_input, %xlayout, %z32 : i1, i32
  %dst_data = llvm.select %which_input, %x, %w : i1, !llvm.ptr
  %dst0 = llvm.select %which_input, %xn, %f : i1, i64
  %dst1 = llvm.select %which_input, %c, %cg : i1, i64
  %dst2 = llvm.select %which_input, %h, %kh : i1, i64
  %dst3 = llvm.select %which_input, %wd, %kw : i1, i64
  %f1 = llvm.call @__fusegrad_activation(%dst_data, %dst0, %dst1, %dst2, %dst3, %dtype, %dstlayout, %tdst) : (!llvm.ptr, i64, i64, i64, i64, i32, i32, !llvm.ptr) -> i32
  %f2 = llvm.call @__fusegrad_activation(%go, %n, %o, %oh, %ow, %dtype, %layout, %tgo) : (!llvm.ptr, i64, i64, i64, i64, i32, i32, !llvm.ptr) -> i32
  %f3 = llvm.call @__fusegrad_activation(%x, %xn, %c, %h, %wd, %dtype, %layout, %tx) : (!llvm.ptr, i64, i64, i64, i64, i32, i32, !llvm.ptr) -> i32
  %f4 = llvm.call @__fusegrad_blob(%w, %f, %cg, %kh, %kw, %dtype, %tw) : (!llvm.ptr, i64, i64, i64, i64, i32, !llvm.ptr) -> i32
  %f12 = llvm.call @__fusegrad_either(%f1, %f2) : (i32, i32) -> i32
  %f34 = llvm.call @__fusegrad_either(%f3, %f4) : (i32, i32) -> i32
  %wrapped = llvm.call @__fusegrad_either(%f12, %f34) : (i32, i32) -> i32
  %stride = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %pad = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %dil = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %zeros = llvm.alloca %c2 x i64 : (i64) -> !llvm.ptr
  %mask = llvm.alloca %c3 x i32 : (i64) -> !llvm.ptr
  %mask1 = llvm.getelementptr %mask[1] : (!llvm.ptr) -> !llvm.ptr, i32
  %mask2 = llvm.getelementptr %mask[2] : (!llvm.ptr) -> !llvm.ptr, i32
  llvm.call @__fusegrad_store2(%stride, %sh, %sw) : (!llvm.ptr, i64, i64) -> ()
  llvm.call @__fusegrad_store2(%pad, %ph, %pw) : (!llvm.ptr, i64, i64) -> ()
  llvm.call @__fusegrad_store2(%dil, %dh, %dw) : (!llvm.ptr, i64, i64) -> ()
  llvm.call @__fusegrad_store2(%zeros, %c0, %c0) : (!llvm.ptr, i64, i64) -> ()
  %is_input = llvm.icmp "eq" %which, %z32 : i32
  %is_weight = llvm.icmp "eq" %which, %one32 : i32
  %m0 = llvm.zext %is_input : i1 to i32
  %m1 = llvm.zext %is_weight : i1 to i32
  llvm.store %m0, %mask : i32, !llvm.ptr
  llvm.store %m1, %mask1 : i32, !llvm.ptr
  llvm.store %z32, %mask2 : i32, !llvm.ptr
  llvm.store %null, %tr : !llvm.ptr, !llvm.ptr
  %r0 = llvm.select %is_input, %tr, %null : i1, !llvm.ptr
  %r1 = llvm.select %is_weight, %tr, %null : i1, !llvm.ptr
  %vgo = llvm.load %tgo : !llvm.ptr -> !llvm.ptr
  %vx = llvm.load %tx : !llvm.ptr -> !llvm.ptr
  %vw = llvm.load %tw : !llvm.ptr -> !llvm.ptr
  %ok = llvm.icmp "eq" %wrapped, %z32 : i32
  %computed = scf.if %ok -> (i32) {
    %e = llvm.call @aoti_torch_cpu_convolution_backward(%vgo, %vx, %vw, %null, %c0, %stride,
        %c2, %pad, %c2, %dil, %c2, %z32, %zeros, %c2, %groups, %mask, %c3, %r0, %r1, %null)
        : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64,
           !llvm.ptr, i64, i32, !llvm.ptr, i64, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr,
           !llvm.ptr) -> i32
    %fk = llvm.call @__fusegrad_check_aoti_torch_cpu_convolution_backward(%z32, %e) : (i32, i32) -> i32
    %done = llvm.icmp "eq" %fk, %z32 : i32
    %copied = scf.if %done -> (i32) {
      %vr = llvm.load %tr : !llvm.ptr -> !llvm.ptr
      %dst = llvm.load %tdst : !llvm.ptr -> !llvm.ptr
      %e2 = llvm.call @aoti_torch_copy_(%dst, %vr, %z32) : (!llvm.ptr, !llvm.ptr, i32) -> i32
      %fc = llvm.call @__fusegrad_check_aoti_torch_copy_(%z32, %e2) : (i32, i32) -> i32
      scf.yield %fc : i32
    } else {
      scf.yield %fk : i32
    }
    scf.yield %copied : i32
  } else {
    scf.yield %wrapped : i32
  }
  %d4 = llvm.call @__fusegrad_delete(%tdst) : (!llvm.ptr) -> i32
  %d0 = llvm.call @__fusegrad_delete(%tr) : (!llvm.ptr) -> i32
  %d1 = llvm.call @__fusegrad_delete(%tgo) : (!llvm.ptr) -> i32
  %d2 = llvm.call @__fusegrad_delete(%tx) : (!llvm.ptr) -> i32
  %d3 = llvm.call @__fusegrad_delete(%tw) : (!llvm.ptr) -> i32
  %g1 = llvm.call @__fusegrad_either(%computed, %d4) : (i32, i32) -> i32
  %g2 = llvm.call @__fusegrad_either(%g1, %d0) : (i32, i32) -> i32
  %g3 = llvm.call @__fusegrad_either(%g2, %d1) : (i32, i32) -> i32
  %g4 = llvm.call @__fusegrad_either(%g3, %d2) : (i32, i32) -> i32
  %failure = llvm.call @__fusegrad_either(%g4, %d3) : (i32, i32) -> i32
  %site = arith.constant SITE<a compiled convolution's gradient> : i32
  func.call @__fusegrad_library_failed(%failure, %site) : (i32, i32) -> ()
  return
}
"""


def _conv_dims(op: ir.Operation, x_type: ir.MemRefType, padding: tuple[int, int]) -> list[int]:
    """The helper's scalar arguments for `op` reading an input of type `x_type`."""
    strides = list(ir.DenseIntElementsAttr(op.attributes["strides"]))
    dilations = list(ir.DenseIntElementsAttr(op.attributes["dilations"]))
    xs, ws, ys = list(x_type.shape), list(op.operands[1].type.shape), list(op.operands[2].type.shape)
    if op.name == "linalg.conv_2d_nchw_fchw":
        return [*xs, *ws, *ys, *strides, *padding, *dilations, 1]
    n, g, cg, h, wd = xs
    gw, fg, cgw, kh, kw = ws
    yn, yg, yf, oh, ow = ys
    return [n, g * cg, h, wd, g * fg, cgw, kh, kw, yn, yg * yf, oh, ow, *strides, *padding,
            *dilations, g]


def _callable_conv(op: ir.Operation) -> ir.Operation | None:
    """The op that zeroes the output of a library-callable conv (the call overwrites the
    output, so that op goes), or None."""
    if op.name not in ("linalg.conv_2d_nchw_fchw", "linalg.conv_2d_ngchw_gfchw"):
        return None
    types = [v.type for v in op.operands]
    # a strided output (its slot in a concatenation, copy elision's) is staged: _stage
    if not all(contiguous_memref(t) for t in types[:2]) or not static_memref(types[2]):
        return None
    dtypes = {str(t.element_type) for t in types}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _DTYPE:
        return None
    out = op.operands[2]
    init = zero_init(op, out)
    if init is not None or contiguous_memref(out.type):
        return init
    # a view (_stage): the zero fill of exactly that view, last before the conv
    earlier = touching_before(buffer_root(out), op)
    fill = earlier[0] if earlier else None
    return fill if fill is not None and zero_fill(fill) and fill.operands[1] == out else None


def _stage(out: ir.Value) -> ir.Value:
    """Where the library writes the conv's output: `out` if contiguous, else a contiguous
    buffer copied into it after the call. Copy elision writes a conv straight into its
    slot of a concatenation (DenseNet: each layer's 3x3 conv into the next layer's input),
    a strided view, which the library cannot take: those convs ran as scalar loops (a
    dense block's forward 3x eager's); the copy is a few KiB."""
    if contiguous_memref(out.type):
        return out
    t = ir.MemRefType(out.type)
    return memref.AllocOp(ir.MemRefType.get(t.shape, t.element_type), [], [],
                          alignment=64).result


def _padded_interior(op: ir.Operation) -> tuple[ir.Operation, ir.Operation, int, int] | None:
    """(subview, its writer, pad h, pad w) when the conv's input is the lowering's padding:
    a zero-filled alloc whose interior (a unit-stride subview, the same margin on both sides
    of each spatial dim) one op writes whole and that only the conv reads (a grouped conv
    through an expand_shape to (n, g, c/g, h, w)). The library pads by itself, from the
    interior alone: oneDNN ran ConvNeXt's pre-padded depthwise 7x7 convs by im2col and
    gemm, 27% of a training step, against its direct kernel for eager's padded call."""
    x, reader = op.operands[0], op
    if not isinstance(x.owner, ir.Block) and x.owner.operation.name == "memref.expand_shape" \
            and len(list(x.uses)) == 1:
        reader = x.owner.operation
        x = reader.operands[0]
    if isinstance(x.owner, ir.Block) or x.owner.operation.name != "memref.alloc":
        return None
    users = [u.owner.operation for u in x.uses]
    fills = [u for u in users if zero_fill_of(u, x)]
    views = [u for u in users if u.name == "memref.subview"]
    if len(fills) != 1 or len(views) != 1 or \
            any(u not in (fills[0], views[0], reader) and u.name != "memref.dealloc"
                for u in users):
        return None
    view = views[0]
    offsets, sizes, steps = (list(ir.DenseI64ArrayAttr(view.attributes[k]))
                             for k in ("static_offsets", "static_sizes", "static_strides"))
    shape, rank = list(x.type.shape), x.type.rank
    pads = offsets[rank - 2:]
    if any(s != 1 for s in steps) or any(o != 0 for o in offsets[:rank - 2]) or \
            sizes[:rank - 2] != shape[:rank - 2] or \
            any(p < 0 or size + 2 * p != full
                for p, size, full in zip(pads, sizes[rank - 2:], shape[rank - 2:])):
        return None
    writers = [u.owner.operation for u in view.result.uses]
    if len(writers) != 1 or writers[0].block != op.block or \
            not writers[0].is_before_in_block(op):
        return None
    writer = writers[0]
    whole = (writer.name == "memref.copy" and writer.operands[1] == view.result) or \
        overwrites(writer, view.result)
    filled_first = fills[0].block == writer.block and fills[0].is_before_in_block(writer)
    return (view, writer, *pads) if whole and filled_first else None


def _unpad(op: ir.Operation, padded: tuple[ir.Operation, ir.Operation, int, int]) -> ir.Value:
    """Drop the padded buffer: the interior's writer writes a buffer of its own (or, for a
    copy of a contiguous buffer, the conv reads the copy's source). Returns the conv's new
    input."""
    view, writer, _, _ = padded
    x = op.operands[0]
    grouped = None if isinstance(x.owner, ir.Block) or \
        x.owner.operation.name != "memref.expand_shape" else x.owner.operation
    if grouped is not None:
        x = grouped.operands[0]
    deallocs = [u.owner.operation for u in x.uses if u.owner.operation.name == "memref.dealloc"]
    source = writer.operands[0]
    if writer.name == "memref.copy" and contiguous_memref(source.type) and \
            untouched_between(source, writer, op):
        interior = source
        writer.erase()
    else:
        t = ir.MemRefType(view.result.type)
        with ir.InsertionPoint(x.owner.operation), view.location:
            interior = memref.AllocOp(ir.MemRefType.get(t.shape, t.element_type), [], [],
                                      alignment=64).result
        view.result.replace_all_uses_with(interior)
        for d in deallocs:
            with ir.InsertionPoint(d), d.location:
                memref.DeallocOp(interior)
    view.erase()
    if grouped is not None:  # (n, c, h, w) -> (n, g, c/g, h, w), unpadded
        t = ir.MemRefType(interior.type)
        shape = list(ir.MemRefType(grouped.result.type).shape[:3]) + list(t.shape[2:])
        with ir.InsertionPoint(grouped), grouped.location:
            interior = memref.ExpandShapeOp(ir.MemRefType.get(shape, t.element_type), interior,
                                            grouped.attributes["reassociation"], [],
                                            shape).result
        op.operands[0] = interior
        grouped.erase()
    op.operands[0] = interior
    erase_buffer(x)  # its fill and deallocs, then the alloc
    return interior


def _add_helpers(module: ir.Operation, forward: bool, backward: bool) -> None:
    """Append the helper functions and declarations the calls need, once."""
    if forward or backward:
        add_helpers(module, _CHANNELS_LAST_TEXT + (_FORWARD_TEXT if forward else "") +
                    (_BACKWARD_TEXT if backward else ""))


# ---------------------------------------------------------------- outlining (dg)
def outline_conv_nhwc(module: ir.Operation) -> None:
    outline_ops(module, lambda op: op.name in NHWC_OPS and
                str(op.results[0].type.element_type) in _DTYPE, NHWC_OUTLINED)


# ---------------------------------------------------------------- library calls (memrefs)
def _nchw(t: ir.MemRefType, nhwc: bool) -> list[int]:
    """The logical (NCHW) dims of an activation buffer."""
    shape = list(t.shape)
    return [shape[p] for p in TO_NCHW] if nhwc else shape


def _outlined_call(fn: ir.Operation) -> tuple | None:
    """(helper, pointers, [dims and attributes], which, layout) for an outlined function
    that can call the library, or None. `which` is -1 for a forward convolution (pointers
    x, w, y), else the gradient (pointers grad_output, input, weight; 0: input, 1: weight);
    layout is NHWC for the channels-last ops, else None (chosen by the policy)."""
    if fn.name != "func.func":
        return None
    nhwc = NHWC_OUTLINED in fn.attributes
    if not nhwc and OUTLINED not in fn.attributes:
        return None
    blocks = list(fn.regions[0].blocks)
    if len(blocks) != 1:
        return None
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    args = list(blocks[0].arguments)
    if ftype.results or len(args) != 3 or not all(contiguous_memref(a.type) for a in args):
        return None
    dtypes = {str(a.type.element_type) for a in args}
    if len(dtypes) != 1 or next(iter(dtypes)) not in _DTYPE or \
            any(a.type.rank != 4 for a in args):
        return None
    tag = ir.DictAttr(fn.attributes[NHWC_OUTLINED if nhwc else OUTLINED])
    op = ir.StringAttr(tag["op"]).value
    attrs = []
    for k in ("stride", "padding", "dilation"):
        attrs += list(ir.DenseI64ArrayAttr(tag[k]))
    attrs.append(ir.IntegerAttr(tag["groups"]).value)
    layout = NHWC if nhwc else None
    if op == "conv2d_nhwc":
        x, w, y = args
        dims = _nchw(x.type, True) + list(w.type.shape) + _nchw(y.type, True)
        return HELPER, (x, w, y), dims + attrs, -1, layout
    which = 0 if op.endswith("input_grad") else 1
    if which == 0:  # (grad, weight, out): the output stands in for the input
        go, w, x = args
    else:  # (x, grad, out): the output stands in for the weight
        x, go, w = args
    dims = _nchw(go.type, nhwc) + _nchw(x.type, nhwc) + list(w.type.shape)
    return BACKWARD_HELPER, (go, x, w), dims + attrs, which, layout


def _conv_call(kind: int, dims: list[int], dtype: str) -> ConvCall:
    """The ConvCall of a helper call with scalar arguments `dims`: three shapes (x, w, y
    forward; go, x, w backward), stride, padding, dilation, groups."""
    shapes = [tuple(dims[k:k + 4]) for k in (0, 4, 8)]
    x, w, y = shapes if kind < 0 else (shapes[1], shapes[2], shapes[0])
    return ConvCall(kind, x, w, y, tuple(dims[12:14]), tuple(dims[14:16]), tuple(dims[16:18]),
                    dims[18], dtype)


def _call_library(fn: ir.Operation, call: tuple, policy: str) -> None:
    helper, pointers, dims, which, layout = call
    block = fn.regions[0].blocks[0]
    for op in reversed(list(block.operations)):
        op.erase()
    i64 = ir.IntegerType.get_signless(64)
    i32 = ir.IntegerType.get_signless(32)
    with ir.InsertionPoint(block), fn.location:
        ptrs = [_pointer(v) for v in pointers]
        scalars = [arith.ConstantOp(i64, d).result for d in dims]
        element = str(pointers[0].type.element_type)
        if layout is None:
            layout = choose_layout(_conv_call(which, dims, element), policy)
        kind = [] if which < 0 else [arith.ConstantOp(i32, which).result]
        func.CallOp([], ir.FlatSymbolRefAttr.get(helper),
                    [*ptrs, *scalars, *kind, arith.ConstantOp(i32, _DTYPE[element]).result,
                     arith.ConstantOp(i32, layout).result])
        func.ReturnOp([])


def conv_to_torch(module: ir.Operation, layout: str = "auto") -> None:
    helpers: set[str] = set()
    for fn in list(module.regions[0].blocks[0].operations):
        call = _outlined_call(fn.operation)
        if call is not None:
            _call_library(fn.operation, call, layout)
            helpers.add(call[0])
    convs: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _callable_conv(op) is not None:
            convs.append(op)
        return ir.WalkResult.ADVANCE
    module.walk(visit)
    _add_helpers(module, forward=bool(convs) or HELPER in helpers,
                 backward=BACKWARD_HELPER in helpers)
    i64 = ir.IntegerType.get_signless(64)
    i32 = ir.IntegerType.get_signless(32)
    for op in convs:
        init = _callable_conv(op)
        if init is None:  # an earlier call's rewrite changed its output's initialisation
            continue
        erase_init(init)
        padded = _padded_interior(op)
        x = _unpad(op, padded) if padded is not None else op.operands[0]
        dims = _conv_dims(op, x.type, padded[2:] if padded is not None else (0, 0))
        element = str(x.type.element_type)
        chosen = choose_layout(_conv_call(-1, dims, element), layout)
        out = op.operands[2]
        with ir.InsertionPoint(op), op.location:
            staged = _stage(out)
            ptrs = [_pointer(v) for v in (x, op.operands[1], staged)]
            scalars = [arith.ConstantOp(i64, d).result for d in dims]
            func.CallOp([], ir.FlatSymbolRefAttr.get(HELPER),
                        [*ptrs, *scalars, arith.ConstantOp(i32, _DTYPE[element]).result,
                         arith.ConstantOp(i32, chosen).result])
            if staged != out:
                memref.CopyOp(staged, out)
                memref.DeallocOp(staged)
        op.erase()

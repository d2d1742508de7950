// dg-conv-to-torch: f32/f64 convolutions (grouped too) on contiguous memrefs call
// PyTorch's CPU convolution through the AOTInductor C shim; the output buffer
// receives a copy of the result, so its zero fill goes. The library pads by
// itself: the lowering's zero-filled padded buffer goes, and the conv reads the
// argument (@conv) or a buffer of the interior's own (@neg_conv), also for grouped
// convolutions, read through an expand_shape to (n, g, c/g, h, w), and for paddings of
// one shape that `cse` made share a fill (@two_depthwise). Integer convolutions keep
// loops.
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize,dg-conv-to-torch{layout=nchw}' | filecheck %s

// CHECK-LABEL: func.func @conv(
// CHECK-NOT: memref.alloc
// CHECK-NOT: linalg.fill
// CHECK: memref.extract_aligned_pointer_as_index %arg0
// CHECK: call @__fusegrad_conv2d({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i32, i32) -> ()
// CHECK-NOT: linalg.conv
// CHECK-LABEL: func.func @neg_conv(
// CHECK-NOT: linalg.fill
// CHECK: %[[X:.*]] = memref.alloc() {{.*}} : memref<2x3x8x8xf32>
// CHECK-NOT: linalg.fill
// CHECK: linalg.generic {{.*}} outs(%[[X]] : memref<2x3x8x8xf32>)
// CHECK: memref.extract_aligned_pointer_as_index %[[X]]
// output h, w; stride; padding; dilation; groups; dtype; layout (NCHW)
// CHECK: call @__fusegrad_conv2d({{.*}}, %c8_i64{{[_0-9]*}}, %c8_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c2_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c2_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c6_i32, %c0_i32)
// CHECK: memref.dealloc %[[X]]
// CHECK-LABEL: func.func @grouped(
// CHECK: call @__fusegrad_conv2d(
// CHECK-LABEL: func.func @two_depthwise(
// CHECK-NOT: memref<2x4x10x10xf32>
// padding; dilation; groups; dtype; layout
// CHECK: call @__fusegrad_conv2d({{.*}}, %c1_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c4_i64{{[_0-9]*}}, %c6_i32
// CHECK-NOT: memref<2x4x10x10xf32>
// CHECK: call @__fusegrad_conv2d({{.*}}, %c1_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c4_i64{{[_0-9]*}}, %c6_i32
// CHECK-NOT: memref<2x4x10x10xf32>
// CHECK-LABEL: func.func @iconv(
// CHECK: linalg.conv_2d_nchw_fchw
// A conv written into its slot of a concatenation (a strided view) calls the library
// into a buffer of its own, copied into the slot.
// CHECK-LABEL: func.func @conv_into_concat(
// CHECK: %[[SLOT:.*]] = memref.subview %arg3[0, 5, 0, 0] [2, 4, 8, 8]
// CHECK-NOT: linalg.fill
// CHECK: %[[OUT:.*]] = memref.alloc() {{.*}} : memref<2x4x8x8xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: call @__fusegrad_conv2d(
// CHECK-NEXT: memref.copy %[[OUT]], %[[SLOT]]
// CHECK-NEXT: memref.dealloc %[[OUT]]
// CHECK-NOT: linalg.conv
// CHECK-DAG: llvm.func @aoti_torch_cpu_convolution(
// CHECK-DAG: func.func private @__fusegrad_conv2d(
func.func @conv(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

func.func @neg_conv(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %n = "dg.neg"(%x) : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %0 = "dg.conv2d"(%n, %w) {stride = array<i64: 1, 1>, padding = array<i64: 2, 1>, dilation = array<i64: 2, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

func.func @grouped(%x: tensor<2x4x8x8xf64>, %w: tensor<4x2x3x3xf64>) -> tensor<2x4x3x3xf64> {
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x8x8xf64>, tensor<4x2x3x3xf64>) -> tensor<2x4x3x3xf64>
  return %0 : tensor<2x4x3x3xf64>
}

func.func @two_depthwise(%x: tensor<2x4x8x8xf32>, %y: tensor<2x4x8x8xf32>, %w: tensor<4x1x3x3xf32>)
    -> (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %nx = "dg.neg"(%x) : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %ny = "dg.exp"(%y) : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %0 = "dg.conv2d"(%nx, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 4 : i64} : (tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32>
  %1 = "dg.conv2d"(%ny, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 4 : i64} : (tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %0, %1 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

func.func @iconv(%x: tensor<1x1x4x4xi64>, %w: tensor<1x1x2x2xi64>) -> tensor<1x1x3x3xi64> {
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x1x4x4xi64>, tensor<1x1x2x2xi64>) -> tensor<1x1x3x3xi64>
  return %0 : tensor<1x1x3x3xi64>
}

func.func @conv_into_concat(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %y: tensor<2x5x8x8xf32>) -> tensor<2x9x8x8xf32> {
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %1 = "dg.concatenate"(%y, %0) {dim = 1 : i64} : (tensor<2x5x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x9x8x8xf32>
  return %1 : tensor<2x9x8x8xf32>
}

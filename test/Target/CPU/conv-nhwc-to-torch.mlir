// The channels-last convolutions on the CPU: dg-outline-conv-nhwc (in dg-cpu-linalg)
// turns each f32/f64 dg.conv2d_nhwc / conv2d_nhwc_input_grad / conv2d_nhwc_weight_grad
// into a call of a private function holding just that op, tagged dg.conv2d_nhwc_call;
// dg-conv-to-torch replaces its body (the decomposition: transposes around the NCHW op)
// by one call of PyTorch's kernels on the NHWC buffers as they are: the dims passed are
// the logical NCHW ones, and layout 2 (conv_layout.NHWC) makes the helper view the
// activations with channels-last strides, whatever `layout` says for NCHW convolutions.
// RUN: fusegrad-opt %s -p 'dg-outline-conv-nhwc' | filecheck %s --check-prefix=OUTLINE
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize,dg-conv-to-torch{layout=nchw}' | filecheck %s

// OUTLINE-LABEL: func.func private @__dg_conv2d_nhwc_0(%arg0: tensor<2x9x7x4xf32>, %arg1: tensor<6x4x3x3xf32>) -> tensor<2x5x7x6xf32> attributes {dg.conv2d_nhwc_call = {dilation = array<i64: 1, 1>, groups = 1 : i64, op = "conv2d_nhwc", padding = array<i64: 1, 1>, stride = array<i64: 2, 1>}}
// OUTLINE-LABEL: func.func private @__dg_conv2d_nhwc_input_grad_0(
// OUTLINE-LABEL: func.func private @__dg_conv2d_nhwc_weight_grad_0(
// OUTLINE-LABEL: func.func @f(
// OUTLINE-NEXT: %[[Y:.*]] = call @__dg_conv2d_nhwc_0(%arg0, %arg1)
// OUTLINE-NEXT: call @__dg_conv2d_nhwc_input_grad_0(%[[Y]], %arg1)
// OUTLINE-NEXT: call @__dg_conv2d_nhwc_weight_grad_0(%arg0, %[[Y]])

// x (n, c, h, w) = (2, 4, 9, 7), the weight, y (2, 6, 5, 7), stride, padding, dilation,
// groups, f32 (6), NHWC (2).
// CHECK-LABEL: func.func private @__dg_conv2d_nhwc_0(%arg0: memref<2x9x7x4xf32>, %arg1: memref<6x4x3x3xf32>, %arg2: memref<2x5x7x6xf32>)
// CHECK: %[[C2:.*]] = arith.constant 2 : i64
// CHECK-NEXT: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-NEXT: %[[C9:.*]] = arith.constant 9 : i64
// CHECK-NEXT: %[[C7:.*]] = arith.constant 7 : i64
// CHECK: %[[F32:.*]] = arith.constant 6 : i32
// CHECK-NEXT: %[[NHWC:.*]] = arith.constant 2 : i32
// CHECK-NEXT: call @__fusegrad_conv2d({{.*}}, %[[F32]], %[[NHWC]])
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @__dg_conv2d_nhwc_input_grad_0(
// CHECK: %[[WHICH:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[F32:.*]] = arith.constant 6 : i32
// CHECK-NEXT: %[[NHWC:.*]] = arith.constant 2 : i32
// CHECK-NEXT: call @__fusegrad_conv2d_backward({{.*}}, %[[WHICH]], %[[F32]], %[[NHWC]])
// CHECK-LABEL: func.func private @__dg_conv2d_nhwc_weight_grad_0(
// CHECK: %[[WHICH:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[F32:.*]] = arith.constant 6 : i32
// CHECK-NEXT: %[[NHWC:.*]] = arith.constant 2 : i32
// CHECK-NEXT: call @__fusegrad_conv2d_backward({{.*}}, %[[WHICH]], %[[F32]], %[[NHWC]])
// CHECK: llvm.func @__fusegrad_activation(
// An f32 forward on NHWC buffers zeroes the output and adds the convolution into it in
// place (no result to copy); f64, or a failing call, takes at::convolution and a copy.
// CHECK: llvm.func @__fusegrad_conv_into(
// CHECK: llvm.cond_br %{{.*}}, ^[[ADD:.*]], ^[[GENERIC:.*]]
// CHECK: llvm.call @aoti_torch_zero_
// CHECK: llvm.call @aoti_torch_cpu_mkldnn__convolution_pointwise_binary_
// CHECK: llvm.cond_br %{{.*}}, ^{{.*}}, ^[[GENERIC]]
// CHECK: llvm.call @aoti_torch_cpu_convolution(
func.func @f(%x: tensor<2x9x7x4xf32>, %w: tensor<6x4x3x3xf32>) -> (tensor<2x9x7x4xf32>, tensor<6x4x3x3xf32>) {
  %y = "dg.conv2d_nhwc"(%x, %w) {stride = array<i64: 2, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x9x7x4xf32>, tensor<6x4x3x3xf32>) -> tensor<2x5x7x6xf32>
  %dx = "dg.conv2d_nhwc_input_grad"(%y, %w) {stride = array<i64: 2, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, input_shape = array<i64: 2, 9, 7, 4>} : (tensor<2x5x7x6xf32>, tensor<6x4x3x3xf32>) -> tensor<2x9x7x4xf32>
  %dw = "dg.conv2d_nhwc_weight_grad"(%x, %y) {stride = array<i64: 2, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, weight_shape = array<i64: 6, 4, 3, 3>} : (tensor<2x9x7x4xf32>, tensor<2x5x7x6xf32>) -> tensor<6x4x3x3xf32>
  return %dx, %dw : tensor<2x9x7x4xf32>, tensor<6x4x3x3xf32>
}

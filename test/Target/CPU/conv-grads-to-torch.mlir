// The gradients of a convolution on the CPU: dg-outline-conv-grads (in dg-cpu-linalg)
// turns each f32/f64 dg.conv2d_input_grad / conv2d_weight_grad into a call of a private
// function holding just that op, tagged dg.conv2d_backward; after bufferization,
// dg-conv-to-torch replaces that function's body (the decomposition into forward
// convolutions) by one call of PyTorch's convolution_backward, asking for the one
// gradient (which = 0: input, 1: weight), and the layout its activations are passed in
// (0: as they are, NCHW; 1: channels-last copies, which `layout=auto` picks for a grouped
// conv when measured faster). Integer gradients keep the decomposition.
// RUN: fusegrad-opt %s -p 'dg-outline-conv-grads' | filecheck %s --check-prefix=OUTLINE
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize,dg-conv-to-torch{layout=nchw}' | filecheck %s
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize,dg-conv-to-torch{layout=channels-last}' | filecheck %s --check-prefix=CL

// OUTLINE-LABEL: func.func private @__dg_conv2d_input_grad_0(%arg0: tensor<2x6x5x4xf32>, %arg1: tensor<6x2x3x2xf32>) -> tensor<2x4x9x7xf32> attributes {dg.conv2d_backward = {dilation = array<i64: 1, 1>, groups = 2 : i64, input_shape = array<i64: 2, 4, 9, 7>, op = "conv2d_input_grad", padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}}
// OUTLINE-NEXT: "dg.conv2d_input_grad"(%arg0, %arg1)
// OUTLINE-LABEL: func.func @input_grad(
// OUTLINE-NEXT: call @__dg_conv2d_input_grad_0(%arg0, %arg1)
// OUTLINE-LABEL: func.func private @__dg_conv2d_weight_grad_0(
// OUTLINE-SAME: op = "conv2d_weight_grad"
// OUTLINE-LABEL: func.func @weight_grad(
// OUTLINE-NEXT: call @__dg_conv2d_weight_grad_0(%arg0, %arg1)
// OUTLINE-LABEL: func.func @iweight_grad(
// OUTLINE-NEXT: "dg.conv2d_weight_grad"

// The outlined function's body is one library call: grad_output, input (here the output
// buffer %arg2), weight, their dims, stride, padding, dilation, groups, which = 0, f32 (6),
// layout.
// CHECK-LABEL: func.func private @__dg_conv2d_input_grad_0(%arg0: memref<2x6x5x4xf32>, %arg1: memref<6x2x3x2xf32>, %arg2: memref<2x4x9x7xf32>)
// CHECK: %[[GO:.*]] = memref.extract_aligned_pointer_as_index %arg0
// CHECK: %[[X:.*]] = memref.extract_aligned_pointer_as_index %arg2
// CHECK: %[[W:.*]] = memref.extract_aligned_pointer_as_index %arg1
// CHECK: %[[WHICH:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[F32:.*]] = arith.constant 6 : i32
// CHECK-NEXT: %[[NCHW:.*]] = arith.constant 0 : i32
// CHECK-NEXT: call @__fusegrad_conv2d_backward({{.*}}, %[[WHICH]], %[[F32]], %[[NCHW]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i32, i32, i32) -> ()
// CHECK-NEXT: return
// CL-LABEL: func.func private @__dg_conv2d_input_grad_0(
// CL: %[[F32:.*]] = arith.constant 6 : i32
// CL-NEXT: %[[LAST:.*]] = arith.constant 1 : i32
// CL-NEXT: call @__fusegrad_conv2d_backward({{.*}}, %[[F32]], %[[LAST]])
// CL: llvm.func @__fusegrad_channels_last(
// CL: llvm.call @aoti_torch_empty_strided(
// CHECK-LABEL: func.func @input_grad(
// CHECK: call @__dg_conv2d_input_grad_0(%arg0, %arg1, %{{.*}}) : (memref<2x6x5x4xf32>, memref<6x2x3x2xf32>, memref<2x4x9x7xf32>) -> ()
// The weight gradient: input %arg0, weight (the output buffer) %arg2, which = 1, f64 (7).
// CHECK-LABEL: func.func private @__dg_conv2d_weight_grad_0(
// CHECK: %[[GO:.*]] = memref.extract_aligned_pointer_as_index %arg1
// CHECK: %[[X:.*]] = memref.extract_aligned_pointer_as_index %arg0
// CHECK: %[[W:.*]] = memref.extract_aligned_pointer_as_index %arg2
// CHECK: %[[WHICH:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[F64:.*]] = arith.constant 7 : i32
// CHECK-NEXT: %[[NCHW:.*]] = arith.constant 0 : i32
// CHECK-NEXT: call @__fusegrad_conv2d_backward({{.*}}, %[[WHICH]], %[[F64]], %[[NCHW]])
// CHECK-NEXT: return
// CHECK-LABEL: func.func @weight_grad(
// CHECK: call @__dg_conv2d_weight_grad_0(
// CHECK-NOT: linalg.conv
// An i64 gradient is not outlined: its decomposition stays (transposes and a conv).
// CHECK-LABEL: func.func @iweight_grad(
// CHECK: linalg.transpose
// CHECK: linalg.conv_2d_nchw_fchw
// CHECK: llvm.func @aoti_torch_cpu_convolution_backward(
// CHECK: func.func private @__fusegrad_conv2d_backward(
// CHECK: llvm.call @aoti_torch_cpu_convolution_backward(

func.func @input_grad(%g: tensor<2x6x5x4xf32>, %w: tensor<6x2x3x2xf32>) -> tensor<2x4x9x7xf32> {
  %0 = "dg.conv2d_input_grad"(%g, %w) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64, input_shape = array<i64: 2, 4, 9, 7>} : (tensor<2x6x5x4xf32>, tensor<6x2x3x2xf32>) -> tensor<2x4x9x7xf32>
  return %0 : tensor<2x4x9x7xf32>
}

func.func @weight_grad(%x: tensor<2x4x9x7xf64>, %g: tensor<2x6x5x4xf64>) -> tensor<6x2x3x2xf64> {
  %0 = "dg.conv2d_weight_grad"(%x, %g) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64, weight_shape = array<i64: 6, 2, 3, 2>} : (tensor<2x4x9x7xf64>, tensor<2x6x5x4xf64>) -> tensor<6x2x3x2xf64>
  return %0 : tensor<6x2x3x2xf64>
}

func.func @iweight_grad(%x: tensor<1x1x4x4xi64>, %g: tensor<1x1x3x3xi64>) -> tensor<1x1x2x2xi64> {
  %0 = "dg.conv2d_weight_grad"(%x, %g) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, weight_shape = array<i64: 1, 1, 2, 2>} : (tensor<1x1x4x4xi64>, tensor<1x1x3x3xi64>) -> tensor<1x1x2x2xi64>
  return %0 : tensor<1x1x2x2xi64>
}

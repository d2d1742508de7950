// Round trip: the channels-last convolution ops parse, verify and print back unchanged.
// Activations are NHWC (x 2x9x7x4: 4 channels), weights OIHW, input_shape NHWC.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @conv_nhwc(
// CHECK-NEXT: %0 = "dg.conv2d_nhwc"(%arg0, %arg1) {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x9x7x4xf32>, tensor<6x2x3x2xf32>) -> tensor<2x5x4x6xf32>
// CHECK-NEXT: %1 = "dg.conv2d_nhwc_input_grad"(%0, %arg1) {dilation = array<i64: 1, 1>, groups = 2 : i64, input_shape = array<i64: 2, 9, 7, 4>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x5x4x6xf32>, tensor<6x2x3x2xf32>) -> tensor<2x9x7x4xf32>
// CHECK-NEXT: %2 = "dg.conv2d_nhwc_weight_grad"(%arg0, %0) {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>, weight_shape = array<i64: 6, 2, 3, 2>} : (tensor<2x9x7x4xf32>, tensor<2x5x4x6xf32>) -> tensor<6x2x3x2xf32>
func.func @conv_nhwc(%x: tensor<2x9x7x4xf32>, %w: tensor<6x2x3x2xf32>) -> (tensor<2x9x7x4xf32>, tensor<6x2x3x2xf32>) {
  %y = "dg.conv2d_nhwc"(%x, %w) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x9x7x4xf32>, tensor<6x2x3x2xf32>) -> tensor<2x5x4x6xf32>
  %dx = "dg.conv2d_nhwc_input_grad"(%y, %w) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64, input_shape = array<i64: 2, 9, 7, 4>} : (tensor<2x5x4x6xf32>, tensor<6x2x3x2xf32>) -> tensor<2x9x7x4xf32>
  %dw = "dg.conv2d_nhwc_weight_grad"(%x, %y) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64, weight_shape = array<i64: 6, 2, 3, 2>} : (tensor<2x9x7x4xf32>, tensor<2x5x4x6xf32>) -> tensor<6x2x3x2xf32>
  return %dx, %dw : tensor<2x9x7x4xf32>, tensor<6x2x3x2xf32>
}

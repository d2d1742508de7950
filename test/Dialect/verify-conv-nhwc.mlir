// The channels-last convolution ops check their shapes as their NCHW ops do, on the
// NHWC activations, and name themselves in the error.
// RUN: fusegrad-opt %s --split-input-file --verify-diagnostics

func.func @channels(%x: tensor<1x5x5x3xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d_nhwc' op 3 input channels, 4 output channels and weight in-channels 2 do not fit groups=1}}
  %0 = "dg.conv2d_nhwc"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x5x5x3xf32>, tensor<4x2x3x3xf32>) -> tensor<1x3x3x4xf32>
  return
}

// -----

func.func @rank(%x: tensor<5x5x2xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d_nhwc' op activations must be rank 4 (NHWC), got rank 3}}
  %0 = "dg.conv2d_nhwc"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<5x5x2xf32>, tensor<4x2x3x3xf32>) -> tensor<1x3x3x4xf32>
  return
}

// -----

func.func @nchw_result(%x: tensor<1x5x5x2xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d_nhwc' op}}
  %0 = "dg.conv2d_nhwc"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x5x5x2xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @grad_shape(%g: tensor<1x3x3x4xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d_nhwc_input_grad' op grad has shape [1, 4, 3, 3], but the convolution of input [1, 2, 6, 5] with weight [4, 2, 3, 3] has shape [1, 4, 4, 3]}}
  %0 = "dg.conv2d_nhwc_input_grad"(%g, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, input_shape = array<i64: 1, 6, 5, 2>} : (tensor<1x3x3x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x6x5x2xf32>
  return
}

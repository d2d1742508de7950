// Convolution gradients on the CUDA target: outlined as on the CPU
// (dg-outline-conv-grads), each is one `conv2d_grad` plan step, PyTorch's
// convolution_backward (cuDNN) asked for the one gradient; the out-param buffer
// stands in for the operand whose values it does not read. No kernel computes them.
// RUN: %python -m fusegrad.codegen.cuda.compile %s | filecheck %s

// CHECK-LABEL: func @input_grad (2x6x5x4 f32, 6x2x3x2 f32) -> (2x4x9x7 f32)
// CHECK-NEXT: conv2d_grad grad="arg0" input=null weight="arg1" out="arg2" stride=[2,2] padding=[1,1] dilation=[1,1] groups=2
// CHECK-NOT: launch
// CHECK-LABEL: func @weight_grad (2x4x9x7 f32, 2x6x5x4 f32) -> (6x2x3x2 f32)
// CHECK-NEXT: conv2d_grad grad="arg1" input="arg0" weight=null out="arg2"
// CHECK-NOT: launch

func.func @input_grad(%g: tensor<2x6x5x4xf32>, %w: tensor<6x2x3x2xf32>) -> tensor<2x4x9x7xf32> {
  %0 = "dg.conv2d_input_grad"(%g, %w) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64, input_shape = array<i64: 2, 4, 9, 7>} : (tensor<2x6x5x4xf32>, tensor<6x2x3x2xf32>) -> tensor<2x4x9x7xf32>
  return %0 : tensor<2x4x9x7xf32>
}
func.func @weight_grad(%x: tensor<2x4x9x7xf32>, %g: tensor<2x6x5x4xf32>) -> tensor<6x2x3x2xf32> {
  %0 = "dg.conv2d_weight_grad"(%x, %g) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64, weight_shape = array<i64: 6, 2, 3, 2>} : (tensor<2x4x9x7xf32>, tensor<2x6x5x4xf32>) -> tensor<6x2x3x2xf32>
  return %0 : tensor<6x2x3x2xf32>
}

// Round trip: matmul, matmul_add, conv2d and conv2d's gradient ops parse, verify and print back unchanged.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @contractions(
// CHECK-NEXT: %0 = "dg.matmul"(%arg0, %arg1) : (tensor<4x2x3xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
// CHECK-NEXT: %1 = "dg.conv2d"(%arg2, %arg3) {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x8x8xf32>
// CHECK-NEXT: %2 = "dg.matmul_add"(%arg0, %arg1, %0) : (tensor<4x2x3xf32>, tensor<4x3x5xf32>, tensor<4x2x5xf32>) -> tensor<4x2x5xf32>
// CHECK-NEXT: return %0, %1, %2 : tensor<4x2x5xf32>, tensor<1x6x8x8xf32>, tensor<4x2x5xf32>
func.func @contractions(%arg0: tensor<4x2x3xf32>, %arg1: tensor<4x3x5xf32>, %arg2: tensor<1x4x8x8xf32>, %arg3: tensor<6x2x3x3xf32>) -> (tensor<4x2x5xf32>, tensor<1x6x8x8xf32>, tensor<4x2x5xf32>) {
  %0 = "dg.matmul"(%arg0, %arg1) : (tensor<4x2x3xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
  %1 = "dg.conv2d"(%arg2, %arg3) {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x8x8xf32>
  %2 = "dg.matmul_add"(%arg0, %arg1, %0) : (tensor<4x2x3xf32>, tensor<4x3x5xf32>, tensor<4x2x5xf32>) -> tensor<4x2x5xf32>
  return %0, %1, %2 : tensor<4x2x5xf32>, tensor<1x6x8x8xf32>, tensor<4x2x5xf32>
}

// The gradients of a stride-2 grouped conv2d of a 1x4x9x7 input with a 6x2x3x2 weight
// (output 1x6x5x4): the input gradient takes the cotangent and the weight, the weight
// gradient the input and the cotangent; each names the shape of the operand it lacks.
// CHECK-LABEL: func.func @conv_grads(
// CHECK-NEXT: %0 = "dg.conv2d_input_grad"(%arg0, %arg1) {dilation = array<i64: 1, 1>, groups = 2 : i64, input_shape = array<i64: 1, 4, 9, 7>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<1x6x5x4xf64>, tensor<6x2x3x2xf64>) -> tensor<1x4x9x7xf64>
// CHECK-NEXT: %1 = "dg.conv2d_weight_grad"(%arg2, %arg0) {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>, weight_shape = array<i64: 6, 2, 3, 2>} : (tensor<1x4x9x7xf64>, tensor<1x6x5x4xf64>) -> tensor<6x2x3x2xf64>
// CHECK-NEXT: return %0, %1 : tensor<1x4x9x7xf64>, tensor<6x2x3x2xf64>
func.func @conv_grads(%arg0: tensor<1x6x5x4xf64>, %arg1: tensor<6x2x3x2xf64>, %arg2: tensor<1x4x9x7xf64>) -> (tensor<1x4x9x7xf64>, tensor<6x2x3x2xf64>) {
  %0 = "dg.conv2d_input_grad"(%arg0, %arg1) {dilation = array<i64: 1, 1>, groups = 2 : i64, input_shape = array<i64: 1, 4, 9, 7>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<1x6x5x4xf64>, tensor<6x2x3x2xf64>) -> tensor<1x4x9x7xf64>
  %1 = "dg.conv2d_weight_grad"(%arg2, %arg0) {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>, weight_shape = array<i64: 6, 2, 3, 2>} : (tensor<1x4x9x7xf64>, tensor<1x6x5x4xf64>) -> tensor<6x2x3x2xf64>
  return %0, %1 : tensor<1x4x9x7xf64>, tensor<6x2x3x2xf64>
}

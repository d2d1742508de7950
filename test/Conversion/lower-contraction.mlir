// matmul -> linalg.matmul / batch_matmul on a zero fill (integer matmuls: a
// linalg.generic contraction, which no library takes); conv2d -> padded
// linalg.conv_2d_nchw_fchw, or the grouped form for groups > 1; the conv2d gradient ops ->
// their decomposition into forward convolutions.
// RUN: fusegrad-opt %s -p dg-lower-to-linalg | filecheck %s

// CHECK-LABEL: func.func @matmul
// CHECK: %[[Z:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<3x5xf32>)
// CHECK: linalg.matmul ins(%arg0, %arg1 : tensor<3x4xf32>, tensor<4x5xf32>) outs(%[[Z]] : tensor<3x5xf32>)
func.func @matmul(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> tensor<3x5xf32> {
  %0 = "dg.matmul"(%a, %b) : (tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// CHECK-LABEL: func.func @integer_batch_matmul
// CHECK-NOT: linalg.batch_matmul
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel", "reduction"]{{.*}} ins(%arg0, %arg1 : tensor<2x3x4xi32>, tensor<2x4x5xi32>)
// CHECK: arith.muli
// CHECK: arith.addi
func.func @integer_batch_matmul(%a: tensor<2x3x4xi32>, %b: tensor<2x4x5xi32>) -> tensor<2x3x5xi32> {
  %0 = "dg.matmul"(%a, %b) : (tensor<2x3x4xi32>, tensor<2x4x5xi32>) -> tensor<2x3x5xi32>
  return %0 : tensor<2x3x5xi32>
}

// Batch dims beyond one are collapsed, then expanded back.
// CHECK-LABEL: func.func @matmul4d
// CHECK: tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2], [3]] : tensor<2x3x4x5xf32> into tensor<6x4x5xf32>
// CHECK: linalg.batch_matmul
// CHECK: tensor.expand_shape {{.*}} : tensor<6x4x6xf32> into tensor<2x3x4x6xf32>
func.func @matmul4d(%a: tensor<2x3x4x5xf32>, %b: tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32> {
  %0 = "dg.matmul"(%a, %b) : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32>
  return %0 : tensor<2x3x4x6xf32>
}

// CHECK-LABEL: func.func @conv
// CHECK: tensor.insert_slice %arg0 into %{{.*}}[0, 0, 1, 1] [1, 3, 8, 8] [1, 1, 1, 1] : tensor<1x3x8x8xf32> into tensor<1x3x10x10xf32>
// CHECK: linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
func.func @conv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32> {
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// CHECK-LABEL: func.func @grouped
// CHECK: tensor.expand_shape %arg0 {{.*}} : tensor<1x4x6x6xf32> into tensor<1x2x2x6x6xf32>
// CHECK: tensor.expand_shape %arg1 {{.*}} : tensor<6x2x3x3xf32> into tensor<2x3x2x3x3xf32>
// CHECK: linalg.conv_2d_ngchw_gfchw
// CHECK: tensor.collapse_shape {{.*}} : tensor<1x2x3x4x4xf32> into tensor<1x6x4x4xf32>
func.func @grouped(%x: tensor<1x4x6x6xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32> {
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2} : (tensor<1x4x6x6xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
  return %0 : tensor<1x6x4x4xf32>
}

// The gradient ops lower to their decomposition into forward convolutions, emitted as
// dg ops and lowered in turn. Input gradient: the cotangent dilated by the stride and
// padded (one insert_slice with strides 2), the weight's channels swapped (transpose)
// and its window flipped (a generic reading index 2 - d), then a stride-1 conv.
// CHECK-LABEL: func.func @input_grad
// CHECK: tensor.insert_slice %arg0 into %{{.*}}[0, 0, 1, 1] [1, 4, 4, 4] [1, 1, 2, 2] : tensor<1x4x4x4xf32> into tensor<1x4x10x10xf32>
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x4x3x3x3xf32>) outs(%{{.*}} : tensor<1x3x4x3x3xf32>) permutation = [0, 2, 1, 3, 4]
// CHECK: linalg.generic
// CHECK: linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%{{.*}}, %{{.*}} : tensor<1x4x10x10xf32>, tensor<3x4x3x3xf32>) outs(%{{.*}} : tensor<1x3x8x8xf32>)
// CHECK-NOT: dg.
func.func @input_grad(%g: tensor<1x4x4x4xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x3x8x8xf32> {
  %0 = "dg.conv2d_input_grad"(%g, %w) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, input_shape = array<i64: 1, 3, 8, 8>} : (tensor<1x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// Weight gradient: a conv of the input with channels as batch (transpose) and the
// cotangent as the kernel (transpose), stride and dilation swapped, transposed back
// and cropped to the kernel size.
// CHECK-LABEL: func.func @weight_grad
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x1x3x8x8xf32>) outs(%{{.*}} : tensor<3x1x1x8x8xf32>) permutation = [2, 1, 0, 3, 4]
// CHECK: linalg.transpose ins(%{{.*}} : tensor<1x1x4x4x4xf32>) outs(%{{.*}} : tensor<1x4x1x4x4xf32>) permutation = [1, 2, 0, 3, 4]
// CHECK: linalg.conv_2d_nchw_fchw {dilations = dense<2> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>} ins(%{{.*}}, %{{.*}} : tensor<3x1x10x10xf32>, tensor<4x1x4x4xf32>) outs(%{{.*}} : tensor<3x4x4x4xf32>)
// CHECK: linalg.transpose ins(%{{.*}} : tensor<3x4x4x4xf32>) outs(%{{.*}} : tensor<4x3x4x4xf32>) permutation = [1, 0, 2, 3]
// CHECK: tensor.extract_slice %{{.*}}[0, 0, 0, 0] [4, 3, 3, 3] [1, 1, 1, 1] : tensor<4x3x4x4xf32> to tensor<4x3x3x3xf32>
// CHECK-NOT: dg.
func.func @weight_grad(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x4x4xf32>) -> tensor<4x3x3x3xf32> {
  %0 = "dg.conv2d_weight_grad"(%x, %g) {stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64, weight_shape = array<i64: 4, 3, 3, 3>} : (tensor<1x3x8x8xf32>, tensor<1x4x4x4xf32>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

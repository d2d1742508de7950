// Round trip: matmul and conv2d parse, verify and print back unchanged.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @contractions(
// CHECK-NEXT: %0 = "dg.matmul"(%arg0, %arg1) : (tensor<4x2x3xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
// CHECK-NEXT: %1 = "dg.conv2d"(%arg2, %arg3) {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x8x8xf32>
// CHECK-NEXT: return %0, %1 : tensor<4x2x5xf32>, tensor<1x6x8x8xf32>
func.func @contractions(%arg0: tensor<4x2x3xf32>, %arg1: tensor<4x3x5xf32>, %arg2: tensor<1x4x8x8xf32>, %arg3: tensor<6x2x3x3xf32>) -> (tensor<4x2x5xf32>, tensor<1x6x8x8xf32>) {
  %0 = "dg.matmul"(%arg0, %arg1) : (tensor<4x2x3xf32>, tensor<4x3x5xf32>) -> tensor<4x2x5xf32>
  %1 = "dg.conv2d"(%arg2, %arg3) {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x8x8xf32>
  return %0, %1 : tensor<4x2x5xf32>, tensor<1x6x8x8xf32>
}

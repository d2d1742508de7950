// dg-transpose-matmul-results: a matmul read only through transposes of its
// last two dims computes the transposed product, B^T A^T; a transposed
// operand cancels (here the LM head's weight gradient, h^T @ dy, which a
// tied embedding reads transposed).
// RUN: fusegrad-opt %s -p dg-transpose-matmul-results | filecheck %s

// CHECK-LABEL: func.func @tied(
// CHECK-SAME: %[[H:[^:]*]]: tensor<16x4xf32>, %[[DY:[^:]*]]: tensor<16x8xf32>, %[[E:[^:]*]]: tensor<8x4xf32>
// CHECK: %[[DYT:.*]] = "dg.transpose"(%[[DY]]) {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
// CHECK: %[[P:.*]] = "dg.matmul"(%[[DYT]], %[[H]]) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
// CHECK: "dg.add"(%[[E]], %[[P]])
// CHECK-NOT: "dg.transpose"
func.func @tied(%h: tensor<16x4xf32>, %dy: tensor<16x8xf32>, %e: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %ht = "dg.transpose"(%h) {perm = array<i64: 1, 0>} : (tensor<16x4xf32>) -> tensor<4x16xf32>
  %w = "dg.matmul"(%ht, %dy) : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %wt = "dg.transpose"(%w) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %g = "dg.add"(%e, %wt) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return %g : tensor<8x4xf32>
}

// Batched: the last two dims swap, the batch dim stays.
// CHECK-LABEL: func.func @batched(
// CHECK: %[[BT:.*]] = "dg.transpose"(%arg1) {perm = array<i64: 0, 2, 1>} : (tensor<2x3x5xf32>) -> tensor<2x5x3xf32>
// CHECK: %[[AT:.*]] = "dg.transpose"(%arg0) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
// CHECK: "dg.matmul"(%[[BT]], %[[AT]]) : (tensor<2x5x3xf32>, tensor<2x3x4xf32>) -> tensor<2x5x4xf32>
func.func @batched(%a: tensor<2x4x3xf32>, %b: tensor<2x3x5xf32>) -> tensor<2x5x4xf32> {
  %m = "dg.matmul"(%a, %b) : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  %t = "dg.transpose"(%m) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x5xf32>) -> tensor<2x5x4xf32>
  return %t : tensor<2x5x4xf32>
}

// Also read untransposed: unchanged.
// CHECK-LABEL: func.func @also_plain(
// CHECK: %[[M:.*]] = "dg.matmul"(%arg0, %arg1)
// CHECK: "dg.transpose"(%[[M]])
func.func @also_plain(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %m = "dg.matmul"(%a, %b) : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  %t = "dg.transpose"(%m) {perm = array<i64: 1, 0>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m, %t : tensor<4x4xf32>, tensor<4x4xf32>
}

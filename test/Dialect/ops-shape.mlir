// Round trip: every data-movement op parses, verifies and prints back unchanged.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @shape_ops(
// CHECK-NEXT: %0 = "dg.broadcast_in_dim"(%arg0) {dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %1 = "dg.reshape"(%arg1) : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %2 = "dg.transpose"(%arg1) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %3 = "dg.slice"(%arg1) {limit = array<i64: 2, 3>, start = array<i64: 0, 1>, stride = array<i64: 1, 2>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %4 = "dg.reverse"(%arg1) {dims = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %5 = "dg.pad"(%arg1) {high = array<i64: 0, 2>, interior = array<i64: 1, 0>, low = array<i64: 1, 0>, value = 5.000000e-01 : f64} : (tensor<2x3xf32>) -> tensor<4x5xf32>
// CHECK-NEXT: %6 = "dg.concatenate"(%arg1, %arg1) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<2x1xf32>, tensor<2x3xf32>, tensor<4x5xf32>, tensor<4x3xf32>
func.func @shape_ops(%arg0: tensor<3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<2x1xf32>, tensor<2x3xf32>, tensor<4x5xf32>, tensor<4x3xf32>) {
  %0 = "dg.broadcast_in_dim"(%arg0) {dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "dg.reshape"(%arg1) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %2 = "dg.transpose"(%arg1) {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %3 = "dg.slice"(%arg1) {limit = array<i64: 2, 3>, start = array<i64: 0, 1>, stride = array<i64: 1, 2>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  %4 = "dg.reverse"(%arg1) {dims = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "dg.pad"(%arg1) {high = array<i64: 0, 2>, interior = array<i64: 1, 0>, low = array<i64: 1, 0>, value = 5.000000e-01 : f64} : (tensor<2x3xf32>) -> tensor<4x5xf32>
  %6 = "dg.concatenate"(%arg1, %arg1) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x3xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<2x1xf32>, tensor<2x3xf32>, tensor<4x5xf32>, tensor<4x3xf32>
}

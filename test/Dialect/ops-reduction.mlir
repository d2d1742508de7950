// Round trip: every reduction parses, verifies and prints back unchanged.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @reductions(
// CHECK-NEXT: %0 = "dg.reduce_sum"(%arg0) {dims = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
// CHECK-NEXT: %1 = "dg.reduce_max"(%arg0) {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
// CHECK-NEXT: %2 = "dg.reduce_min"(%arg0) {dims = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %3 = "dg.argmax"(%arg0) {dim = 1 : i64} : (tensor<2x3xf32>) -> tensor<2xi64>
// CHECK-NEXT: %4 = "dg.argmin"(%arg0) {dim = 0 : i64} : (tensor<2x3xf32>) -> tensor<3xi64>
// CHECK-NEXT: return %0, %1, %2, %3, %4 : tensor<2xf32>, tensor<f32>, tensor<2x3xf32>, tensor<2xi64>, tensor<3xi64>
func.func @reductions(%arg0: tensor<2x3xf32>) -> (tensor<2xf32>, tensor<f32>, tensor<2x3xf32>, tensor<2xi64>, tensor<3xi64>) {
  %0 = "dg.reduce_sum"(%arg0) {dims = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  %1 = "dg.reduce_max"(%arg0) {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  %2 = "dg.reduce_min"(%arg0) {dims = array<i64>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = "dg.argmax"(%arg0) {dim = 1 : i64} : (tensor<2x3xf32>) -> tensor<2xi64>
  %4 = "dg.argmin"(%arg0) {dim = 0 : i64} : (tensor<2x3xf32>) -> tensor<3xi64>
  return %0, %1, %2, %3, %4 : tensor<2xf32>, tensor<f32>, tensor<2x3xf32>, tensor<2xi64>, tensor<3xi64>
}

// CHECK-LABEL: func.func @evenly_read(
// CHECK-NEXT: %0 = "dg.reduce_max"(%arg0) {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
// CHECK-NEXT: %1 = "dg.evenly_read"(%arg0, %0) : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: return %1 : tensor<f32>
func.func @evenly_read(%arg0: tensor<2x3xf32>) -> tensor<f32> {
  %0 = "dg.reduce_max"(%arg0) {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  %1 = "dg.evenly_read"(%arg0, %0) : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
  return %1 : tensor<f32>
}

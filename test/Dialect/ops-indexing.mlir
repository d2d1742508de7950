// Round trip: gather, index_select and the scatters parse, verify and print back unchanged.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @indexing(
// CHECK-NEXT: %0 = "dg.gather"(%arg0, %arg1) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
// CHECK-NEXT: %1 = "dg.index_select"(%arg0, %arg2) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<4xi32>) -> tensor<2x4xf32>
// CHECK-NEXT: %2 = "dg.scatter_add"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %3 = "dg.scatter"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %4 = "dg.scatter_max"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %5 = "dg.scatter_min"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %6 = "dg.scatter_mul"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %0, %1, %2, %3, %4, %5, %6 : tensor<2x2xf32>, tensor<2x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
func.func @indexing(%arg0: tensor<2x3xf32>, %arg1: tensor<2x2xi64>, %arg2: tensor<4xi32>, %arg3: tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = "dg.gather"(%arg0, %arg1) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  %1 = "dg.index_select"(%arg0, %arg2) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<4xi32>) -> tensor<2x4xf32>
  %2 = "dg.scatter_add"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  %3 = "dg.scatter"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  %4 = "dg.scatter_max"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  %5 = "dg.scatter_min"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  %6 = "dg.scatter_mul"(%arg0, %arg1, %arg3) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2x2xf32>, tensor<2x4xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// Round trip: scans parse, verify and print back unchanged; max and min also give the
// i64 index of the running extreme, the others one result; a symbolic scanned dim.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @scans(
// CHECK-NEXT: %0 = "dg.scan"(%arg0) {combiner = "add", dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %1:2 = "dg.scan"(%arg0) {combiner = "max", dim = 0 : i64, reverse = 1 : i64} : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
// CHECK-NEXT: %2 = "dg.scan"(%arg1) {combiner = "mul", dim = 0 : i64, reverse = 0 : i64} : (tensor<4xi32>) -> tensor<4xi32>
// CHECK-NEXT: %3 = "dg.scan_mul_grad"(%arg0, %arg0) {dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @scans(%x: tensor<2x3xf32>, %i: tensor<4xi32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<4xi32>, tensor<2x3xf32>) {
  %0 = "dg.scan"(%x) {combiner = "add", dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1:2 = "dg.scan"(%x) {combiner = "max", dim = 0 : i64, reverse = 1 : i64} : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
  %2 = "dg.scan"(%i) {combiner = "mul", dim = 0 : i64, reverse = 0 : i64} : (tensor<4xi32>) -> tensor<4xi32>
  %3 = "dg.scan_mul_grad"(%x, %x) {dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1#0, %1#1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi64>, tensor<4xi32>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @symbolic(
// CHECK-NEXT: "dg.scan"(%arg0) {combiner = "logaddexp", dim = 0 : i64, reverse = 0 : i64} : (tensor<?x8xf64, "s0">) -> tensor<?x8xf64, "s0">
func.func @symbolic(%x: tensor<?x8xf64, "s0">) -> tensor<?x8xf64, "s0"> {
  %0 = "dg.scan"(%x) {combiner = "logaddexp", dim = 0 : i64, reverse = 0 : i64} : (tensor<?x8xf64, "s0">) -> tensor<?x8xf64, "s0">
  return %0 : tensor<?x8xf64, "s0">
}

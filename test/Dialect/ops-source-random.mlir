// Round trip: source (constant, full, iota) and random ops parse, verify and print back unchanged.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @sources(
// CHECK-NEXT: %0 = "dg.constant"() {value = dense<{{\[\[}}1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00{{\]\]}}> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
// CHECK-NEXT: %1 = "dg.full"() {value = 1.500000e+00 : f64} : () -> tensor<2x3xf32>
// CHECK-NEXT: %2 = "dg.iota"() {dim = 1 : i64} : () -> tensor<2x3xi64>
// CHECK-NEXT: return %0, %1, %2 : tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x3xi64>
func.func @sources() -> (tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x3xi64>) {
  %0 = "dg.constant"() {value = dense<[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
  %1 = "dg.full"() {value = 1.500000e+00 : f64} : () -> tensor<2x3xf32>
  %2 = "dg.iota"() {dim = 1 : i64} : () -> tensor<2x3xi64>
  return %0, %1, %2 : tensor<2x2xf32>, tensor<2x3xf32>, tensor<2x3xi64>
}

// CHECK-LABEL: func.func @random(
// CHECK-NEXT: %0 = "dg.rng_uniform"(%arg0) : (tensor<i64>) -> tensor<4xf32>
// CHECK-NEXT: %1 = "dg.rng_bernoulli"(%arg0) {p = 2.500000e-01 : f64} : (tensor<i64>) -> tensor<4xf32>
// CHECK-NEXT: return %0, %1 : tensor<4xf32>, tensor<4xf32>
func.func @random(%arg0: tensor<i64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "dg.rng_uniform"(%arg0) : (tensor<i64>) -> tensor<4xf32>
  %1 = "dg.rng_bernoulli"(%arg0) {p = 2.500000e-01 : f64} : (tensor<i64>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

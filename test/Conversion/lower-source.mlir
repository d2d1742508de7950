// Sources: constants, fills, iota; random ops hash (seed, element number) in i32.
// RUN: fusegrad-opt %s -p dg-lower-to-linalg | filecheck %s

// CHECK-LABEL: func.func @sources
// CHECK: arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK: %[[V:.*]] = arith.constant 7 : i64
// CHECK: linalg.fill ins(%[[V]] : i64) outs(%{{.*}} : tensor<2x3xi64>)
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK: %[[C:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK: arith.sitofp %[[C]] : i64 to f32
func.func @sources() -> (tensor<2xf32>, tensor<2x3xi64>, tensor<2x3xf32>) {
  %0 = "dg.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<2xf32>
  %1 = "dg.full"() {value = 7.0 : f64} : () -> tensor<2x3xi64>
  %2 = "dg.iota"() {dim = 1} : () -> tensor<2x3xf32>
  return %0, %1, %2 : tensor<2xf32>, tensor<2x3xi64>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @rng
// CHECK: %[[SEED:.*]] = tensor.extract %arg0[] : tensor<i64>
// CHECK: arith.trunci %[[SEED]] : i64 to i32
// CHECK: linalg.generic
// CHECK: arith.muli {{.*}} : i32
// CHECK: arith.uitofp {{.*}} : i32 to f64
// CHECK: arith.cmpf olt
// CHECK: arith.truncf {{.*}} : f64 to f32
func.func @rng(%seed: tensor<i64>) -> tensor<4x5xf32> {
  %0 = "dg.rng_bernoulli"(%seed) {p = 0.25 : f64} : (tensor<i64>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

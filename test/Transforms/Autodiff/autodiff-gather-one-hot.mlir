// RUN: fusegrad-opt %s -p dg-autodiff,dg-remat | filecheck %s

// A gather of one element per row (a loss's target logit): its gradient is a
// one-hot select, elementwise and fusible, not a scatter into a filled tensor;
// dg-remat has it recompute the mask from the saved indices.
// CHECK-LABEL: func.func @f_bwd(%arg0: tensor<4x1xi64>, %arg1: tensor<4x1xf32>)
// CHECK-NOT:  dg.scatter_add
// CHECK-DAG:  %[[IOTA:.*]] = "dg.iota"() {dim = 1 : i64} : () -> tensor<4x10xi64>
// CHECK-DAG:  %[[IDX:.*]] = "dg.broadcast_in_dim"(%arg0) {dims = array<i64: 0, 1>} : (tensor<4x1xi64>) -> tensor<4x10xi64>
// CHECK:      %[[HIT:.*]] = "dg.compare"(%[[IOTA]], %[[IDX]]) {direction = "eq"}
// CHECK:      %[[G:.*]] = "dg.broadcast_in_dim"(%arg1) {dims = array<i64: 0, 1>} : (tensor<4x1xf32>) -> tensor<4x10xf32>
// CHECK:      %[[ZERO:.*]] = "dg.full"() {value = 0.000000e+00 : f64} : () -> tensor<4x10xf32>
// CHECK:      "dg.select"(%[[HIT]], %[[G]], %[[ZERO]])
func.func @f(%x: tensor<4x10xf32>, %i: tensor<4x1xi64>) -> tensor<4x1xf32> {
  %0 = "dg.gather"(%x, %i) {dim = 1 : i64} : (tensor<4x10xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
  return %0 : tensor<4x1xf32>
}

// Several indices per row still scatter (they may repeat and must add up).
// CHECK-LABEL: func.func @g_bwd(
// CHECK:      "dg.scatter_add"
func.func @g(%x: tensor<4x10xf32>, %i: tensor<4x3xi64>) -> tensor<4x3xf32> {
  %0 = "dg.gather"(%x, %i) {dim = 1 : i64} : (tensor<4x10xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// dg-sink-gathers: a gather of a pointwise result gathers the pointwise op's
// operands instead; operands constant along the gathered dim (broadcasts over
// it, splat fulls) are rebuilt at the gathered shape. A cross-entropy's
// log-softmax is then never materialized: the gather reads the logits.
// RUN: fusegrad-opt %s -p dg-sink-gathers | filecheck %s

// CHECK-LABEL: func.func @log_softmax_pick(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>, %[[M:[^:]*]]: tensor<4xf32>, %[[L:[^:]*]]: tensor<4xf32>, %[[I:[^:]*]]: tensor<4x1xi64>
// CHECK-DAG: %[[MB:.*]] = "dg.broadcast_in_dim"(%[[M]]) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x1xf32>
// CHECK-DAG: %[[G:.*]] = "dg.gather"(%[[X]], %[[I]]) {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
// CHECK: %[[S:.*]] = "dg.sub"(%[[G]], %[[MB]]) : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
// CHECK: %[[LB:.*]] = "dg.broadcast_in_dim"(%[[L]]) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x1xf32>
// CHECK: %[[R:.*]] = "dg.sub"(%[[S]], %[[LB]])
// CHECK-NOT: tensor<4x8xf32>)
// CHECK: return %[[R]]
func.func @log_softmax_pick(%x: tensor<4x8xf32>, %m: tensor<4xf32>, %lse: tensor<4xf32>,
                            %i: tensor<4x1xi64>) -> tensor<4x1xf32> {
  %mb = "dg.broadcast_in_dim"(%m) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %s = "dg.sub"(%x, %mb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %lb = "dg.broadcast_in_dim"(%lse) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %ls = "dg.sub"(%s, %lb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = "dg.gather"(%ls, %i) {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
  return %g : tensor<4x1xf32>
}

// Indices that do not cover a dim other than `dim` (rows 0-1 of 4) read only
// part of the operand: left alone.
// CHECK-LABEL: func.func @partial_rows(
// CHECK: "dg.exp"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: "dg.gather"
func.func @partial_rows(%x: tensor<4x8xf32>, %i: tensor<2x1xi64>) -> tensor<2x1xf32> {
  %e = "dg.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = "dg.gather"(%e, %i) {dim = 1 : i64} : (tensor<4x8xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
  return %g : tensor<2x1xf32>
}

// A pointwise value also used elsewhere stays; the gather still moves.
// CHECK-LABEL: func.func @shared(
// CHECK: %[[E:.*]] = "dg.exp"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[G:.*]] = "dg.gather"(%arg0, %arg1)
// CHECK: "dg.exp"(%[[G]]) : (tensor<4x1xf32>) -> tensor<4x1xf32>
func.func @shared(%x: tensor<4x8xf32>, %i: tensor<4x1xi64>) -> (tensor<4x1xf32>, tensor<4x8xf32>) {
  %e = "dg.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = "dg.gather"(%e, %i) {dim = 1 : i64} : (tensor<4x8xf32>, tensor<4x1xi64>) -> tensor<4x1xf32>
  return %g, %e : tensor<4x1xf32>, tensor<4x8xf32>
}

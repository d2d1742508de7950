// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// Bias add then row sum: the bias gradient sums the broadcast dim away, the
// sum's gradient broadcasts back; nothing from the forward is saved.
// CHECK-LABEL: func.func @f_fwd(
// CHECK-SAME: -> tensor<2xf32>
// CHECK-LABEL: func.func @f_bwd(%arg0: tensor<2xf32>) -> (tensor<2x3xf32>, tensor<3xf32>)
// CHECK:      %[[G:.*]] = "dg.broadcast_in_dim"(%arg0) {dims = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x3xf32>
// CHECK:      %[[GB:.*]] = "dg.reduce_sum"(%[[G]]) {dims = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<3xf32>
// CHECK:      return %[[G]], %[[GB]]
func.func @f(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
  %0 = "dg.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
  %1 = "dg.add"(%x, %0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "dg.reduce_sum"(%1) {dims = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return %2 : tensor<2xf32>
}

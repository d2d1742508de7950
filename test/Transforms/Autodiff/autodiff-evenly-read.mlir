// dg.evenly_read (max(), min(), median() without a dim): the cotangent divided by the
// number of elements equal to the value (NaN matching NaN), selected onto them; the
// value's producer gets none.
// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// CHECK-LABEL: func.func @f_fwd(
// CHECK:      %[[MAX:.*]] = "dg.reduce_max"(%arg0)
// CHECK:      %[[V:.*]] = "dg.broadcast_in_dim"(%[[MAX]]) {dims = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>
// CHECK:      %[[VNAN:.*]] = "dg.compare"(%[[V]], %[[V]]) {direction = "ne"}
// CHECK:      %[[EQ:.*]] = "dg.compare"(%arg0, %[[V]]) {direction = "eq"}
// CHECK:      %[[XNAN:.*]] = "dg.compare"(%arg0, %arg0) {direction = "ne"}
// CHECK:      %[[NANS:.*]] = "dg.and"(%[[VNAN]], %[[XNAN]])
// CHECK:      %[[TIED:.*]] = "dg.or"(%[[EQ]], %[[NANS]])
// CHECK:      %[[COUNT:.*]] = "dg.reduce_sum"
// CHECK-LABEL: func.func @f_bwd(%arg0: tensor<f32>, %arg1: tensor<2x3xi1>, %arg2: tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[SHARE:.*]] = "dg.div"(%arg2, %arg0)
// CHECK-NEXT: %[[SPREAD:.*]] = "dg.broadcast_in_dim"(%[[SHARE]])
// CHECK-NEXT: %[[ZERO:.*]] = "dg.full"() {value = 0.000000e+00 : f64}
// CHECK-NEXT: %[[G:.*]] = "dg.select"(%arg1, %[[SPREAD]], %[[ZERO]])
// CHECK-NEXT: return %[[G]]
func.func @f(%x: tensor<2x3xf32>) -> tensor<f32> {
  %0 = "dg.reduce_max"(%x) {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
  %1 = "dg.evenly_read"(%x, %0) : (tensor<2x3xf32>, tensor<f32>) -> tensor<f32>
  return %1 : tensor<f32>
}

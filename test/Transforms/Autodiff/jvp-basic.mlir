// RUN: fusegrad-opt %s -p dg-jvp | filecheck %s

// Forward mode: tangents flow next to the forward ops; the integer output gets
// no tangent.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: dg.differentiated
// CHECK-LABEL: func.func @f_jvp(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> (tensor<3xf32>, tensor<i64>, tensor<3xf32>)
// CHECK-SAME: dg.num_outputs = 2
// CHECK-SAME: dg.tangent_outputs = array<i64: 0>
// CHECK-SAME: dg.wrt = array<i64: 0>
// CHECK:      %[[S:.*]] = "dg.sin"(%arg0)
// CHECK:      %[[C:.*]] = "dg.cos"(%arg0)
// CHECK:      %[[T:.*]] = "dg.mul"(%arg1, %[[C]])
// CHECK:      %[[A:.*]] = "dg.argmax"(%[[S]])
// CHECK:      return %[[S]], %[[A]], %[[T]]
func.func @f(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<i64>) {
  %0 = "dg.sin"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  %1 = "dg.argmax"(%0) {dim = 0 : i64} : (tensor<3xf32>) -> tensor<i64>
  return %0, %1 : tensor<3xf32>, tensor<i64>
}

// dg-drop-stop-gradients: after differentiation dg.stop_gradient is the identity and
// dg.evenly_read its value, so their uses read that operand (left in place either could
// be a kernel of its own).
// RUN: fusegrad-opt %s -p dg-drop-stop-gradients | filecheck %s

// CHECK-LABEL: func.func @f
// CHECK-NOT: dg.stop_gradient
// CHECK: %[[E:.*]] = "dg.exp"(%arg0)
// CHECK: "dg.mul"(%[[E]], %arg0)
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dg.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "dg.stop_gradient"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "dg.mul"(%1, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// CHECK-LABEL: func.func @evenly_read
// CHECK-NOT: dg.evenly_read
// CHECK: %[[M:.*]] = "dg.reduce_max"(%arg0)
// CHECK: "dg.mul"(%[[M]], %[[M]])
func.func @evenly_read(%a: tensor<4xf32>) -> tensor<f32> {
  %0 = "dg.reduce_max"(%a) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  %1 = "dg.evenly_read"(%a, %0) : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %2 = "dg.mul"(%1, %1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %2 : tensor<f32>
}

// dg-drop-stop-gradients: after differentiation dg.stop_gradient is the identity, so
// its uses read its operand (left in place it could be a copy kernel of its own).
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

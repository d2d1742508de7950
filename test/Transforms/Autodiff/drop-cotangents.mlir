// dg-drop-cotangents specializes a backward to zero cotangents for the forward outputs
// named: their arguments go (a zero splat instead), and dg.ct_outputs lists the rest.
// RUN: fusegrad-opt %s -p 'dg-autodiff,dg-drop-cotangents{outputs=1}' | filecheck %s

// CHECK-LABEL: func.func @f_bwd(
// CHECK-SAME: %{{.*}}: tensor<4xf32>) -> tensor<4xf32>
// CHECK-SAME: dg.ct_outputs = array<i64: 0>
func.func @f(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "dg.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "dg.sin"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

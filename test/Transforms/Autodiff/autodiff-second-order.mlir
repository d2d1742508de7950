// RUN: fusegrad-opt %s -p dg-autodiff,dg-autodiff | filecheck %s

// The second run differentiates @f_bwd (not @f or @f_fwd, which are marked).
// CHECK-LABEL: func.func @f(
// CHECK-LABEL: func.func @f_fwd(
// CHECK-LABEL: func.func @f_bwd(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>, %arg3: tensor<4xf32>) -> tensor<4xf32>
// CHECK-SAME: dg.differentiated
// CHECK-LABEL: func.func @f_bwd_fwd(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>, %arg3: tensor<4xf32>)
// CHECK-SAME: dg.num_outputs = 1
// CHECK-LABEL: func.func @f_bwd_bwd(
// CHECK-SAME: -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-SAME: dg.ct_outputs = array<i64: 0>
// CHECK-SAME: dg.wrt = array<i64: 0, 1, 2, 3>
// CHECK-NOT: func.func @f_fwd_
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dg.sin"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "dg.mul"(%0, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// y = exp(x * w): the backward reads exp's result and both inputs.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: attributes {dg.differentiated}
// CHECK-LABEL: func.func @f_fwd(%{{.*}}: tensor<4xf32>, %{{.*}}: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-SAME: dg.differentiated
// CHECK-SAME: dg.num_outputs = 1
// CHECK:      %[[M:.*]] = "dg.mul"(%arg0, %arg1)
// CHECK:      %[[E:.*]] = "dg.exp"(%[[M]])
// CHECK:      return %[[E]], %[[E]], %arg1, %arg0
// CHECK-LABEL: func.func @f_bwd(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>, %arg2: tensor<4xf32>, %arg3: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-SAME: dg.ct_outputs = array<i64: 0>
// CHECK-NOT:  dg.differentiated
// CHECK-SAME: dg.wrt = array<i64: 0, 1>
// CHECK:      %[[G:.*]] = "dg.mul"(%arg3, %arg0)
// CHECK:      %[[GX:.*]] = "dg.mul"(%[[G]], %arg1)
// CHECK:      %[[GW:.*]] = "dg.mul"(%[[G]], %arg2)
// CHECK:      return %[[GX]], %[[GW]]
func.func @f(%x: tensor<4xf32>, %w: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dg.mul"(%x, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "dg.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

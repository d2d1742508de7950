// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// x feeds three uses: its cotangents are summed with dg.add.
// CHECK-LABEL: func.func @f_bwd(
// CHECK-SAME: -> tensor<3xf32>
// CHECK-COUNT-2: "dg.mul"
// CHECK:      %[[S1:.*]] = "dg.add"
// CHECK:      %[[S2:.*]] = "dg.add"(%[[S1]], %{{.*}})
// CHECK-NOT:  "dg.full"
// CHECK:      return %[[S2]] : tensor<3xf32>
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "dg.mul"(%x, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = "dg.add"(%0, %x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %1 : tensor<3xf32>
}

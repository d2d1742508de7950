// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// Integer inputs get no gradient and integer outputs take no cotangent; the
// index path (convert of %i) is not differentiated.
// CHECK-LABEL: func.func @f_bwd(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> tensor<3xf32>
// CHECK-SAME: dg.ct_outputs = array<i64: 0>
// CHECK-SAME: dg.wrt = array<i64: 0>
// CHECK-NEXT: %[[G:.*]] = "dg.mul"(%arg1, %arg0)
// CHECK-NEXT: return %[[G]]
func.func @f(%x: tensor<3xf32>, %i: tensor<3xi64>) -> (tensor<3xf32>, tensor<3xi64>) {
  %0 = "dg.convert"(%i) : (tensor<3xi64>) -> tensor<3xf32>
  %1 = "dg.mul"(%x, %0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %2 = "dg.add"(%i, %i) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %1, %2 : tensor<3xf32>, tensor<3xi64>
}

// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// scatter_max's gradient goes to the elements equal to their target's result; tied
// ones share it evenly (as eager's). The partial derivatives are computed once in the
// forward (which of x and src won, 1 / their count per target) and the backward only
// scales the cotangent by them.
// CHECK-LABEL: func.func @f_fwd(
// CHECK:      %[[R:.*]] = "dg.scatter_max"(%arg0, %arg1, %arg2)
// CHECK:      %[[XWON:.*]] = "dg.compare"(%arg0, %[[R]]) {direction = "eq"}
// CHECK:      %[[AT:.*]] = "dg.gather"(%[[R]], %arg1)
// CHECK:      %[[SWON:.*]] = "dg.compare"(%arg2, %[[AT]]) {direction = "eq"}
// CHECK:      %[[N:.*]] = "dg.scatter_add"
// CHECK:      %[[SHARE:.*]] = "dg.div"(%{{.*}}, %[[N]])
// CHECK:      %[[DX:.*]] = "dg.select"(%[[XWON]], %[[SHARE]]
// CHECK:      %[[DS:.*]] = "dg.select"(%[[SWON]]
// CHECK:      return %[[R]], %[[DX]], %arg1, %[[DS]]
// CHECK-LABEL: func.func @f_bwd(
// CHECK-NEXT: %[[GX:.*]] = "dg.mul"(%arg3, %arg0)
// CHECK-NEXT: %[[G:.*]] = "dg.gather"(%arg3, %arg1) {dim = 0 : i64}
// CHECK-NEXT: %[[GS:.*]] = "dg.mul"(%[[G]], %arg2)
// CHECK-NEXT: return %[[GX]], %[[GS]]
func.func @f(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = "dg.scatter_max"(%x, %i, %s) {dim = 0 : i64} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// RUN: fusegrad-opt %s -p dg-autodiff,dg-remat | filecheck %s

// x ** 2 (RMSNorm's square): the derivative is folded to 2 * x, with no pow of x ** 1,
// no compare of the exponent with 0 and no select, and nothing for the constant exponent.
// CHECK-LABEL: func.func @f_bwd(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>)
// CHECK-NEXT: %[[TWO:.*]] = "dg.full"() {value = 2.000000e+00 : f64}
// CHECK-NEXT: %[[D:.*]] = "dg.mul"(%[[TWO]], %arg0)
// CHECK-NEXT: %[[G:.*]] = "dg.mul"(%arg1, %[[D]])
// CHECK-NEXT: return %[[G]]
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = "dg.full"() {value = 2.0 : f64} : () -> tensor<4x8xf32>
  %0 = "dg.pow"(%x, %c) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// x ** 3: 3 * x ** 2.
// CHECK-LABEL: func.func @g_bwd(
// CHECK: %[[TWO:.*]] = "dg.full"() {value = 2.000000e+00 : f64}
// CHECK: %[[SQ:.*]] = "dg.pow"(%arg0, %[[TWO]])
// CHECK: %[[THREE:.*]] = "dg.full"() {value = 3.000000e+00 : f64}
// CHECK: "dg.mul"(%[[THREE]], %[[SQ]])
// CHECK-NOT: dg.select
// CHECK: return
func.func @g(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c = "dg.full"() {value = 3.0 : f64} : () -> tensor<4x8xf32>
  %0 = "dg.pow"(%x, %c) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

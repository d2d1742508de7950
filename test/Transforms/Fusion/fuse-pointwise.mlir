// dg-fuse: a pointwise chain with a splat constant becomes one fusion region.
// RUN: fusegrad-opt %s -p dg-fuse | filecheck %s

// CHECK-LABEL: func.func @chain(
// CHECK-NEXT: %[[F:.*]] = scf.execute_region -> tensor<4x8xf32> no_inline {
// CHECK-NEXT: "dg.add"(%arg0, %arg1)
// CHECK-NEXT: "dg.full"
// CHECK-NEXT: "dg.mul"
// CHECK-NEXT: "dg.exp"
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } {dg.fusion}
// CHECK-NEXT: return %[[F]]
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "dg.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = "dg.full"() {value = 2.0} : () -> tensor<4x8xf32>
  %1 = "dg.mul"(%0, %c) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = "dg.exp"(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

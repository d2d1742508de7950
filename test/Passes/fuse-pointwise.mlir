// dg-fuse: a pointwise chain with a splat constant becomes one dg.fusion.
// RUN: fusegrad-opt %s -p dg-fuse | filecheck %s

// CHECK-LABEL: func.func @chain(
// CHECK-NEXT: %[[F:.*]] = "dg.fusion"(%arg0, %arg1) ({
// CHECK: "dg.add"
// CHECK: "dg.full"
// CHECK: "dg.mul"
// CHECK: "dg.exp"
// CHECK: gpu.yield
// CHECK-NEXT: })
// CHECK-NEXT: return %[[F]]
func.func @chain(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "dg.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = "dg.full"() {value = 2.0} : () -> tensor<4x8xf32>
  %1 = "dg.mul"(%0, %c) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = "dg.exp"(%1) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

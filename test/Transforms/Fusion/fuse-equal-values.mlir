// dg-fuse: equal ops that land in one region (copies made per consumer, or
// duplicates left by differentiation) are computed once and yielded once, so
// their consumers share one buffer instead of each reading its own copy.
// RUN: fusegrad-opt %s -p dg-fuse | filecheck %s

// CHECK-LABEL: func.func @twice(
// CHECK: %[[R:.*]] = scf.execute_region -> tensor<4x4xf32> no_inline {
// CHECK: "dg.mul"
// CHECK-NEXT: "dg.add"
// CHECK-NEXT: scf.yield
// CHECK: "dg.matmul"(%[[R]], %{{.*}})
// CHECK: "dg.matmul"(%[[R]], %{{.*}})
func.func @twice(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>, %v: tensor<4x4xf32>)
    -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a1 = "dg.mul"(%x, %x) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b1 = "dg.add"(%a1, %x) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a2 = "dg.mul"(%x, %x) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b2 = "dg.add"(%a2, %x) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = "dg.matmul"(%b1, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = "dg.matmul"(%b2, %v) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m1, %m2 : tensor<4x4xf32>, tensor<4x4xf32>
}

// Ops differing only in an attribute stay apart.
// CHECK-LABEL: func.func @different(
// CHECK: scf.execute_region -> (tensor<4x4xi1>, tensor<4x4xi1>) no_inline {
// CHECK: "dg.compare"(%arg0, %arg1) {direction = "lt"}
// CHECK-NEXT: "dg.compare"(%arg0, %arg1) {direction = "gt"}
func.func @different(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> (tensor<4x4xi1>, tensor<4x4xi1>) {
  %l = "dg.compare"(%x, %y) {direction = "lt"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xi1>
  %g = "dg.compare"(%x, %y) {direction = "gt"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xi1>
  return %l, %g : tensor<4x4xi1>, tensor<4x4xi1>
}

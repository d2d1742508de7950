// dg-fuse: a matmul stays its own kernel, and nothing fuses across it: exp feeds
// the matmul on its own, and the epilogue recomputes exp rather than reading it
// back from memory (a cheap pointwise value is recomputed per consumer).
// RUN: fusegrad-opt %s -p dg-fuse | filecheck %s

// CHECK-LABEL: func.func @f(
// CHECK-NEXT: %[[E:.*]] = "dg.exp"(%arg0)
// CHECK-NEXT: %[[M:.*]] = "dg.matmul"(%[[E]], %arg1)
// CHECK-NEXT: scf.execute_region -> tensor<8x8xf32> no_inline {
// CHECK-NEXT: %[[T:.*]] = "dg.tanh"(%[[M]])
// CHECK-NEXT: %[[E2:.*]] = "dg.exp"(%arg0)
// CHECK-NEXT: "dg.add"(%[[T]], %[[E2]])
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } {dg.fusion}
// CHECK-NOT: dg.matmul
func.func @f(%a: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e = "dg.exp"(%a) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = "dg.matmul"(%e, %w) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %t = "dg.tanh"(%m) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = "dg.add"(%t, %e) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

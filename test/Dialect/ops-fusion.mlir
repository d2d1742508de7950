// Round trip: a fusion region (scf.execute_region marked dg.fusion, see
// dialects/region_ops.py) holding dg ops of different types, ending in scf.yield.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @fused(
// CHECK-NEXT: %0:2 = scf.execute_region -> (tensor<4x8xf32>, tensor<4xf32>) no_inline {
// CHECK-NEXT: %1 = "dg.exp"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %2 = "dg.reduce_sum"(%1) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: scf.yield %1, %2 : tensor<4x8xf32>, tensor<4xf32>
// CHECK-NEXT: } {dg.fusion}
func.func @fused(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %r:2 = scf.execute_region -> (tensor<4x8xf32>, tensor<4xf32>) no_inline {
    %e = "dg.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
    scf.yield %e, %s : tensor<4x8xf32>, tensor<4xf32>
  } {dg.fusion}
  return %r#0, %r#1 : tensor<4x8xf32>, tensor<4xf32>
}

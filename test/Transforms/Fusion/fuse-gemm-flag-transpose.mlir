// dg-fuse: a transpose of the last two dims that only matmuls read stays out of
// its producer's region, for gemm to read through its transpose flag. Fused, the
// region would store dZ^T column-wise (a linear layer's weight gradient after
// ReLU). A transpose that a pointwise op reads still fuses.
// RUN: fusegrad-opt %s -p dg-fuse | filecheck %s

// CHECK-LABEL: func.func @weight_grad(
// CHECK:      %[[R:.*]] = scf.execute_region -> tensor<16x8xf32> no_inline {
// CHECK-NOT:  dg.transpose
// CHECK:      } {dg.fusion}
// CHECK-NEXT: %[[T:.*]] = "dg.transpose"(%[[R]]) {perm = array<i64: 1, 0>}
// CHECK-NEXT: "dg.matmul"(%[[T]], %arg2)
func.func @weight_grad(%g: tensor<16x8xf32>, %m: tensor<16x8xi1>, %x: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %z = "dg.full"() {value = 0.0 : f64} : () -> tensor<16x8xf32>
  %dz = "dg.select"(%m, %z, %g) : (tensor<16x8xi1>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %t = "dg.transpose"(%dz) {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %dw = "dg.matmul"(%t, %x) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %dw : tensor<8x4xf32>
}

// CHECK-LABEL: func.func @pointwise_reader(
// CHECK:      scf.execute_region -> tensor<8x16xf32> no_inline {
// CHECK:      "dg.transpose"
// CHECK:      "dg.exp"
// CHECK:      } {dg.fusion}
func.func @pointwise_reader(%a: tensor<16x8xf32>) -> tensor<8x16xf32> {
  %n = "dg.neg"(%a) : (tensor<16x8xf32>) -> tensor<16x8xf32>
  %t = "dg.transpose"(%n) {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %e = "dg.exp"(%t) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %e : tensor<8x16xf32>
}

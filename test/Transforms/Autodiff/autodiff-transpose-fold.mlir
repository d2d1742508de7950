// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// A linear layer, x @ W^T: the gradient of x is g @ (W^T)^T, which the builder
// composes into g @ W. Two transposes there would become a copy of the weight.
// CHECK-LABEL: func.func @f_bwd(
// CHECK-NOT:  dg.transpose
// CHECK:      "dg.matmul"(%{{.*}}, %arg{{[0-9]+}}) : (tensor<16x4xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
// CHECK:      return
func.func @f(%x: tensor<16x8xf32>, %w: tensor<4x8xf32>) -> tensor<16x4xf32> {
  %wt = "dg.transpose"(%w) {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %y = "dg.matmul"(%x, %wt) : (tensor<16x8xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  return %y : tensor<16x4xf32>
}

// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// Batched matmul: dA = G B^T, dB = A^T G, transposing the last two dims. The
// transposes need no cotangent, so by default they run in the forward and
// their results are saved.
// CHECK-LABEL: func.func @f_fwd(
// CHECK-DAG:  %[[BT:.*]] = "dg.transpose"(%arg1) {perm = array<i64: 0, 2, 1>} : (tensor<2x4x5xf32>) -> tensor<2x5x4xf32>
// CHECK-DAG:  %[[AT:.*]] = "dg.transpose"(%arg0) {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
// CHECK:      return %{{.*}}, %[[BT]], %[[AT]]
// CHECK-LABEL: func.func @f_bwd(%arg0: tensor<2x5x4xf32>, %arg1: tensor<2x4x3xf32>, %arg2: tensor<2x3x5xf32>) -> (tensor<2x3x4xf32>, tensor<2x4x5xf32>)
// CHECK:      %[[GA:.*]] = "dg.matmul"(%arg2, %arg0) : (tensor<2x3x5xf32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
// CHECK:      %[[GB:.*]] = "dg.matmul"(%arg1, %arg2) : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
// CHECK:      return %[[GA]], %[[GB]]
func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = "dg.matmul"(%a, %b) : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

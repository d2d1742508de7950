// dg-remat: the forward saves the small input and the matmul result, not the
// large tanh(broadcast(...)) chain, which the backward recomputes.
// RUN: fusegrad-opt %s -p dg-autodiff,dg-remat | filecheck %s

// CHECK-LABEL: func.func @f_fwd(
// CHECK-SAME: dg.saved_bytes = 33024 : i64
// CHECK-SAME: dg.saved_bytes_before = {{[0-9]+}} : i64
// CHECK: %[[M:.*]] = "dg.matmul"
// CHECK: return %{{.*}}, %arg0, %arg1, %[[M]] : tensor<64x64xf32>, tensor<64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
// CHECK-LABEL: func.func @f_bwd(
// CHECK: "dg.sin"
// CHECK: "dg.tanh"
func.func @f(%x: tensor<64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %s = "dg.sin"(%x) : (tensor<64xf32>) -> tensor<64xf32>
  %e = "dg.exp"(%s) : (tensor<64xf32>) -> tensor<64xf32>
  %b = "dg.broadcast_in_dim"(%e) {dims = array<i64: 1>} : (tensor<64xf32>) -> tensor<64x64xf32>
  %t = "dg.tanh"(%b) : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %m = "dg.matmul"(%t, %w) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = "dg.mul"(%m, %m) : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

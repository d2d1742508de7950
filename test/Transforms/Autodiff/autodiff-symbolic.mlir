// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// A batch of symbolic size s0: the forward saves symbolically shaped values, the
// backward's gradients have the inputs' symbolic types, and the loss's cotangent
// broadcasts back to [s0, 32] (a size @f_bwd's caller gives it with the forward's).
// CHECK-LABEL: func.func @f_fwd(%arg0: tensor<?x16xf32, "s0">, %arg1: tensor<16x32xf32>, %arg2: tensor<32xf32>)
// CHECK-SAME: -> (tensor<f32>, tensor<?x32xf32, "s0">, tensor<?x32xf32, "s0">, tensor<32x16xf32>, tensor<16x?xf32, "s0">)
// CHECK:      "dg.transpose"(%arg0) {perm = array<i64: 1, 0>} : (tensor<?x16xf32, "s0">) -> tensor<16x?xf32, "s0">
// CHECK-LABEL: func.func @f_bwd(
// CHECK-SAME: -> (tensor<?x16xf32, "s0">, tensor<16x32xf32>, tensor<32xf32>)
// CHECK:      "dg.broadcast_in_dim"(%arg4) {dims = array<i64>} : (tensor<f32>) -> tensor<?x32xf32, "s0">
// CHECK:      "dg.reduce_sum"(%{{.*}}) {dims = array<i64: 0>} : (tensor<?x32xf32, "s0">) -> tensor<32xf32>
// CHECK:      "dg.matmul"(%{{.*}}, %arg2) : (tensor<?x32xf32, "s0">, tensor<32x16xf32>) -> tensor<?x16xf32, "s0">
func.func @f(%x: tensor<?x16xf32, "s0">, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<f32> {
  %0 = "dg.matmul"(%x, %w) : (tensor<?x16xf32, "s0">, tensor<16x32xf32>) -> tensor<?x32xf32, "s0">
  %1 = "dg.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<32xf32>) -> tensor<?x32xf32, "s0">
  %2 = "dg.add"(%0, %1) : (tensor<?x32xf32, "s0">, tensor<?x32xf32, "s0">) -> tensor<?x32xf32, "s0">
  %3 = "dg.tanh"(%2) : (tensor<?x32xf32, "s0">) -> tensor<?x32xf32, "s0">
  %4 = "dg.mul"(%3, %3) : (tensor<?x32xf32, "s0">, tensor<?x32xf32, "s0">) -> tensor<?x32xf32, "s0">
  %5 = "dg.reduce_sum"(%4) {dims = array<i64: 0, 1>} : (tensor<?x32xf32, "s0">) -> tensor<f32>
  return %5 : tensor<f32>
}

// Concatenation along a symbolic dim: the cotangent's slices start and end at
// symbolic offsets (their `limit_sizes`/`start_sizes`).
// CHECK-LABEL: func.func @cat_bwd(
// CHECK: "dg.slice"(%arg0) {limit = array<i64: -9223372036854775808, 4>, limit_sizes = "s0", start = array<i64: 0, 0>, stride = array<i64: 1, 1>} : (tensor<?x4xf32, "s0 + s1">) -> tensor<?x4xf32, "s0">
// CHECK: "dg.slice"(%arg0) {limit = array<i64: -9223372036854775808, 4>, limit_sizes = "s0 + s1", start = array<i64: -9223372036854775808, 0>, start_sizes = "s0", stride = array<i64: 1, 1>} : (tensor<?x4xf32, "s0 + s1">) -> tensor<?x4xf32, "s1">
func.func @cat(%a: tensor<?x4xf32, "s0">, %b: tensor<?x4xf32, "s1">) -> tensor<?x4xf32, "s0 + s1"> {
  %0 = "dg.concatenate"(%a, %b) {dim = 0 : i64} : (tensor<?x4xf32, "s0">, tensor<?x4xf32, "s1">) -> tensor<?x4xf32, "s0 + s1">
  return %0 : tensor<?x4xf32, "s0 + s1">
}

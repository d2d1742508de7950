// dg-fuse on symbolic sizes: the bias add, tanh, square and sum over a batch of s0
// rows form one region, as they do at a static size.
// RUN: fusegrad-opt %s -p dg-fusion-rewrites,dg-fuse | filecheck %s

// CHECK-LABEL: func.func @f
// CHECK: "dg.matmul"(%arg0, %arg1) : (tensor<?x16xf32, "s0">, tensor<16x32xf32>) -> tensor<?x32xf32, "s0">
// CHECK: scf.execute_region -> tensor<f32> no_inline {
// CHECK:   "dg.broadcast_in_dim"
// CHECK:   "dg.tanh"
// CHECK:   "dg.reduce_sum"(%{{.*}}) {dims = array<i64: 0, 1>} : (tensor<?x32xf32, "s0">) -> tensor<f32>
// CHECK: } {dg.fusion}
func.func @f(%x: tensor<?x16xf32, "s0">, %w: tensor<16x32xf32>, %b: tensor<32xf32>) -> tensor<f32> {
  %0 = "dg.matmul"(%x, %w) : (tensor<?x16xf32, "s0">, tensor<16x32xf32>) -> tensor<?x32xf32, "s0">
  %1 = "dg.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<32xf32>) -> tensor<?x32xf32, "s0">
  %2 = "dg.add"(%0, %1) : (tensor<?x32xf32, "s0">, tensor<?x32xf32, "s0">) -> tensor<?x32xf32, "s0">
  %3 = "dg.tanh"(%2) : (tensor<?x32xf32, "s0">) -> tensor<?x32xf32, "s0">
  %4 = "dg.mul"(%3, %3) : (tensor<?x32xf32, "s0">, tensor<?x32xf32, "s0">) -> tensor<?x32xf32, "s0">
  %5 = "dg.reduce_sum"(%4) {dims = array<i64: 0, 1>} : (tensor<?x32xf32, "s0">) -> tensor<f32>
  return %5 : tensor<f32>
}

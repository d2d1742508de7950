// dg-remat weighs a symbolically shaped value at the module's size hints: at
// s0 = 4096 the forward saves x and the matmul result [s0, 16] (2 * 262144 bytes
// + the 1024-byte weight), and the backward recomputes tanh and exp from them.
// RUN: fusegrad-opt %s -p dg-autodiff,dg-remat | filecheck %s

// CHECK-LABEL: func.func @f_fwd(
// CHECK-SAME: -> (tensor<f32>, tensor<?x16xf32, "s0">, tensor<16x16xf32>, tensor<?x16xf32, "s0">)
// CHECK-SAME: dg.saved_bytes = 525312 : i64
// CHECK-LABEL: func.func @f_bwd(
// CHECK: "dg.tanh"
module attributes {dg.size_hints = {s0 = 4096 : i64}} {
  func.func @f(%x: tensor<?x16xf32, "s0">, %w: tensor<16x16xf32>) -> tensor<f32> {
    %0 = "dg.matmul"(%x, %w) : (tensor<?x16xf32, "s0">, tensor<16x16xf32>) -> tensor<?x16xf32, "s0">
    %1 = "dg.tanh"(%0) : (tensor<?x16xf32, "s0">) -> tensor<?x16xf32, "s0">
    %2 = "dg.exp"(%1) : (tensor<?x16xf32, "s0">) -> tensor<?x16xf32, "s0">
    %3 = "dg.reduce_sum"(%2) {dims = array<i64: 0, 1>} : (tensor<?x16xf32, "s0">) -> tensor<f32>
    return %3 : tensor<f32>
  }
}

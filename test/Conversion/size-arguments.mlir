// A size no argument has as a plain dim becomes a trailing index argument, named in
// dg.size_arguments: one a result type uses (a backward whose cotangent is a scalar),
// and one only an attribute uses (a slice at an offset given as an integer).
// RUN: fusegrad-opt %s -p dg-size-arguments | filecheck %s

// CHECK-LABEL: func.func @scalar_cotangent
// CHECK-SAME: (%{{.*}}: tensor<f32>, %{{.*}}: index) -> tensor<?x4xf32, "s0">
// CHECK-SAME: dg.size_arguments = ["s0"]
func.func @scalar_cotangent(%ct: tensor<f32>) -> tensor<?x4xf32, "s0"> {
  %0 = "dg.broadcast_in_dim"(%ct) {dims = array<i64>, shape = array<i64: -9223372036854775808, 4>, shape_sizes = "s0"} : (tensor<f32>) -> tensor<?x4xf32, "s0">
  return %0 : tensor<?x4xf32, "s0">
}

// CHECK-LABEL: func.func @slice_at_offset
// CHECK-SAME: (%{{.*}}: tensor<16x3xf32>, %{{.*}}: index) -> tensor<4x3xf32>
// CHECK-SAME: dg.size_arguments = ["s0"]
func.func @slice_at_offset(%x: tensor<16x3xf32>) -> tensor<4x3xf32> {
  %0 = "dg.slice"(%x) {start = array<i64: -9223372036854775808, 0>, start_sizes = "s0", limit = array<i64: -9223372036854775808, 3>, limit_sizes = "s0 + 4", stride = array<i64: 1, 1>} : (tensor<16x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @shown
// CHECK-SAME: (%{{.*}}: tensor<?x3xf32, "s0">) -> tensor<?x3xf32, "s0">
// CHECK-NOT: dg.size_arguments
func.func @shown(%x: tensor<?x3xf32, "s0">) -> tensor<?x3xf32, "s0"> {
  %0 = "dg.exp"(%x) : (tensor<?x3xf32, "s0">) -> tensor<?x3xf32, "s0">
  return %0 : tensor<?x3xf32, "s0">
}

// A size an argument gives as `k*s + c` (an embedding bag's offsets, one more than
// its bags) is solved from that dim: no argument for it.
// CHECK-LABEL: func.func @solved
// CHECK-SAME: (%{{.*}}: tensor<?x3xf32, "s0 - 1">) -> tensor<?x3xf32, "s0">
// CHECK-NOT: dg.size_arguments
func.func @solved(%x: tensor<?x3xf32, "s0 - 1">) -> tensor<?x3xf32, "s0"> {
  %0 = "dg.pad"(%x) {low = array<i64: 0, 0>, high = array<i64: 1, 0>, interior = array<i64: 0, 0>, value = 0.0 : f64} : (tensor<?x3xf32, "s0 - 1">) -> tensor<?x3xf32, "s0">
  return %0 : tensor<?x3xf32, "s0">
}

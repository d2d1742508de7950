// A transposed operand that only feeds a matmul (a linear layer's weight) is a
// strided view for the library call (cuBLAS reads it transposed), not a kernel
// copying it every call; a transpose something else also reads stays a kernel.
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse | filecheck %s

// CHECK: func @linear (64x32 f32, 16x32 f32) -> (64x16 f32)
// CHECK-NEXT: view buf="t0" base="arg1" offset=0 shape=[32,16] strides=[1,32]
// CHECK-NEXT: matmul a="arg0" b="t0" c="arg2" overwrite=true
// CHECK: func @batched (4x8x32 f32, 4x16x32 f32) -> (4x8x16 f32)
// CHECK-NEXT: view buf="t0" base="arg1" offset=0 shape=[4,32,16] strides=[512,1,32]
// CHECK-NEXT: matmul a="arg0" b="t0" c="arg2" overwrite=true
// CHECK: func @shared (64x32 f32, 16x32 f32) -> (64x16 f32, 32x16 f32)
// CHECK-NEXT: launch
// CHECK-NEXT: matmul a="arg0" b="arg3" c="arg2" overwrite=true
func.func @linear(%x: tensor<64x32xf32>, %w: tensor<16x32xf32>) -> tensor<64x16xf32> {
  %wt = "dg.transpose"(%w) {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %y = "dg.matmul"(%x, %wt) : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  return %y : tensor<64x16xf32>
}
func.func @batched(%x: tensor<4x8x32xf32>, %w: tensor<4x16x32xf32>) -> tensor<4x8x16xf32> {
  %wt = "dg.transpose"(%w) {perm = array<i64: 0, 2, 1>} : (tensor<4x16x32xf32>) -> tensor<4x32x16xf32>
  %y = "dg.matmul"(%x, %wt) : (tensor<4x8x32xf32>, tensor<4x32x16xf32>) -> tensor<4x8x16xf32>
  return %y : tensor<4x8x16xf32>
}
func.func @shared(%x: tensor<64x32xf32>, %w: tensor<16x32xf32>) -> (tensor<64x16xf32>, tensor<32x16xf32>) {
  %wt = "dg.transpose"(%w) {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %y = "dg.matmul"(%x, %wt) : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  return %y, %wt : tensor<64x16xf32>, tensor<32x16xf32>
}

// A row kernel's rows are all the leading parallel dims its writes stay within:
// centring over the hidden dim of (batch, tokens, hidden) runs batch x tokens =
// 1024 blocks, not 8 blocks each looping over 128 tokens. The input is read
// transposed (tokens-first, as nn.MultiheadAttention leaves it): only what the
// kernel writes must be indexed row by row.
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse | filecheck %s

// CHECK: func @center (128x8x256 f32) -> (8x128x256 f32)
// CHECK-NEXT: launch center_kernel::center_kernel grid=[1024, 1, 1] block=[32, 1, 1] smem=0 (arg0, arg1)
// CHECK-NOT: launch
// CHECK: func @center_columns (8x128x256 f32) -> (8x256x128 f32)
// CHECK: launch center_columns_kernel::center_columns_kernel grid=[1024, 1, 1]
// CHECK-NEXT: launch center_columns_kernel_0::center_columns_kernel grid=[1, 2048, 1] block=[256, 1, 1]
func.func @center(%xt: tensor<128x8x256xf32>) -> tensor<8x128x256xf32> {
  %x = "dg.transpose"(%xt) {perm = array<i64: 1, 0, 2>} : (tensor<128x8x256xf32>) -> tensor<8x128x256xf32>
  %m = "dg.reduce_sum"(%x) {dims = array<i64: 2>} : (tensor<8x128x256xf32>) -> tensor<8x128xf32>
  %mb = "dg.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<8x128xf32>) -> tensor<8x128x256xf32>
  %y = "dg.sub"(%x, %mb) : (tensor<8x128x256xf32>, tensor<8x128x256xf32>) -> tensor<8x128x256xf32>
  return %y : tensor<8x128x256xf32>
}
// The output written transposed (tokens last): a block of a kernel writing it may own
// only a batch slab, 8 blocks on a GPU of 132 SMs, so that write is a pointwise kernel of
// its own and the means a row kernel of batch x tokens blocks (`_narrows`).
func.func @center_columns(%x: tensor<8x128x256xf32>) -> tensor<8x256x128xf32> {
  %m = "dg.reduce_sum"(%x) {dims = array<i64: 2>} : (tensor<8x128x256xf32>) -> tensor<8x128xf32>
  %mb = "dg.broadcast_in_dim"(%m) {dims = array<i64: 0, 1>} : (tensor<8x128xf32>) -> tensor<8x128x256xf32>
  %y = "dg.sub"(%x, %mb) : (tensor<8x128x256xf32>, tensor<8x128x256xf32>) -> tensor<8x128x256xf32>
  %yt = "dg.transpose"(%y) {perm = array<i64: 0, 2, 1>} : (tensor<8x128x256xf32>) -> tensor<8x256x128xf32>
  return %yt : tensor<8x256x128xf32>
}

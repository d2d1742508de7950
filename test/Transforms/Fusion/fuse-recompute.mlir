// dg-fuse: a cheap pointwise value read by two kernels is recomputed in each
// instead of being stored and loaded back (a softmax's exp(x - max) feeds both
// its sum and its normalisation); an expensive cone (over the budget) is stored,
// and so is a transcendental that a row reduction reads: its other readers run in
// the same CPU row kernel, where the stored value is one row on the stack.
// RUN: fusegrad-opt %s -p dg-fuse | filecheck %s
// RUN: fusegrad-opt %s -p 'dg-fuse{row-temps=0}' | filecheck %s --check-prefix=CUDA

// Two kernels: the max, then one region that sums exp(x - max) and divides by
// the sum. The copies of exp made for the two consumers meet again in that
// region, which holds exp once (its two loop nests each evaluate it).
// CHECK-LABEL: func.func @softmax(
// CHECK: "dg.reduce_max"
// CHECK: scf.execute_region
// CHECK: "dg.exp"
// CHECK-NOT: "dg.exp"
// CHECK: "dg.reduce_sum"
// CHECK: "dg.div"
// CHECK: } {dg.fusion}
// CHECK-NEXT: return
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %mb = "dg.broadcast_in_dim"(%m) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %d = "dg.sub"(%x, %mb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = "dg.exp"(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %sb = "dg.broadcast_in_dim"(%s) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %y = "dg.div"(%e, %sb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// Three chained exps cost 24 > 16: their result is computed once and stored.
// CHECK-LABEL: func.func @costly(
// CHECK-COUNT-3: "dg.exp"
// CHECK-NOT: "dg.exp"
// CHECK: return
func.func @costly(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = "dg.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = "dg.exp"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = "dg.exp"(%b) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = "dg.reduce_sum"(%c) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %m = "dg.reduce_max"(%c) {dims = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
  %r = "dg.reduce_sum"(%m) {dims = array<i64: 0>} : (tensor<8xf32>) -> tensor<f32>
  %rb = "dg.broadcast_in_dim"(%r) {dims = array<i64>} : (tensor<f32>) -> tensor<4xf32>
  return %s, %rb : tensor<4xf32>, tensor<4xf32>
}

// The normalised softmax feeds a second kernel (a full sum of squares): exp, read by
// the row sum, is computed once and yielded to it, not recomputed there. With
// row-temps=0 (CUDA, where it would be stored to memory and read back) each kernel
// computes it.
// CUDA-LABEL: func.func @softmax_square_sum(
// CUDA: %[[S:.*]] = scf.execute_region -> tensor<4xf32>
// CUDA: "dg.exp"
// CUDA: scf.execute_region
// CUDA: "dg.exp"
// CUDA: "dg.div"
// CHECK-LABEL: func.func @softmax_square_sum(
// CHECK: %[[R:.*]]:2 = scf.execute_region
// CHECK: %[[E:.*]] = "dg.exp"
// CHECK: %[[S:.*]] = "dg.reduce_sum"(%[[E]])
// CHECK: scf.yield %[[E]], %[[S]]
// CHECK-NOT: "dg.exp"
// CHECK: "dg.div"(%[[R]]#0,
// CHECK: return
func.func @softmax_square_sum(%x: tensor<4x8xf32>) -> tensor<f32> {
  %m = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %mb = "dg.broadcast_in_dim"(%m) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %d = "dg.sub"(%x, %mb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = "dg.exp"(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %sb = "dg.broadcast_in_dim"(%s) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %y = "dg.div"(%e, %sb) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %q = "dg.mul"(%y, %y) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = "dg.reduce_sum"(%q) {dims = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
  return %t : tensor<f32>
}

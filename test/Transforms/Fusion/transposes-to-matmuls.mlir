// dg-transposes-to-matmuls: a transpose of the last two dims moves through
// pointwise ops with splat operands and reshapes of the leading dims, down to the
// matmul that reads it (a gemm flag) or up to the matmul it reads (which then
// computes the transposed product), or until it cancels another transpose.
// RUN: fusegrad-opt %s -p dg-transposes-to-matmuls | filecheck %s

// Attention's scores, q @ (k^T * s): the key is scaled in its own layout and
// reaches the matmul transposed, past the reshape merging batch and heads.
// CHECK-LABEL: func.func @scaled_key(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<6x5x4xf32>, %[[K:[^:]*]]: tensor<2x3x5x4xf32>
// CHECK: %[[S:.*]] = "dg.full"() {{.*}} -> tensor<2x3x5x4xf32>
// CHECK: %[[KS:.*]] = "dg.mul"(%[[K]], %[[S]]) : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
// CHECK: %[[R:.*]] = "dg.reshape"(%[[KS]]) : (tensor<2x3x5x4xf32>) -> tensor<6x5x4xf32>
// CHECK: %[[T:.*]] = "dg.transpose"(%[[R]]) {perm = array<i64: 0, 2, 1>} : (tensor<6x5x4xf32>) -> tensor<6x4x5xf32>
// CHECK: "dg.matmul"(%[[Q]], %[[T]])
func.func @scaled_key(%q: tensor<6x5x4xf32>, %k: tensor<2x3x5x4xf32>) -> tensor<6x5x5xf32> {
  %kt = "dg.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x5x4xf32>) -> tensor<2x3x4x5xf32>
  %s = "dg.full"() {value = 0.5 : f64} : () -> tensor<2x3x4x5xf32>
  %ks = "dg.mul"(%kt, %s) : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %r = "dg.reshape"(%ks) : (tensor<2x3x4x5xf32>) -> tensor<6x4x5xf32>
  %m = "dg.matmul"(%q, %r) : (tensor<6x5x4xf32>, tensor<6x4x5xf32>) -> tensor<6x5x5xf32>
  return %m : tensor<6x5x5xf32>
}

// The backward reads that scaled key transposed back: the two transposes cancel.
// CHECK-LABEL: func.func @cancelled(
// CHECK-SAME: %[[D:[^:]*]]: tensor<6x5x5xf32>, %[[K:[^:]*]]: tensor<2x3x5x4xf32>
// CHECK: %[[KS:.*]] = "dg.mul"(%[[K]], %{{.*}}) : (tensor<2x3x5x4xf32>
// CHECK: %[[R:.*]] = "dg.reshape"(%[[KS]]) : (tensor<2x3x5x4xf32>) -> tensor<6x5x4xf32>
// CHECK-NOT: "dg.transpose"
// CHECK: "dg.matmul"(%[[D]], %[[R]])
func.func @cancelled(%d: tensor<6x5x5xf32>, %k: tensor<2x3x5x4xf32>) -> tensor<6x5x4xf32> {
  %kt = "dg.transpose"(%k) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x5x4xf32>) -> tensor<2x3x4x5xf32>
  %s = "dg.full"() {value = 0.5 : f64} : () -> tensor<2x3x4x5xf32>
  %ks = "dg.mul"(%kt, %s) : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %r = "dg.reshape"(%ks) : (tensor<2x3x4x5xf32>) -> tensor<6x4x5xf32>
  %rt = "dg.transpose"(%r) {perm = array<i64: 0, 2, 1>} : (tensor<6x4x5xf32>) -> tensor<6x5x4xf32>
  %m = "dg.matmul"(%d, %rt) : (tensor<6x5x5xf32>, tensor<6x5x4xf32>) -> tensor<6x5x4xf32>
  return %m : tensor<6x5x4xf32>
}

// The key's gradient, (q^T dS * s)^T: the transpose moves up to the matmul (which
// dg-transpose-matmul-results then swaps), and the scaling runs in the new layout.
// CHECK-LABEL: func.func @up_to_matmul(
// CHECK: %[[P:.*]] = "dg.matmul"(%arg0, %arg1) : (tensor<6x4x5xf32>, tensor<6x5x5xf32>) -> tensor<6x4x5xf32>
// CHECK: %[[T:.*]] = "dg.transpose"(%[[P]]) {perm = array<i64: 0, 2, 1>} : (tensor<6x4x5xf32>) -> tensor<6x5x4xf32>
// CHECK: %[[R:.*]] = "dg.reshape"(%[[T]]) : (tensor<6x5x4xf32>) -> tensor<2x3x5x4xf32>
// CHECK: "dg.mul"(%[[R]], %{{.*}}) : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
// CHECK-NOT: "dg.transpose"
func.func @up_to_matmul(%qt: tensor<6x4x5xf32>, %ds: tensor<6x5x5xf32>) -> tensor<2x3x5x4xf32> {
  %p = "dg.matmul"(%qt, %ds) : (tensor<6x4x5xf32>, tensor<6x5x5xf32>) -> tensor<6x4x5xf32>
  %r = "dg.reshape"(%p) : (tensor<6x4x5xf32>) -> tensor<2x3x4x5xf32>
  %s = "dg.full"() {value = 0.5 : f64} : () -> tensor<2x3x4x5xf32>
  %ps = "dg.mul"(%r, %s) : (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %t = "dg.transpose"(%ps) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x5x4xf32>
  return %t : tensor<2x3x5x4xf32>
}

// Kept: another tensor operand (it would have to be transposed too), a second
// reader, a matmul operand of rank 4 (no gemm flag), an integer matmul.
// CHECK-LABEL: func.func @kept(
// CHECK-COUNT-4: "dg.transpose"(%arg
func.func @kept(%a: tensor<3x4x5xf32>, %b: tensor<3x5x4xf32>, %q: tensor<3x5x4xf32>,
                %c: tensor<2x3x4x5xf32>, %qi: tensor<3x5x5xi64>, %ai: tensor<3x4x5xi64>)
    -> (tensor<3x5x5xf32>, tensor<3x5x5xf32>, tensor<3x5x4xf32>, tensor<2x3x5x5xf32>, tensor<3x5x4xi64>) {
  %at = "dg.transpose"(%a) {perm = array<i64: 0, 2, 1>} : (tensor<3x4x5xf32>) -> tensor<3x5x4xf32>
  %x = "dg.mul"(%at, %b) : (tensor<3x5x4xf32>, tensor<3x5x4xf32>) -> tensor<3x5x4xf32>
  %xt = "dg.transpose"(%x) {perm = array<i64: 0, 2, 1>} : (tensor<3x5x4xf32>) -> tensor<3x4x5xf32>
  %m1 = "dg.matmul"(%q, %xt) : (tensor<3x5x4xf32>, tensor<3x4x5xf32>) -> tensor<3x5x5xf32>
  %bt = "dg.transpose"(%b) {perm = array<i64: 0, 2, 1>} : (tensor<3x5x4xf32>) -> tensor<3x4x5xf32>
  %s = "dg.full"() {value = 2.0 : f64} : () -> tensor<3x4x5xf32>
  %y = "dg.mul"(%bt, %s) : (tensor<3x4x5xf32>, tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
  %m2 = "dg.matmul"(%q, %y) : (tensor<3x5x4xf32>, tensor<3x4x5xf32>) -> tensor<3x5x5xf32>
  %ys = "dg.transpose"(%y) {perm = array<i64: 0, 2, 1>} : (tensor<3x4x5xf32>) -> tensor<3x5x4xf32>
  %ct = "dg.transpose"(%c) {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x3x4x5xf32>) -> tensor<2x3x5x4xf32>
  %s4 = "dg.full"() {value = 2.0 : f64} : () -> tensor<2x3x5x4xf32>
  %z = "dg.mul"(%ct, %s4) : (tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>) -> tensor<2x3x5x4xf32>
  %c4 = "dg.reshape"(%c) : (tensor<2x3x4x5xf32>) -> tensor<2x3x4x5xf32>
  %m3 = "dg.matmul"(%z, %c4) : (tensor<2x3x5x4xf32>, tensor<2x3x4x5xf32>) -> tensor<2x3x5x5xf32>
  %ait = "dg.transpose"(%ai) {perm = array<i64: 0, 2, 1>} : (tensor<3x4x5xi64>) -> tensor<3x5x4xi64>
  %si = "dg.full"() {value = 2.0 : f64} : () -> tensor<3x5x4xi64>
  %w = "dg.mul"(%ait, %si) : (tensor<3x5x4xi64>, tensor<3x5x4xi64>) -> tensor<3x5x4xi64>
  %m4 = "dg.matmul"(%qi, %w) : (tensor<3x5x5xi64>, tensor<3x5x4xi64>) -> tensor<3x5x4xi64>
  return %m1, %m2, %ys, %m3, %m4 : tensor<3x5x5xf32>, tensor<3x5x5xf32>, tensor<3x5x4xf32>, tensor<2x3x5x5xf32>, tensor<3x5x4xi64>
}

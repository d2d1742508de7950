// Lowering a fusion region for the CPU (row-bytes-max > 0): a transcendental that
// both the region's reduction and its full-shape output compute per element (a
// softmax backward's exp) is evaluated once, by its own loop nest, and read by
// both; dg-cpu-kernels keeps that tensor one row at a time. Without the option
// (the GPU pipeline), or when a row of it is larger than the limit, or when only
// one nest uses it, each nest computes it.
// RUN: fusegrad-opt %s -p 'dg-lower-to-linalg{row-bytes-max=64}' | filecheck %s
// RUN: fusegrad-opt %s -p 'dg-lower-to-linalg' | filecheck %s --check-prefix=OFF

// CHECK-LABEL: func.func @softmax_grad(
// CHECK: %[[E:.*]] = linalg.generic
// CHECK: math.exp
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins({{.*}}%[[E]]{{[ ,]}}
// CHECK-NOT: math.exp
// CHECK: linalg.generic {{.*}} ins({{.*}}%[[E]]{{[ ,]}}
// CHECK-NOT: math.exp
// CHECK: return
// OFF-LABEL: func.func @softmax_grad(
// OFF-COUNT-2: math.exp
func.func @softmax_grad(%x: tensor<4x8xf32>, %g: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = scf.execute_region -> tensor<4x8xf32> no_inline {
    %e = "dg.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %p = "dg.mul"(%e, %g) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = "dg.reduce_sum"(%p) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
    %b = "dg.broadcast_in_dim"(%s) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
    %d = "dg.sub"(%g, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = "dg.mul"(%e, %d) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    scf.yield %y : tensor<4x8xf32>
  } {dg.fusion}
  return %r : tensor<4x8xf32>
}

// A row of 16 f32 is 64 bytes: at the limit. A row of 32 is over it.
// CHECK-LABEL: func.func @wide_rows(
// CHECK-COUNT-2: math.exp
func.func @wide_rows(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %r = scf.execute_region -> tensor<4x32xf32> no_inline {
    %e = "dg.exp"(%x) : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %s = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<4x32xf32>) -> tensor<4xf32>
    %b = "dg.broadcast_in_dim"(%s) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x32xf32>
    %y = "dg.mul"(%e, %b) : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    scf.yield %y : tensor<4x32xf32>
  } {dg.fusion}
  return %r : tensor<4x32xf32>
}

// Only the output computes it: one nest, nothing to share.
// CHECK-LABEL: func.func @output_only(
// CHECK: linalg.generic
// CHECK-NOT: math.exp
// CHECK: linalg.generic
// CHECK: math.exp
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @output_only(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = scf.execute_region -> tensor<4x8xf32> no_inline {
    %s = "dg.reduce_sum"(%x) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
    %b = "dg.broadcast_in_dim"(%s) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
    %d = "dg.sub"(%x, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = "dg.exp"(%d) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    scf.yield %y : tensor<4x8xf32>
  } {dg.fusion}
  return %r : tensor<4x8xf32>
}

// A rank-0 region (a loss of one scalar) has no rows: nothing to share.
// CHECK-LABEL: func.func @scalar(
// CHECK-COUNT-2: math.exp
func.func @scalar(%x: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
  %r:2 = scf.execute_region -> (tensor<f32>, tensor<f32>) no_inline {
    %e = "dg.exp"(%x) : (tensor<f32>) -> tensor<f32>
    %s = "dg.reduce_sum"(%e) {dims = array<i64>} : (tensor<f32>) -> tensor<f32>
    %y = "dg.mul"(%e, %s) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    scf.yield %s, %y : tensor<f32>, tensor<f32>
  } {dg.fusion}
  return %r#0, %r#1 : tensor<f32>, tensor<f32>
}

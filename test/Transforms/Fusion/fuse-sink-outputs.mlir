// dg-fuse: a cheap value that a region computes and stores only for regions
// that could not fuse with it (a kernel runs between them) is recomputed by
// those regions from the first region's inputs instead of stored and loaded.
// RUN: fusegrad-opt %s -p dg-fuse | filecheck %s

// %t = x + x (read by more ops than dg-fuse copies a value for before grouping)
// feeds the matmul through %r and, after the matmul, four ops that form one
// region. That region recomputes %t; the first one yields only %r.
// CHECK-LABEL: func.func @after_kernel(
// CHECK: scf.execute_region -> tensor<4x4xf32> no_inline {
// CHECK-NEXT: "dg.add"
// CHECK-NEXT: "dg.neg"
// CHECK-NEXT: scf.yield
// CHECK: "dg.matmul"
// CHECK: scf.execute_region -> tensor<4x4xf32> no_inline {
// CHECK-NEXT: %[[T:.*]] = "dg.add"(%arg0, %arg0)
// CHECK-NEXT: "dg.mul"(%[[T]], %{{.*}})
func.func @after_kernel(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %t = "dg.add"(%x, %x) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = "dg.neg"(%t) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %k = "dg.matmul"(%r, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %a = "dg.mul"(%t, %k) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = "dg.sub"(%t, %a) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %c = "dg.max"(%t, %b) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %d = "dg.div"(%c, %t) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}

// A single op reading the value becomes a region of its own to take the cone.
// CHECK-LABEL: func.func @single_reader(
// CHECK: scf.execute_region -> tensor<4x4xf32> no_inline {
// CHECK-COUNT-5: "dg.
// CHECK-NEXT: scf.yield
// CHECK: "dg.matmul"
// CHECK: scf.execute_region -> tensor<4x4xf32> no_inline {
// CHECK-NEXT: "dg.add"(%arg0, %arg0)
// CHECK-NEXT: "dg.mul"
// CHECK-NEXT: scf.yield
func.func @single_reader(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %t = "dg.add"(%x, %x) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r1 = "dg.neg"(%t) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %r2 = "dg.mul"(%t, %r1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r3 = "dg.sub"(%t, %r2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r4 = "dg.max"(%t, %r3) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %k = "dg.matmul"(%r4, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %u = "dg.mul"(%t, %k) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %u : tensor<4x4xf32>
}

// A cheap value computed from another output of its region is recomputed by its
// reader from that output: 2 * s for a residual sum s = (x + a) + b that the region
// stores anyway (matmuls read it, and it has more readers than grouping copies a value
// for), not from the sum's three inputs.
// CHECK-LABEL: func.func @from_an_output(
// CHECK: %[[R:.*]]:4 = scf.execute_region
// CHECK: "dg.matmul"
// CHECK: scf.execute_region -> tensor<4x4xf32> no_inline {
// CHECK-NEXT: %[[TWO:.*]] = "dg.full"() {value = 2.000000e+00 : f64}
// CHECK-NEXT: "dg.mul"(%[[TWO]], %[[R]]#
func.func @from_an_output(%x: tensor<4x4xf32>, %a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %s1 = "dg.add"(%x, %a) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %s = "dg.add"(%s1, %b) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %t1 = "dg.neg"(%s) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %t2 = "dg.abs"(%s) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %t3 = "dg.exp"(%s) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %two = "dg.full"() {value = 2.0 : f64} : () -> tensor<4x4xf32>
  %d = "dg.mul"(%two, %s) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %k = "dg.matmul"(%s, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %k1 = "dg.matmul"(%t1, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %k2 = "dg.matmul"(%t2, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %k3 = "dg.matmul"(%t3, %w) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = "dg.add"(%k, %k1) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m2 = "dg.add"(%k2, %k3) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = "dg.add"(%m1, %m2) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = "dg.mul"(%d, %m) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}

// Several cheap outputs of one region, each read by regions after a kernel: a = x + b
// and n = -a go to both later regions, and only the ReLU output, which a matmul and a
// slice read, stays stored. A cone reads an output only if that output stays stored
// (before, n's cone read a, so a was stored: the start of a CNN's backward stored
// x + bias, x - mean and the ReLU output of each layer).
// CHECK-LABEL: func.func @recomputed_outputs(
// CHECK: %[[R:.*]] = scf.execute_region -> tensor<8x16xf32> no_inline {
// CHECK: "dg.matmul"(%[[R]], %arg2)
// CHECK: scf.execute_region -> tensor<16xf32> no_inline {
// CHECK-NEXT: "dg.broadcast_in_dim"(%arg1)
// CHECK-NEXT: "dg.add"(%arg0,
// CHECK: "dg.matmul"
// CHECK: scf.execute_region -> tensor<16xf32> no_inline {
// CHECK-NEXT: "dg.broadcast_in_dim"(%arg1)
// CHECK-NEXT: "dg.add"(%arg0,
// CHECK: "dg.slice"(%[[R]])
func.func @recomputed_outputs(%x: tensor<8x16xf32>, %b: tensor<16xf32>, %w: tensor<16x16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<4x16xf32>) {
  %bb = "dg.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<8x16xf32>
  %a = "dg.add"(%x, %bb) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %n = "dg.neg"(%a) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %z = "dg.full"() {value = 0.0 : f64} : () -> tensor<8x16xf32>
  %r = "dg.max"(%n, %z) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %k = "dg.matmul"(%r, %w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %u = "dg.mul"(%a, %k) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %u2 = "dg.mul"(%n, %u) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %su = "dg.reduce_sum"(%u2) {dims = array<i64: 0>} : (tensor<8x16xf32>) -> tensor<16xf32>
  %k2 = "dg.matmul"(%k, %w) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %p = "dg.mul"(%n, %k2) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %p2 = "dg.add"(%a, %p) : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %sp = "dg.reduce_sum"(%p2) {dims = array<i64: 0>} : (tensor<8x16xf32>) -> tensor<16xf32>
  %s = "dg.slice"(%r) {start = array<i64: 0, 0>, limit = array<i64: 8, 16>, stride = array<i64: 2, 1>} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  return %su, %sp, %s : tensor<16xf32>, tensor<16xf32>, tensor<4x16xf32>
}

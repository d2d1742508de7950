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

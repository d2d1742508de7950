// Lowering a fusion region: a division by a value invariant along the innermost
// loop (a row's sum) becomes a multiplication by its reciprocal, which LLVM hoists out
// of the loop: one division per row instead of one per element (as eager's softmax). A
// divisor that varies along the innermost loop stays a division, and so does a
// constant (a mean's or variance's count, as in eager: the rounded reciprocal of 4095
// erred by up to an ulp; LLVM multiplies where the reciprocal is exact).
// RUN: fusegrad-opt %s -p 'dg-lower-to-linalg' | filecheck %s

// CHECK-LABEL: func.func @normalize(
// CHECK: linalg.generic
// CHECK: arith.addf
// CHECK: linalg.generic
// CHECK: ^bb0(%[[X:.*]]: f32, %[[S:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[R:.*]] = arith.divf %{{.*}}, %[[S]] : f32
// CHECK: arith.mulf %[[X]], %[[R]] : f32
func.func @normalize(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = scf.execute_region -> tensor<4x8xf32> no_inline {
    %s = "dg.reduce_sum"(%x) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
    %b = "dg.broadcast_in_dim"(%s) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
    %y = "dg.div"(%x, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    scf.yield %y : tensor<4x8xf32>
  } {dg.fusion}
  return %r : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @elementwise(
// CHECK: arith.divf %{{.*}}, %{{.*}} : f32
// CHECK-NOT: arith.mulf
func.func @elementwise(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = scf.execute_region -> tensor<4x8xf32> no_inline {
    %e = "dg.exp"(%y) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %q = "dg.div"(%x, %e) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    scf.yield %q : tensor<4x8xf32>
  } {dg.fusion}
  return %r : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @variance(
// CHECK: linalg.generic
// CHECK: %[[N:.*]] = arith.constant 4.095000e+03 : f32
// CHECK: arith.divf %{{.*}}, %[[N]] : f32
// CHECK-NOT: arith.mulf
func.func @variance(%x: tensor<4x4096xf32>) -> tensor<4xf32> {
  %r = scf.execute_region -> tensor<4xf32> no_inline {
    %s = "dg.reduce_sum"(%x) {dims = array<i64: 1>} : (tensor<4x4096xf32>) -> tensor<4xf32>
    %n = "dg.full"() {value = 4.095000e+03 : f64} : () -> tensor<4xf32>
    %v = "dg.div"(%s, %n) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %v : tensor<4xf32>
  } {dg.fusion}
  return %r : tensor<4xf32>
}

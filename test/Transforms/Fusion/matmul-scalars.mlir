// dg-matmul-scalars: `(x * c) @ y` becomes `(x @ y) * c` when the product's readers
// are pointwise (through reshapes, after which the scaling goes); a splat scaling
// already on the product takes the factor (c * c2). Kept: a product the function
// returns (it would need a scaling pass of its own), a scaled operand read twice,
// an integer matmul.
// RUN: fusegrad-opt %s -p dg-matmul-scalars | filecheck %s

// Attention's scores with both operands scaled by sqrt(1/sqrt(d)): the product is
// scaled once, by both factors, after the reshape, where the softmax's exp reads it.
// CHECK-LABEL: func.func @scores(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<6x5x4xf32>, %[[K:[^:]*]]: tensor<6x4x5xf32>
// CHECK: %[[P:.*]] = "dg.matmul"(%[[Q]], %[[K]]) : (tensor<6x5x4xf32>, tensor<6x4x5xf32>) -> tensor<6x5x5xf32>
// CHECK: %[[R:.*]] = "dg.reshape"(%[[P]]) : (tensor<6x5x5xf32>) -> tensor<2x3x5x5xf32>
// CHECK: %[[C:.*]] = "dg.full"() {value = 2.500000e-01 : f64} : () -> tensor<2x3x5x5xf32>
// CHECK: %[[S:.*]] = "dg.mul"(%[[R]], %[[C]])
// CHECK-NOT: "dg.mul"
// CHECK: "dg.exp"(%[[S]])
func.func @scores(%q: tensor<6x5x4xf32>, %k: tensor<6x4x5xf32>) -> tensor<2x3x5x5xf32> {
  %s = "dg.full"() {value = 0.5 : f64} : () -> tensor<6x5x4xf32>
  %qs = "dg.mul"(%q, %s) : (tensor<6x5x4xf32>, tensor<6x5x4xf32>) -> tensor<6x5x4xf32>
  %t = "dg.full"() {value = 0.5 : f64} : () -> tensor<6x4x5xf32>
  %ks = "dg.mul"(%t, %k) : (tensor<6x4x5xf32>, tensor<6x4x5xf32>) -> tensor<6x4x5xf32>
  %m = "dg.matmul"(%qs, %ks) : (tensor<6x5x4xf32>, tensor<6x4x5xf32>) -> tensor<6x5x5xf32>
  %r = "dg.reshape"(%m) : (tensor<6x5x5xf32>) -> tensor<2x3x5x5xf32>
  %e = "dg.exp"(%r) : (tensor<2x3x5x5xf32>) -> tensor<2x3x5x5xf32>
  return %e : tensor<2x3x5x5xf32>
}

// The key gradient, dS^T (q * c), scaled again: one scaling by c * c2, the factor
// seen through the operand's transpose and reshape.
// CHECK-LABEL: func.func @scaled_twice(
// CHECK: %[[T:.*]] = "dg.transpose"(%arg1)
// CHECK: %[[P:.*]] = "dg.matmul"(%[[T]], %arg0)
// CHECK: %[[C:.*]] = "dg.full"() {value = 1.250000e-01 : f64}
// CHECK: %[[S:.*]] = "dg.mul"(%[[P]], %[[C]])
// CHECK-NOT: "dg.mul"
// CHECK: "dg.neg"(%[[S]])
func.func @scaled_twice(%q: tensor<6x5x4xf32>, %ds: tensor<6x5x5xf32>) -> tensor<6x5x4xf32> {
  %s = "dg.full"() {value = 0.5 : f64} : () -> tensor<6x5x4xf32>
  %qs = "dg.mul"(%q, %s) : (tensor<6x5x4xf32>, tensor<6x5x4xf32>) -> tensor<6x5x4xf32>
  %dst = "dg.transpose"(%ds) {perm = array<i64: 0, 2, 1>} : (tensor<6x5x5xf32>) -> tensor<6x5x5xf32>
  %m = "dg.matmul"(%dst, %qs) : (tensor<6x5x5xf32>, tensor<6x5x4xf32>) -> tensor<6x5x4xf32>
  %c = "dg.full"() {value = 0.25 : f64} : () -> tensor<6x5x4xf32>
  %g = "dg.mul"(%m, %c) : (tensor<6x5x4xf32>, tensor<6x5x4xf32>) -> tensor<6x5x4xf32>
  %n = "dg.neg"(%g) : (tensor<6x5x4xf32>) -> tensor<6x5x4xf32>
  return %n : tensor<6x5x4xf32>
}

// CHECK-LABEL: func.func @kept(
// CHECK-COUNT-3: "dg.mul"(%arg
func.func @kept(%a: tensor<4x3xf32>, %b: tensor<3x2xf32>, %i: tensor<4x3xi64>, %j: tensor<3x2xi64>)
    -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x3xf32>, tensor<4x2xi64>) {
  %s = "dg.full"() {value = 2.0 : f64} : () -> tensor<4x3xf32>
  %as = "dg.mul"(%a, %s) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %returned = "dg.matmul"(%as, %b) : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %a2 = "dg.mul"(%a, %s) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %twice = "dg.matmul"(%a2, %b) : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  %e = "dg.exp"(%twice) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  %si = "dg.full"() {value = 2.0 : f64} : () -> tensor<4x3xi64>
  %is = "dg.mul"(%i, %si) : (tensor<4x3xi64>, tensor<4x3xi64>) -> tensor<4x3xi64>
  %int = "dg.matmul"(%is, %j) : (tensor<4x3xi64>, tensor<3x2xi64>) -> tensor<4x2xi64>
  %n = "dg.neg"(%int) : (tensor<4x2xi64>) -> tensor<4x2xi64>
  return %returned, %e, %a2, %n : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x3xf32>, tensor<4x2xi64>
}

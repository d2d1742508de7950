// dg-hoist-reshapes: the reshape of `x @ W + b` moves up to the matmul (a view of
// its result), so the bias add runs in the reshaped shape, next to the tanh that
// reads it (one fusion region instead of two). The bias broadcast is rebuilt over
// the reshaped dims. Not moved: a reshape of a pointwise op that also has another
// reader (@shared), or whose operand is not a contraction result, an argument, a
// splat or a broadcast (@chain: the exp is not moved into the reshaped shape), or
// whose broadcast operand keeps a dim the reshape splits (@split_bias: nothing is
// emitted). A reshape operand that the moved reshape undoes counts as a boundary
// (@undone), and so does a reshape of a contraction's result (@viewed_product: the
// two reshapes compose).
// RUN: fusegrad-opt %s -p 'dg-hoist-reshapes' | filecheck %s

// CHECK-LABEL: func.func @bias_add(
// CHECK: %[[MM:.*]] = "dg.matmul"
// CHECK: %[[V:.*]] = "dg.reshape"(%[[MM]]) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
// CHECK: %[[B:.*]] = "dg.broadcast_in_dim"(%arg2) {dims = array<i64: 2>} : (tensor<4xf32>) -> tensor<2x4x4xf32>
// CHECK: %[[A:.*]] = "dg.add"(%[[V]], %[[B]]) : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
// CHECK: "dg.tanh"(%[[A]])
func.func @bias_add(%x: tensor<8x3xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<2x4x4xf32> {
  %0 = "dg.matmul"(%x, %w) : (tensor<8x3xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  %1 = "dg.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<4xf32>) -> tensor<8x4xf32>
  %2 = "dg.add"(%0, %1) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %3 = "dg.reshape"(%2) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %4 = "dg.tanh"(%3) : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  return %4 : tensor<2x4x4xf32>
}

// CHECK-LABEL: func.func @shared(
// CHECK: %[[A:.*]] = "dg.add"
// CHECK: "dg.reshape"(%[[A]])
func.func @shared(%x: tensor<8x3xf32>, %w: tensor<3x4xf32>, %b: tensor<8x4xf32>) -> (tensor<2x4x4xf32>, tensor<8x4xf32>) {
  %0 = "dg.matmul"(%x, %w) : (tensor<8x3xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  %1 = "dg.add"(%0, %b) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = "dg.reshape"(%1) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
  return %2, %1 : tensor<2x4x4xf32>, tensor<8x4xf32>
}

// CHECK-LABEL: func.func @chain(
// CHECK: %[[E:.*]] = "dg.exp"(%arg0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK: %[[N:.*]] = "dg.neg"(%[[E]]) : (tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK: "dg.reshape"(%[[N]])
func.func @chain(%x: tensor<8x4xf32>) -> tensor<2x4x4xf32> {
  %0 = "dg.exp"(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = "dg.neg"(%0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = "dg.reshape"(%1) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
  return %2 : tensor<2x4x4xf32>
}

// CHECK-LABEL: func.func @split_bias(
// CHECK-NEXT: "dg.matmul"
// CHECK-NEXT: "dg.broadcast_in_dim"(%arg2) {dims = array<i64: 0>}
// CHECK-NEXT: %[[A:.*]] = "dg.add"
// CHECK-NEXT: "dg.reshape"(%[[A]]) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT: return
func.func @split_bias(%x: tensor<8x3xf32>, %w: tensor<3x4xf32>, %b: tensor<8xf32>) -> tensor<2x4x4xf32> {
  %0 = "dg.matmul"(%x, %w) : (tensor<8x3xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  %1 = "dg.broadcast_in_dim"(%b) {dims = array<i64: 0>} : (tensor<8xf32>) -> tensor<8x4xf32>
  %2 = "dg.add"(%0, %1) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %3 = "dg.reshape"(%2) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
  return %3 : tensor<2x4x4xf32>
}

// A reshape that the hoisted one undoes cancels against it: the add of a 3-D
// cotangent to a 2-D gradient (HF logits) runs in the 2-D shape, next to the neg.
// CHECK-LABEL: func.func @undone(
// CHECK:      %[[N:.*]] = "dg.neg"(%{{.*}}) : (tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = "dg.reshape"(%arg1) : (tensor<2x4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = "dg.add"(%[[C]], %[[N]]) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: return %[[A]]
func.func @undone(%x: tensor<8x4xf32>, %ct: tensor<2x4x4xf32>) -> tensor<8x4xf32> {
  %0 = "dg.exp"(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %n = "dg.neg"(%0) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = "dg.reshape"(%n) : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %2 = "dg.add"(%ct, %1) : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %3 = "dg.reshape"(%2) : (tensor<2x4x4xf32>) -> tensor<8x4xf32>
  return %3 : tensor<8x4xf32>
}

// Attention's key gradient, scaled, then split into the heads of a key group: the
// scaling runs in the split shape, where the sum over the group reads it.
// CHECK-LABEL: func.func @viewed_product(
// CHECK: %[[P:.*]] = "dg.matmul"
// CHECK-NEXT: %[[V:.*]] = "dg.reshape"(%[[P]]) : (tensor<8x5x4xf32>) -> tensor<2x2x2x5x4xf32>
// CHECK-NEXT: %[[S:.*]] = "dg.full"() {{.*}} -> tensor<2x2x2x5x4xf32>
// CHECK-NEXT: %[[M:.*]] = "dg.mul"(%[[V]], %[[S]])
// CHECK-NEXT: "dg.reduce_sum"(%[[M]])
func.func @viewed_product(%a: tensor<8x5x3xf32>, %b: tensor<8x3x4xf32>) -> tensor<2x2x5x4xf32> {
  %0 = "dg.matmul"(%a, %b) : (tensor<8x5x3xf32>, tensor<8x3x4xf32>) -> tensor<8x5x4xf32>
  %1 = "dg.reshape"(%0) : (tensor<8x5x4xf32>) -> tensor<2x4x5x4xf32>
  %s = "dg.full"() {value = 0.125 : f64} : () -> tensor<2x4x5x4xf32>
  %2 = "dg.mul"(%1, %s) : (tensor<2x4x5x4xf32>, tensor<2x4x5x4xf32>) -> tensor<2x4x5x4xf32>
  %3 = "dg.reshape"(%2) : (tensor<2x4x5x4xf32>) -> tensor<2x2x2x5x4xf32>
  %4 = "dg.reduce_sum"(%3) {dims = array<i64: 2>} : (tensor<2x2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  return %4 : tensor<2x2x5x4xf32>
}

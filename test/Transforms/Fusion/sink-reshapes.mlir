// dg-sink-reshapes: a pointwise op that reads a reshape of a fusing op's result
// computes in the source shape and is reshaped after, so it joins that op's region
// (@loss_grad: HF's loss rounds the logits' gradient to bf16 after viewing it as
// [batch, tokens, vocabulary]). A splat or broadcast operand is rebuilt in the source
// shape (@with_broadcast), an operand read twice is reshaped once (@square), and a
// sunk op's pointwise reader sinks next (@chain). Not
// moved: a reshape of an argument or a contraction (@of_argument, @of_product: there
// dg-hoist-reshapes puts the op after the reshape), reshapes from two shapes
// (@two_shapes), or a broadcast that keeps a dim the reshape splits (@split_broadcast).
// RUN: fusegrad-opt %s -p 'dg-sink-reshapes' | filecheck %s

// CHECK-LABEL: func.func @loss_grad(
// CHECK: %[[G:.*]] = "dg.mul"
// CHECK-NEXT: %[[C:.*]] = "dg.convert"(%[[G]]) : (tensor<6x5xf32>) -> tensor<6x5xbf16>
// CHECK-NEXT: %[[R:.*]] = "dg.reshape"(%[[C]]) : (tensor<6x5xbf16>) -> tensor<2x3x5xbf16>
// CHECK-NEXT: return %[[R]]
func.func @loss_grad(%p: tensor<6x5xf32>, %s: tensor<6x5xf32>) -> tensor<2x3x5xbf16> {
  %0 = "dg.mul"(%p, %s) : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
  %1 = "dg.reshape"(%0) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
  %2 = "dg.convert"(%1) : (tensor<2x3x5xf32>) -> tensor<2x3x5xbf16>
  return %2 : tensor<2x3x5xbf16>
}

// CHECK-LABEL: func.func @with_broadcast(
// CHECK: %[[E:.*]] = "dg.exp"(%arg0)
// CHECK: %[[B:.*]] = "dg.broadcast_in_dim"(%arg1) {dims = array<i64: 1>} : (tensor<5xf32>) -> tensor<6x5xf32>
// CHECK: %[[A:.*]] = "dg.add"(%[[E]], %[[B]]) : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
// CHECK: %[[H:.*]] = "dg.full"() {value = 5.000000e-01 : f64} : () -> tensor<6x5xf32>
// CHECK: %[[M:.*]] = "dg.mul"(%[[A]], %[[H]]) : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
// CHECK: "dg.reshape"(%[[M]]) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
func.func @with_broadcast(%x: tensor<6x5xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  %0 = "dg.exp"(%x) : (tensor<6x5xf32>) -> tensor<6x5xf32>
  %1 = "dg.reshape"(%0) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
  %2 = "dg.broadcast_in_dim"(%b) {dims = array<i64: 2>} : (tensor<5xf32>) -> tensor<2x3x5xf32>
  %3 = "dg.add"(%1, %2) : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %4 = "dg.full"() {value = 5.000000e-01 : f64} : () -> tensor<2x3x5xf32>
  %5 = "dg.mul"(%3, %4) : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %5 : tensor<2x3x5xf32>
}

// CHECK-LABEL: func.func @square(
// CHECK: %[[E:.*]] = "dg.exp"(%arg0)
// CHECK-NEXT: %[[M:.*]] = "dg.mul"(%[[E]], %[[E]]) : (tensor<6x5xf32>, tensor<6x5xf32>) -> tensor<6x5xf32>
// CHECK-NEXT: "dg.reshape"(%[[M]]) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
func.func @square(%x: tensor<6x5xf32>) -> tensor<2x3x5xf32> {
  %0 = "dg.exp"(%x) : (tensor<6x5xf32>) -> tensor<6x5xf32>
  %1 = "dg.reshape"(%0) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
  %2 = "dg.mul"(%1, %1) : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %2 : tensor<2x3x5xf32>
}

// CHECK-LABEL: func.func @chain(
// CHECK: %[[E:.*]] = "dg.exp"(%arg0) : (tensor<6x5xf32>)
// CHECK-NEXT: %[[N:.*]] = "dg.neg"(%[[E]]) : (tensor<6x5xf32>)
// CHECK-NEXT: %[[T:.*]] = "dg.tanh"(%[[N]]) : (tensor<6x5xf32>)
// CHECK-NEXT: "dg.reshape"(%[[T]]) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
func.func @chain(%x: tensor<6x5xf32>) -> tensor<2x3x5xf32> {
  %0 = "dg.exp"(%x) : (tensor<6x5xf32>) -> tensor<6x5xf32>
  %1 = "dg.reshape"(%0) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
  %2 = "dg.neg"(%1) : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  %3 = "dg.tanh"(%2) : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %3 : tensor<2x3x5xf32>
}

// CHECK-LABEL: func.func @of_argument(
// CHECK-NEXT: "dg.reshape"(%arg0)
// CHECK-NEXT: "dg.exp"
func.func @of_argument(%x: tensor<6x5xf32>) -> tensor<2x3x5xf32> {
  %0 = "dg.reshape"(%x) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
  %1 = "dg.exp"(%0) : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %1 : tensor<2x3x5xf32>
}

// CHECK-LABEL: func.func @of_product(
// CHECK: "dg.matmul"
// CHECK-NEXT: "dg.reshape"
// CHECK-NEXT: "dg.tanh"
func.func @of_product(%x: tensor<6x4xf32>, %w: tensor<4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = "dg.matmul"(%x, %w) : (tensor<6x4xf32>, tensor<4x5xf32>) -> tensor<6x5xf32>
  %1 = "dg.reshape"(%0) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
  %2 = "dg.tanh"(%1) : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %2 : tensor<2x3x5xf32>
}

// CHECK-LABEL: func.func @two_shapes(
// CHECK: "dg.add"({{.*}}) : (tensor<2x3x5xf32>, tensor<2x3x5xf32>)
func.func @two_shapes(%x: tensor<6x5xf32>, %y: tensor<2x15xf32>) -> tensor<2x3x5xf32> {
  %0 = "dg.exp"(%x) : (tensor<6x5xf32>) -> tensor<6x5xf32>
  %1 = "dg.reshape"(%0) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
  %2 = "dg.exp"(%y) : (tensor<2x15xf32>) -> tensor<2x15xf32>
  %3 = "dg.reshape"(%2) : (tensor<2x15xf32>) -> tensor<2x3x5xf32>
  %4 = "dg.add"(%1, %3) : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %4 : tensor<2x3x5xf32>
}

// CHECK-LABEL: func.func @split_broadcast(
// CHECK: "dg.add"({{.*}}) : (tensor<2x3x5xf32>, tensor<2x3x5xf32>)
func.func @split_broadcast(%x: tensor<6x5xf32>, %b: tensor<3xf32>) -> tensor<2x3x5xf32> {
  %0 = "dg.exp"(%x) : (tensor<6x5xf32>) -> tensor<6x5xf32>
  %1 = "dg.reshape"(%0) : (tensor<6x5xf32>) -> tensor<2x3x5xf32>
  %2 = "dg.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<2x3x5xf32>
  %3 = "dg.add"(%1, %2) : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
  return %3 : tensor<2x3x5xf32>
}

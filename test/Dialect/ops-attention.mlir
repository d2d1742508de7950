// Round trip: attention and its gradient parse, verify and print back unchanged.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// Two heads of 4 queries over 6 keys of width 8, a mask broadcast over batch and heads.
// CHECK-LABEL: func.func @attention(
// CHECK-NEXT: %0:2 = "dg.attention"(%arg0, %arg1, %arg2, %arg3) {causal = 1 : i64, scale = 2.500000e-01 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
// CHECK-NEXT: %1:3 = "dg.attention_grad"(%arg4, %arg0, %arg1, %arg2, %0#0, %0#1, %arg3) {causal = 1 : i64, scale = 2.500000e-01 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
// CHECK-NEXT: return %1#0, %1#1, %1#2
func.func @attention(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %m: tensor<1x1x4x6xf32>, %g: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) {
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  %d:3 = "dg.attention_grad"(%g, %q, %k, %v, %o#0, %o#1, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %d#0, %d#1, %d#2 : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>
}

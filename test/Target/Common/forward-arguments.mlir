// dg-forward-arguments drops the results that are arguments (a forward returning an
// input it saves for its backward) and records them as dg.forwarded = [result,
// argument, ...]: the runtime hands the argument back instead of copying it.
// RUN: fusegrad-opt %s -p dg-forward-arguments | filecheck %s

// CHECK-LABEL: func.func @f_fwd(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32>
// CHECK-SAME: dg.forwarded = array<i64: 1, 1>
// CHECK: %[[SUM:.*]] = "dg.add"
// CHECK: return %[[SUM]] : tensor<4xf32>
func.func @f_fwd(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "dg.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %b : tensor<4xf32>, tensor<4xf32>
}

// An entry returning no argument is left as it is.
// CHECK-LABEL: func.func @g
// CHECK-NOT: dg.forwarded
func.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dg.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

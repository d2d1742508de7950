// dg-verify runs on the parsed input, before any pass: a shape error is located.
// RUN: not fusegrad-opt %s 2>&1 | filecheck %s
// RUN: not fusegrad-opt %s -p 'func.func(canonicalize)' 2>&1 | filecheck %s
// CHECK: shape-mismatch.mlir:8:8: error: 'dg.add' op operand #1 has shape [3] but operand #0 has [4]
// CHECK-NOT: Traceback

func.func @f(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
  %0 = "dg.add"(%a, %b) : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

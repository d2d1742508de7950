// An op missing from the dg table is rejected where it appears.
// RUN: not fusegrad-opt %s 2>&1 | filecheck %s
// CHECK: unknown-op.mlir:7:8: error: unregistered operation 'dg.frobnicate'
// CHECK-NOT: Traceback

func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dg.frobnicate"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

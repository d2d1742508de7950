// A syntax error is one located diagnostic and exit 1, never a traceback.
// RUN: not fusegrad-opt %s 2>&1 | filecheck %s
// CHECK: syntax-error.mlir:6:16: error: expected ':'
// CHECK-NOT: Traceback

func.func @f(%a tensor<4xf32>) {
  return
}

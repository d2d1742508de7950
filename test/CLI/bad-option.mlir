// Unknown command-line options exit 1 with an mlir-opt style message.
// RUN: not fusegrad-opt %s --no-such-flag 2>&1 | filecheck %s
// CHECK: fusegrad-opt: error: unrecognized arguments: --no-such-flag
// CHECK-NOT: Traceback

func.func @f() {
  return
}

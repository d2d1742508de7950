// A dg op that cannot be lowered is a located error naming the op and the cause,
// and the tool exits non-zero.
// RUN: not fusegrad-opt %s -p dg-lower-to-linalg 2>&1 | filecheck %s

// CHECK: lower-error.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: dg-lower-to-linalg: lowering dg.full failed: ValueError: cannot convert float NaN to integer
func.func @f() -> tensor<2xi64> {
  %0 = "dg.full"() {value = 0x7FF8000000000000 : f64} : () -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

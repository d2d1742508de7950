// RUN: not fusegrad-opt %s -p dg-autodiff 2>&1 | filecheck %s

// Only dg ops are differentiable; the error points at the offending op (line 6).
// CHECK: autodiff-errors.mlir:6:8: error: dg-autodiff: cannot differentiate 'arith.addf' in @f
func.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = arith.addf %x, %x : tensor<3xf32>
  return %0 : tensor<3xf32>
}

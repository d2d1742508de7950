// dg-keep-functions erases the public functions a compile does not lower; private
// ones (what the kept functions call) stay. Without names it is an error, not an
// emptied module.
// RUN: fusegrad-opt %s -p 'dg-keep-functions{names=f_bwd}' | filecheck %s
// RUN: not fusegrad-opt %s -p 'dg-keep-functions' 2>&1 | filecheck %s --check-prefix=ERR

// CHECK-NOT: func.func @f_fwd
// CHECK: func.func private @helper
// CHECK: func.func @f_bwd
// ERR: error: dg-keep-functions: name the public functions to keep (names=f_fwd,f_bwd)
func.func @f_fwd(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
func.func private @helper(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
func.func @f_bwd(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @helper(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

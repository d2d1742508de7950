// --list-pipelines prints every named pipeline with its elements, in the order they
// run; a named pipeline is one element of -p.
// RUN: fusegrad-opt --list-pipelines | filecheck %s
// RUN: fusegrad-opt %s -p 'dg-autodiff,dg-optimize' | filecheck %s --check-prefix=IR

// CHECK-LABEL: dg-optimize: dg -> dg for the CPU
// CHECK-NEXT:     dg-remat
// CHECK-NEXT:     dg-channels-last
// CHECK-NEXT:     dg-fusion-rewrites
// CHECK-NEXT:     dg-fuse
// CHECK-LABEL: dg-lower-to-llvm:
// CHECK-NEXT:     dg-cpu-linalg
// CHECK-NEXT:     dg-cpu-bufferize
// CHECK-NEXT:     dg-cpu-llvm

// IR-LABEL: func.func @f_fwd
// IR: dg.fusion
// IR-LABEL: func.func @f_bwd
func.func @f(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = "dg.exp"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = "dg.mul"(%0, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

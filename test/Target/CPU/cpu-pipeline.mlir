// The named CPU pipelines run from fusegrad-opt: arguments are read-only to
// bufferization (scatter_add copies its destination instead of updating %x),
// each repeated result gets its own buffer, and the whole lowering reaches LLVM.
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize' | filecheck %s --check-prefix=BUF
// RUN: fusegrad-opt %s -p dg-lower-to-llvm | filecheck %s --check-prefix=LLVM

// BUF-LABEL: func.func @scatter(%arg0: memref<4x3xf32>
// BUF: memref.copy %arg0
// BUF-LABEL: func.func @twice(%arg0: memref<3xf32>, %arg1: memref<3xf32>, %arg2: memref<3xf32>)
// BUF: linalg.generic
// BUF: memref.copy %arg1, %arg2
// LLVM: llvm.func @scatter(
// LLVM: llvm.func @twice(
// LLVM-NOT: dg.
func.func @scatter(%x: tensor<4x3xf32>, %i: tensor<2x3xi64>, %s: tensor<2x3xf32>) -> tensor<4x3xf32> {
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 0 : i64} : (tensor<4x3xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

func.func @twice(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %0 = "dg.exp"(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %0, %0 : tensor<3xf32>, tensor<3xf32>
}

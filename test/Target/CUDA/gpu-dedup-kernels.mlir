// dg-gpu-dedup-kernels: launches of kernels alike (a model's layers repeat theirs) go
// to one outlined gpu.module, and the copies are erased before NVVM and ptxas (@two:
// the same exp on two inputs). Kernels that differ, here only in their grid, stay
// apart (@shapes).
// RUN: fusegrad-opt %s -p 'dg-fuse,dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-library-stubs,dg-gpu-kernels,dg-gpu-outline' | filecheck %s

// CHECK-LABEL: func.func @two(
// CHECK: gpu.launch_func @[[K:two_kernel]]::@two_kernel
// CHECK: gpu.launch_func @[[K]]::@two_kernel
// CHECK: gpu.module @[[K]] {
// CHECK-NOT: gpu.module @two_kernel
// CHECK-LABEL: func.func @shapes(
// CHECK: gpu.launch_func @[[A:shapes_kernel]]::@shapes_kernel
// CHECK: gpu.launch_func @[[B:shapes_kernel_[0-9]+]]::@shapes_kernel
// CHECK: gpu.module @[[A]] {
// CHECK: gpu.module @[[B]] {
func.func @two(%a: tensor<64x300xf32>, %b: tensor<64x300xf32>) -> (tensor<64x300xf32>, tensor<64x300xf32>) {
  %0 = "dg.exp"(%a) : (tensor<64x300xf32>) -> tensor<64x300xf32>
  %1 = "dg.exp"(%b) : (tensor<64x300xf32>) -> tensor<64x300xf32>
  return %0, %1 : tensor<64x300xf32>, tensor<64x300xf32>
}

func.func @shapes(%a: tensor<64x300xf32>, %b: tensor<32x300xf32>) -> (tensor<64x300xf32>, tensor<32x300xf32>) {
  %0 = "dg.exp"(%a) : (tensor<64x300xf32>) -> tensor<64x300xf32>
  %1 = "dg.exp"(%b) : (tensor<32x300xf32>) -> tensor<32x300xf32>
  return %0, %1 : tensor<64x300xf32>, tensor<32x300xf32>
}

// A flip reads its input at `n - 1 - i`: a kernel input may be indexed by any affine
// expression of the loop indices (evaluated per thread), so a flip is a pointwise
// kernel, and a flip fused into a reduction is read the same way there.
// RUN: fusegrad-opt %s -p 'dg-fuse,dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse --ptx sm_90 | filecheck %s

// IR-LABEL: func.func @flip
// IR: gpu.launch
// IR: %[[R:.*]] = arith.remui %{{.*}}, %c7
// IR: %[[Q:.*]] = arith.divui %{{.*}}, %c7
// IR: %[[NQ:.*]] = arith.muli %[[Q]], %c-1
// IR: %[[I:.*]] = arith.addi %[[NQ]], %c4
// IR: %[[NR:.*]] = arith.muli %[[R]], %c-1
// IR: %[[J:.*]] = arith.addi %[[NR]], %c6
// IR: memref.load %arg0[%[[I]], %[[J]]] : memref<5x7xf32>
// IR: memref.store %{{.*}}, %{{.*}}[%[[Q]], %[[R]]]
// IR-LABEL: func.func @flip_sum
// IR: gpu.launch
// IR: arith.addi %{{.*}}, %c299
// IR: math.exp

// CHECK-LABEL: func @flip 
// CHECK-NEXT: launch {{.*}} (arg0, arg1)
// CHECK-LABEL: func @flip_sum
// CHECK: launch
// CHECK: .entry

func.func @flip(%x: tensor<5x7xf32>) -> tensor<5x7xf32> {
  %0 = "dg.reverse"(%x) {dims = array<i64: 0, 1>} : (tensor<5x7xf32>) -> tensor<5x7xf32>
  %1 = "dg.mul"(%0, %0) : (tensor<5x7xf32>, tensor<5x7xf32>) -> tensor<5x7xf32>
  return %1 : tensor<5x7xf32>
}
func.func @flip_sum(%x: tensor<4x300xf32>) -> tensor<4xf32> {
  %0 = "dg.reverse"(%x) {dims = array<i64: 1>} : (tensor<4x300xf32>) -> tensor<4x300xf32>
  %1 = "dg.exp"(%0) : (tensor<4x300xf32>) -> tensor<4x300xf32>
  %2 = "dg.reduce_sum"(%1) {dims = array<i64: 1>} : (tensor<4x300xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

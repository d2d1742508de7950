// A transpose's source buffer written again before the matmul that would read the
// transposed view (bufferization reuses buffers across layers): the transpose stays
// a copy kernel, or the matmul would read the new contents.
// RUN: fusegrad-opt %s -p dg-gpu-kernels | filecheck %s

// CHECK-LABEL: func.func @overwritten
// CHECK-NOT: memref.reinterpret_cast
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK: linalg.matmul ins(%{{.*}}, %[[T:.*]] : memref<8x8xf32>, memref<8x8xf32>)
// CHECK-LABEL: func.func @kept
// CHECK: memref.reinterpret_cast %arg1 to offset: [0], sizes: [8, 8], strides: [1, 8]
func.func @overwritten(%x: memref<8x8xf32>, %w: memref<8x8xf32>, %out: memref<8x8xf32>) {
  %one = arith.constant 1.0 : f32
  %t = memref.alloc() : memref<8x8xf32>
  linalg.transpose ins(%x : memref<8x8xf32>) outs(%t : memref<8x8xf32>) permutation = [1, 0]
  linalg.fill ins(%one : f32) outs(%x : memref<8x8xf32>)
  linalg.matmul ins(%w, %t : memref<8x8xf32>, memref<8x8xf32>) outs(%out : memref<8x8xf32>)
  memref.dealloc %t : memref<8x8xf32>
  return
}
func.func @kept(%x: memref<8x8xf32>, %w: memref<8x8xf32>, %out: memref<8x8xf32>) {
  %t = memref.alloc() : memref<8x8xf32>
  linalg.transpose ins(%w : memref<8x8xf32>) outs(%t : memref<8x8xf32>) permutation = [1, 0]
  linalg.matmul ins(%x, %t : memref<8x8xf32>, memref<8x8xf32>) outs(%out : memref<8x8xf32>)
  memref.dealloc %t : memref<8x8xf32>
  return
}

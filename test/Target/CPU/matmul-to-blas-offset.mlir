// dg-matmul-to-blas calls BLAS on a row-major block at a static offset into its buffer
// (the value part of a split QKV projection: torchvision's Swin ran its attention
// products as scalar loops, 0.48x eager): the pointer is the buffer's plus the offset
// in bytes. A block whose strides are not row-major keeps the loops.
// RUN: fusegrad-opt %s -p 'dg-matmul-to-blas' | filecheck %s

// CHECK-LABEL: func.func @third_part(
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %[[V:.*]] : memref<2x3x4xf32, strided<[12, 4, 1], offset: 48>>
// CHECK: %[[BYTES:.*]] = arith.constant 192 : index
// CHECK: arith.addi %[[BASE]], %[[BYTES]] : index
// CHECK: call @__fusegrad_gemm_f32
// CHECK-NOT: linalg.batch_matmul
func.func @third_part(%a: memref<2x5x3xf32>, %qkv: memref<3x2x3x4xf32>, %c: memref<2x5x4xf32>) {
  %v = memref.subview %qkv[2, 0, 0, 0] [1, 2, 3, 4] [1, 1, 1, 1] : memref<3x2x3x4xf32> to memref<2x3x4xf32, strided<[12, 4, 1], offset: 48>>
  linalg.batch_matmul ins(%a, %v : memref<2x5x3xf32>, memref<2x3x4xf32, strided<[12, 4, 1], offset: 48>>) outs(%c : memref<2x5x4xf32>)
  return
}

// CHECK-LABEL: func.func @strided_rows(
// CHECK-NOT: call @__fusegrad_gemm_f32
// CHECK: linalg.matmul
func.func @strided_rows(%a: memref<5x3xf32>, %b: memref<3x8xf32>, %c: memref<5x4xf32>) {
  %half = memref.subview %b[0, 0] [3, 4] [1, 1] : memref<3x8xf32> to memref<3x4xf32, strided<[8, 1]>>
  linalg.matmul ins(%a, %half : memref<5x3xf32>, memref<3x4xf32, strided<[8, 1]>>) outs(%c : memref<5x4xf32>)
  return
}

// A block of run-time sizes with strided rows (a third of a QKV projection at symbolic
// batch and sequence sizes) keeps the loops too.
// CHECK-LABEL: func.func @strided_rows_of_run_time_sizes(
// CHECK-NOT: call @__fusegrad_gemm_f32
// CHECK: linalg.batch_matmul
func.func @strided_rows_of_run_time_sizes(%q: memref<?x?x16xf32, strided<[?, 48, 1]>>, %kt: memref<?x16x?xf32>, %c: memref<?x?x?xf32>) {
  linalg.batch_matmul ins(%q, %kt : memref<?x?x16xf32, strided<[?, 48, 1]>>, memref<?x16x?xf32>) outs(%c : memref<?x?x?xf32>)
  return
}

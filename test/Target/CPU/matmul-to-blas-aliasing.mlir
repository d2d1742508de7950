// dg-matmul-to-blas reads a transposed operand from its source only when nothing
// writes the source between the transpose and the matmul (bufferization reuses
// dead buffers in place: folding here gave GPT-2 5% wrong gradients).
// RUN: fusegrad-opt %s -p 'dg-matmul-to-blas' | filecheck %s

// CHECK-LABEL: func.func @overwritten(
// CHECK: linalg.transpose
// CHECK: call @__fusegrad_gemm_f32({{.*}}, %c78_i8, %c78_i8{{(_[0-9]+)?}},
func.func @overwritten(%s: memref<5x4xf32>, %b: memref<5x6xf32>, %c: memref<4x6xf32>) {
  %t = memref.alloc() : memref<4x5xf32>
  linalg.transpose ins(%s : memref<5x4xf32>) outs(%t : memref<4x5xf32>) permutation = [1, 0]
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%s : memref<5x4xf32>)
  linalg.matmul ins(%t, %b : memref<4x5xf32>, memref<5x6xf32>) outs(%c : memref<4x6xf32>)
  memref.dealloc %t : memref<4x5xf32>
  return
}

// CHECK-LABEL: func.func @untouched(
// CHECK-NOT: linalg.transpose
// CHECK: call @__fusegrad_gemm_f32({{.*}}, %c84_i8, %c78_i8,
func.func @untouched(%s: memref<5x4xf32>, %b: memref<5x6xf32>, %c: memref<4x6xf32>) {
  %t = memref.alloc() : memref<4x5xf32>
  linalg.transpose ins(%s : memref<5x4xf32>) outs(%t : memref<4x5xf32>) permutation = [1, 0]
  linalg.matmul ins(%t, %b : memref<4x5xf32>, memref<5x6xf32>) outs(%c : memref<4x6xf32>)
  memref.dealloc %t : memref<4x5xf32>
  return
}

// Bufferization reuses a dead alloc for the transpose: its earlier values stay, the
// transpose goes; a complete overwrite after the matmul does not read the transposed
// values, so it does not stop the fold either.
// CHECK-LABEL: func.func @reused_buffer(
// CHECK: linalg.copy ins(%{{.*}}) outs(%[[T:.*]] :
// CHECK-NOT: linalg.transpose
// CHECK: call @__fusegrad_gemm_f32({{.*}}, %c84_i8, %c78_i8,
// CHECK: linalg.fill ins(%{{.*}}) outs(%[[T]] :
// CHECK: memref.dealloc %[[T]]
func.func @reused_buffer(%s: memref<5x5xf32>, %b: memref<5x6xf32>, %c: memref<5x6xf32>,
                         %d: memref<5x5xf32>, %e: memref<5x5xf32>) {
  %t = memref.alloc() : memref<5x5xf32>
  linalg.copy ins(%s : memref<5x5xf32>) outs(%t : memref<5x5xf32>)
  linalg.copy ins(%t : memref<5x5xf32>) outs(%d : memref<5x5xf32>)
  linalg.transpose ins(%s : memref<5x5xf32>) outs(%t : memref<5x5xf32>) permutation = [1, 0]
  linalg.matmul ins(%t, %b : memref<5x5xf32>, memref<5x6xf32>) outs(%c : memref<5x6xf32>)
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%t : memref<5x5xf32>)
  linalg.copy ins(%t : memref<5x5xf32>) outs(%e : memref<5x5xf32>)
  memref.dealloc %t : memref<5x5xf32>
  return
}

// ... but a read of the transposed values after the matmul keeps the transpose.
// CHECK-LABEL: func.func @read_after(
// CHECK: linalg.transpose
// CHECK: call @__fusegrad_gemm_f32({{.*}}, %c78_i8, %c78_i8{{(_[0-9]+)?}},
func.func @read_after(%s: memref<5x5xf32>, %b: memref<5x6xf32>, %c: memref<5x6xf32>,
                      %e: memref<5x5xf32>) {
  %t = memref.alloc() : memref<5x5xf32>
  linalg.transpose ins(%s : memref<5x5xf32>) outs(%t : memref<5x5xf32>) permutation = [1, 0]
  linalg.matmul ins(%t, %b : memref<5x5xf32>, memref<5x6xf32>) outs(%c : memref<5x6xf32>)
  linalg.copy ins(%t : memref<5x5xf32>) outs(%e : memref<5x5xf32>)
  memref.dealloc %t : memref<5x5xf32>
  return
}

// An out-param lent as scratch for the transpose: its value leaves the function, so
// the fold needs a later complete overwrite (a transposed FFN weight written to a
// later result's buffer) ...
// CHECK-LABEL: func.func @out_param_scratch(
// CHECK-NOT: linalg.transpose
// CHECK: call @__fusegrad_gemm_f32({{.*}}, %c84_i8, %c78_i8,
// CHECK: linalg.fill
func.func @out_param_scratch(%s: memref<5x5xf32>, %b: memref<5x6xf32>, %c: memref<5x6xf32>,
                             %out: memref<5x5xf32>) {
  linalg.transpose ins(%s : memref<5x5xf32>) outs(%out : memref<5x5xf32>) permutation = [1, 0]
  linalg.matmul ins(%out, %b : memref<5x5xf32>, memref<5x6xf32>) outs(%c : memref<5x6xf32>)
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<5x5xf32>)
  return
}

// ... and keeps the transpose when the transposed values are the result.
// CHECK-LABEL: func.func @out_param_result(
// CHECK: linalg.transpose
// CHECK: call @__fusegrad_gemm_f32({{.*}}, %c78_i8, %c78_i8{{(_[0-9]+)?}},
func.func @out_param_result(%s: memref<5x5xf32>, %b: memref<5x6xf32>, %c: memref<5x6xf32>,
                            %out: memref<5x5xf32>) {
  linalg.transpose ins(%s : memref<5x5xf32>) outs(%out : memref<5x5xf32>) permutation = [1, 0]
  linalg.matmul ins(%out, %b : memref<5x5xf32>, memref<5x6xf32>) outs(%c : memref<5x6xf32>)
  return
}

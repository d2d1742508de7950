// dg-matmul-to-blas calls PyTorch's baddbmm (oneDNN, f32 accumulation, as eager's
// matmul) for bf16/f16 products: tensors view the buffers, a transposed operand through
// its strides (ta/tb), also a transposed slice whose reshape was folded into the
// transposing copy (@f16_slice_nt, `a @ b[1].t()`: read in place, as eager's mm reads
// it; a copy made contiguous sums in another order on CPUs without oneDNN's f16
// kernels), and a zero-filled result is overwritten (beta = 0). A transposed operand
// made by a cast (@bf16_cast_nt: an f32 weight under bf16 autocast) is cast in its own
// layout and read transposed too. Integer products keep the loops.
// RUN: fusegrad-opt %s -p 'dg-matmul-to-blas' | filecheck %s

// CHECK-LABEL: func.func @bf16_nt(
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.transpose
// CHECK-DAG: %[[BATCH:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[M:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[TA:.*]] = arith.constant false
// CHECK-DAG: %[[TB:.*]] = arith.constant true
// CHECK-DAG: %[[BETA:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG: %[[BF16:.*]] = arith.constant 15 : i32
// CHECK: call @__fusegrad_gemm_torch(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[BATCH]], %[[M]], %[[N]], %[[K]], %[[TA]], %[[TB]], %[[BETA]], %[[BF16]])
// CHECK-NOT: linalg.matmul
func.func @bf16_nt(%a: memref<5x3xbf16>, %b: memref<4x3xbf16>, %c: memref<5x4xbf16>) {
  %zero = arith.constant 0.0 : bf16
  %bt = memref.alloc() : memref<3x4xbf16>
  linalg.transpose ins(%b : memref<4x3xbf16>) outs(%bt : memref<3x4xbf16>) permutation = [1, 0]
  linalg.fill ins(%zero : bf16) outs(%c : memref<5x4xbf16>)
  linalg.matmul ins(%a, %bt : memref<5x3xbf16>, memref<3x4xbf16>) outs(%c : memref<5x4xbf16>)
  memref.dealloc %bt : memref<3x4xbf16>
  return
}

// CHECK-LABEL: func.func @f16_slice_nt(
// CHECK: %[[SLICE:.*]] = memref.subview %arg1[1, 0, 0]
// CHECK-NOT: linalg.generic
// CHECK: memref.extract_aligned_pointer_as_index %arg0
// CHECK: %[[B:.*]] = memref.extract_aligned_pointer_as_index %[[SLICE]]
// CHECK-NEXT: %[[OFFSET:.*]] = arith.constant 24 : index
// CHECK-NEXT: arith.addi %[[B]], %[[OFFSET]]
// CHECK: %[[TB2:.*]] = arith.constant true
// CHECK: call @__fusegrad_gemm_torch({{.*}}, %[[TB2]], {{.*}})
// CHECK-NOT: linalg.matmul
#pick_t = affine_map<(d0, d1) -> (0, d1, d0)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f16_slice_nt(%a: memref<5x3xf16>, %b: memref<3x4x3xf16>, %c: memref<5x4xf16>) {
  %zero = arith.constant 0.0 : f16
  %b1 = memref.subview %b[1, 0, 0] [1, 4, 3] [1, 1, 1] : memref<3x4x3xf16> to memref<1x4x3xf16, strided<[12, 3, 1], offset: 12>>
  %bt = memref.alloc() : memref<3x4xf16>
  linalg.generic {indexing_maps = [#pick_t, #id], iterator_types = ["parallel", "parallel"]} ins(%b1 : memref<1x4x3xf16, strided<[12, 3, 1], offset: 12>>) outs(%bt : memref<3x4xf16>) {
  ^bb0(%in: f16, %out: f16):
    linalg.yield %in : f16
  }
  linalg.fill ins(%zero : f16) outs(%c : memref<5x4xf16>)
  linalg.matmul ins(%a, %bt : memref<5x3xf16>, memref<3x4xf16>) outs(%c : memref<5x4xf16>)
  memref.dealloc %bt : memref<3x4xf16>
  return
}

// CHECK-LABEL: func.func @bf16_cast_nt(
// CHECK: %[[CAST:.*]] = memref.alloc() : memref<4x3xbf16>
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel"]} ins(%arg1 : memref<4x3xf32>) outs(%[[CAST]] : memref<4x3xbf16>)
// CHECK: arith.truncf
// CHECK-NOT: memref<3x4xbf16>
// CHECK: memref.extract_aligned_pointer_as_index %[[CAST]]
// CHECK: %[[TB3:.*]] = arith.constant true
// CHECK: call @__fusegrad_gemm_torch({{.*}}, %[[TB3]], {{.*}})
// CHECK-NEXT: memref.dealloc %[[CAST]]
// CHECK-NOT: linalg.matmul
#swap = affine_map<(d0, d1) -> (d1, d0)>
func.func @bf16_cast_nt(%a: memref<5x3xbf16>, %w: memref<4x3xf32>, %c: memref<5x4xbf16>) {
  %zero = arith.constant 0.0 : bf16
  %wt = memref.alloc() : memref<3x4xbf16>
  linalg.generic {indexing_maps = [#swap, #id], iterator_types = ["parallel", "parallel"]} ins(%w : memref<4x3xf32>) outs(%wt : memref<3x4xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  }
  linalg.fill ins(%zero : bf16) outs(%c : memref<5x4xbf16>)
  linalg.matmul ins(%a, %wt : memref<5x3xbf16>, memref<3x4xbf16>) outs(%c : memref<5x4xbf16>)
  memref.dealloc %wt : memref<3x4xbf16>
  return
}

// CHECK-LABEL: func.func @integers(
// CHECK-NOT: call @__fusegrad_gemm
// CHECK: linalg.matmul
// CHECK: func.func private @__fusegrad_gemm_torch(
// CHECK: llvm.call @aoti_torch_cpu_baddbmm_out
func.func @integers(%a: memref<5x3xi32>, %b: memref<3x4xi32>, %c: memref<5x4xi32>) {
  linalg.matmul ins(%a, %b : memref<5x3xi32>, memref<3x4xi32>) outs(%c : memref<5x4xi32>)
  return
}

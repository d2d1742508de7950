// dg-cpu-kernels records which kernel parameters are the only view of their buffer
// (the aligned data pointer of each such memref, counted in LLVM parameters: lo, hi,
// then allocated, aligned, offset, sizes, strides per memref); after LLVM lowering
// dg-noalias-kernel-args marks them llvm.noalias, so LLVM vectorizes a loop over
// many buffers without runtime alias checks. Two views of one buffer are not marked.
// (dg-prune-kernel-params then leaves only the aligned pointers: LLVM-SAME below.)
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels,dg-cpu-llvm' | filecheck %s --check-prefix=LLVM

#id = affine_map<(d0, d1) -> (d0, d1)>

// Parameters: lo 0, hi 1, %x 2-8 (aligned 3), %y 9-15 (aligned 10).
// CHECK-LABEL: func.func private @distinct_k0(
// CHECK-SAME: dg.noalias_pointers = array<i64: 3, 10>
// LLVM-LABEL: llvm.func internal @distinct_k0(
// LLVM-SAME: %arg0: i64, %arg1: i64, %arg2: !llvm.ptr {llvm.noalias}, %arg3: !llvm.ptr {llvm.noalias})
func.func @distinct(%x: memref<64x32xf32>, %y: memref<64x32xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x32xf32>) outs(%y : memref<64x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// %x and its reshape %v are one buffer: only %y's pointer is marked.
// CHECK-LABEL: func.func private @views_k1(
// CHECK-SAME: dg.noalias_pointers = array<i64: 17>
func.func @views(%x: memref<64x32xf32>, %y: memref<64x32xf32>) {
  %v = memref.collapse_shape %x [[0, 1]] : memref<64x32xf32> into memref<2048xf32>
  %w = memref.expand_shape %v [[0, 1]] output_shape [64, 32] : memref<2048xf32> into memref<64x32xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %w : memref<64x32xf32>, memref<64x32xf32>) outs(%y : memref<64x32xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  }
  return
}

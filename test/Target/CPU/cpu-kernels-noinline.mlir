// dg-cpu-kernels outlines each kernel `noinline`: inlined into the entry (their
// only caller), a training graph's kernels made one huge function whose LLVM
// optimization and code generation cost more than the kernels' own. Kernels also
// let LLVM's vectorizers use 512-bit vectors (tuned for an AVX-512 Intel Xeon, it chose
// 256 for most loops).
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels,dg-cpu-llvm' | filecheck %s --check-prefix=LLVM

#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func private @square_k0(
// CHECK-SAME: passthrough = ["noinline", ["prefer-vector-width", "512"]]
// LLVM-LABEL: llvm.func internal @square_k0(
// LLVM-SAME: passthrough = ["noinline", ["prefer-vector-width", "512"]]
func.func @square(%x: memref<64x32xf32>, %y: memref<64x32xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<64x32xf32>) outs(%y : memref<64x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  return
}

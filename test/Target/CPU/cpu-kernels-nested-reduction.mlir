// dg-cpu-kernels: a reduction over several trailing loops sums each inner loop
// from the identity and combines the partial once per outer iteration, so the
// rounding error of a full f32 sum grows with the loop lengths, not their
// product (a sequential sum of 8M elements was off by 7e-4 relative). The outer
// loop is a blocked sum too (blocked_sums.py): the inner sums of 8 rows from -0.0
// (the identity LLVM folds), those blocks added in f64 into the accumulator; a row
// of one block adds to its start in f32 (in f64 or not, one rounding).
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

// CHECK-LABEL: func.func @total(
// CHECK: %[[ACC:.*]] = memref.load %arg1[]
// CHECK: %[[WIDE:.*]] = arith.extf %[[ACC]] : f32 to f64
// CHECK: %[[TOTAL:.*]] = scf.for {{.*}} step %c8 iter_args(%[[OUTER:[a-z0-9_]+]] = %[[WIDE]]) -> (f64)
// CHECK: %[[ZERO:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: %[[GROUP:.*]] = scf.for {{.*}} iter_args(%[[ROWS:[a-z0-9_]+]] = %[[ZERO]]) -> (f32)
// CHECK: %[[ROW:.*]] = scf.for {{.*}} to %c32 {{.*}} -> (f32)
// CHECK: arith.addf {{.*}} fastmath<reassoc>
// CHECK: } {dg.sum_block = 32 : i64}
// CHECK: %[[ROW1:.*]] = arith.addf %{{.*}}, %[[ROW]] : f32
// CHECK: arith.addf %[[ROWS]], %[[ROW1]] : f32
// CHECK: %[[GROUP64:.*]] = arith.extf %[[GROUP]] : f32 to f64
// CHECK: arith.addf %[[OUTER]], %[[GROUP64]] : f64
// CHECK: } {dg.sum_blocks}
// CHECK: %[[SUM:.*]] = arith.truncf %[[TOTAL]] : f64 to f32
// CHECK: memref.store %[[SUM]], %arg1[]
func.func @total(%x: memref<64x32xf32>, %y: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>],
                  iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<64x32xf32>) outs(%y : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// A per-channel statistic (batch norm: reduce N, H, W of NCHW) reads its input
// in order: blocks of images, each summing into its own partial per channel, with
// the H and W sums innermost in registers. The caller adds the partials in block
// order in an f64 buffer, rounded into the output once.
// CHECK-LABEL: func.func private @channel_mean_k{{[0-9]+}}(
// CHECK-SAME: %[[P:[a-z0-9_]+]]: memref<32x64xf32>
// CHECK: scf.for %[[BLOCK:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: memref.store %{{.*}}, %[[P]][%[[BLOCK]],
// CHECK: scf.for %[[N:[a-z0-9_]+]] = %{{[0-9]+}} to
// CHECK: scf.for %[[CH:[a-z0-9_]+]] =
// CHECK: memref.load %[[P]][%[[BLOCK]], %[[CH]]]
// CHECK: scf.for {{.*}} iter_args
// CHECK: scf.for {{.*}} iter_args
// CHECK: memref.load %arg2[%[[N]], %[[CH]],
// CHECK: arith.addf {{.*}} fastmath<reassoc>
// CHECK-LABEL: func.func @channel_mean(
// CHECK: %[[P:.*]] = memref.alloc() : memref<32x64xf32>
// CHECK: call @channel_mean_k{{[0-9]+}}__parallel(%c32,
// CHECK: %[[SUM:.*]] = memref.alloc() : memref<64xf64>
// CHECK: scf.for %[[CH:[a-z0-9_]+]] =
// CHECK: %[[OLD:.*]] = memref.load %arg1[%[[CH]]]
// CHECK: %[[OLD64:.*]] = arith.extf %[[OLD]] : f32 to f64
// CHECK: memref.store %[[OLD64]], %[[SUM]][%[[CH]]]
// CHECK: scf.for %[[B:[a-z0-9_]+]] = %{{.*}} to %c32
// CHECK: scf.for %[[CH2:[a-z0-9_]+]] =
// CHECK: %[[X:.*]] = memref.load %[[P]][%[[B]], %[[CH2]]]
// CHECK: %[[X64:.*]] = arith.extf %[[X]] : f32 to f64
// CHECK: %[[ACC:.*]] = memref.load %[[SUM]][%[[CH2]]]
// CHECK: %[[NEW:.*]] = arith.addf %[[ACC]], %[[X64]] : f64
// CHECK: memref.store %[[NEW]], %[[SUM]][%[[CH2]]]
// CHECK: scf.for %[[CH3:[a-z0-9_]+]] =
// CHECK: %[[T:.*]] = memref.load %[[SUM]][%[[CH3]]]
// CHECK: %[[T32:.*]] = arith.truncf %[[T]] : f64 to f32
// CHECK: memref.store %[[T32]], %arg1[%[[CH3]]]
// CHECK: memref.dealloc %[[SUM]]
func.func @channel_mean(%x: memref<32x64x16x16xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, c, h, w) -> (n, c, h, w)>, affine_map<(n, c, h, w) -> (c)>],
                  iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%x : memref<32x64x16x16xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// dg-cpu-kernels: a float sum adds in blocks (blocked_sums.py), so its rounding error
// stays near eager's cascade sum: a block of 128 f32 elements (one prefetch chunk,
// which LLVM unrolls into vector partial sums; 1024 over a row in L1) from -0.0, then
// the blocks' sums added in f64 without `reassoc`, into the carried accumulator,
// rounded to f32 once. A row
// of a run-time length within one block sums as a static one (the choice is made per
// row, the same for every row). A max needs no blocks (exact in any order): it keeps
// its 16 lanes. A sum whose accumulator stays in memory (a column sum, a mean over a
// middle dim) adds into an f64 buffer on the stack, rounded into the output once.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels,dg-prefetch-streams' | filecheck %s --check-prefix=PREFETCH

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// CHECK-LABEL: func.func private @row_sums_k{{[0-9]+}}(
// CHECK: %[[ACC:.*]] = memref.load %arg3[%[[ROW:[a-z0-9_]+]]]
// CHECK: %[[WIDE:.*]] = arith.extf %[[ACC]] : f32 to f64
// CHECK: %[[SUM:.*]] = scf.for %[[B:[a-z0-9_]+]] = %{{.*}} to %c4096 step %c128 iter_args(%[[CARRIED:[a-z0-9_]+]] = %[[WIDE]]) -> (f64)
// CHECK: %[[END:.*]] = arith.addi %[[B]], %c128
// CHECK: %[[ZERO:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: %[[BLOCK:.*]] = scf.for %[[I:[a-z0-9_]+]] = %[[B]] to %[[END]] step %{{.*}} iter_args(%[[CB:[a-z0-9_]+]] = %[[ZERO]]) -> (f32)
// CHECK: %[[X:.*]] = memref.load %arg2[%[[ROW]], %[[I]]]
// CHECK: arith.addf %[[CB]], %[[X]] fastmath<reassoc> : f32
// CHECK: } {dg.sum_block = 128 : i64}
// CHECK: %[[B64:.*]] = arith.extf %[[BLOCK]] : f32 to f64
// CHECK: arith.addf %[[CARRIED]], %[[B64]] : f64
// CHECK: } {dg.sum_blocks}
// CHECK: %[[SUM32:.*]] = arith.truncf %[[SUM]] : f64 to f32
// CHECK: memref.store %[[SUM32]], %arg3[%[[ROW]]]

// Prefetches go before each block, which is not strip-mined again.
// PREFETCH-LABEL: func.func private @row_sums_k{{[0-9]+}}(
// PREFETCH: step %c128
// PREFETCH-COUNT-8: memref.prefetch
// PREFETCH-NEXT: scf.for
// PREFETCH-NOT: scf.for
// PREFETCH: } {dg.sum_block = 128 : i64}
func.func @row_sums(%x: memref<64x4096xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x4096xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// A second pass over the row (a variance's squared deviations after its mean) finds it
// in L1, unprefetched: blocks of 4 KiB, fewer horizontal reductions.
// CHECK-LABEL: func.func private @two_passes_k{{[0-9]+}}(
// CHECK: scf.for {{.*}} to %c4096{{.*}} step %c128
// CHECK: } {dg.sum_block = 128 : i64}
// CHECK: } {dg.sum_blocks}
// CHECK: scf.for {{.*}} to %c4096{{.*}} step %c1024
// CHECK: } {dg.sum_block = 1024 : i64}
// CHECK: } {dg.sum_blocks}
func.func @two_passes(%x: memref<64x4096xf32>, %s: memref<64xf32>, %q: memref<64xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x4096xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %s : memref<64x4096xf32>, memref<64xf32>) outs(%q : memref<64xf32>) {
  ^bb0(%in: f32, %m: f32, %acc: f32):
    %0 = arith.subf %in, %m : f32
    %1 = arith.mulf %0, %0 : f32
    %2 = arith.addf %acc, %1 : f32
    linalg.yield %2 : f32
  }
  return
}

// A row of a run-time length: one block when it is no longer, else blocks bounded by
// the length. Either branch prefetches.
// CHECK-LABEL: func.func private @run_time_rows_k{{[0-9]+}}(
// CHECK: %[[N:.*]] = memref.dim %arg2, %c1
// CHECK: %[[ACC:.*]] = memref.load %arg3
// CHECK: %[[ONE:.*]] = arith.cmpi ule, %[[N]], %c128
// CHECK: scf.if %[[ONE]] -> (f32)
// CHECK: %[[BLOCK:.*]] = scf.for %{{.*}} = %{{.*}} to %[[N]] step
// CHECK: fastmath<reassoc> : f32
// CHECK: } {dg.sum_block = 128 : i64}
// CHECK: arith.addf %[[ACC]], %[[BLOCK]] : f32
// CHECK: } else {
// CHECK: scf.for %{{.*}} = %{{.*}} to %[[N]] step %c128
// CHECK: arith.minsi %{{.*}}, %[[N]]
// CHECK: fastmath<reassoc> : f32
// CHECK: } {dg.sum_block = 128 : i64}
// CHECK: arith.addf %{{.*}} : f64
// CHECK: } {dg.sum_blocks}
// CHECK: arith.truncf
// CHECK: } {dg.sum_blocks}
// PREFETCH-LABEL: func.func private @run_time_rows_k{{[0-9]+}}(
// PREFETCH: scf.if
// PREFETCH: memref.prefetch
// PREFETCH: } {dg.sum_block = 128 : i64}
// PREFETCH: } else {
// PREFETCH: memref.prefetch
// PREFETCH: } {dg.sum_block = 128 : i64}
func.func @run_time_rows(%x: memref<8x?xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x?xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// CHECK-LABEL: func.func private @row_max_k{{[0-9]+}}(
// CHECK-NOT: dg.sum_block
// CHECK: scf.for {{.*}} step %c16 iter_args
// CHECK-NOT: dg.sum_block
// CHECK-LABEL: func.func @row_max(
func.func @row_max(%x: memref<64x4096xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<64x4096xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.maximumf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// A column sum small enough to run inline: the f64 buffer holds the output, each row
// adds to it (its accumulator read as -0.0, which LLVM folds), then it is rounded back.
// CHECK-LABEL: func.func @column_sums(
// CHECK: %[[BUF:.*]] = memref.alloca() : memref<64xf64>
// CHECK: scf.for %[[C:[a-z0-9_]+]] =
// CHECK: %[[OLD:.*]] = memref.load %arg1[%[[C]]]
// CHECK: %[[OLD64:.*]] = arith.extf %[[OLD]] : f32 to f64
// CHECK: memref.store %[[OLD64]], %[[BUF]][%[[C]]]
// CHECK: scf.for %[[R:[a-z0-9_]+]] = %{{.*}} to %c512
// CHECK: scf.for %[[C2:[a-z0-9_]+]] =
// CHECK: %[[X:.*]] = memref.load %arg0[%[[R]], %[[C2]]]
// CHECK: %[[V:.*]] = arith.addf %cst{{.*}}, %[[X]] : f32
// CHECK: %[[V64:.*]] = arith.extf %[[V]] : f32 to f64
// CHECK: %[[A:.*]] = memref.load %[[BUF]][%[[C2]]]
// CHECK: %[[S:.*]] = arith.addf %[[A]], %[[V64]] : f64
// CHECK: memref.store %[[S]], %[[BUF]][%[[C2]]]
// CHECK: scf.for %[[C3:[a-z0-9_]+]] =
// CHECK: %[[T:.*]] = memref.load %[[BUF]][%[[C3]]]
// CHECK: %[[T32:.*]] = arith.truncf %[[T]] : f64 to f32
// CHECK: memref.store %[[T32]], %arg1[%[[C3]]]
func.func @column_sums(%x: memref<512x64xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<512x64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// In a row kernel the buffer is one row of the output.
// CHECK-LABEL: func.func private @middle_mean_k{{[0-9]+}}(
// CHECK: %[[BUF:.*]] = memref.alloca() : memref<1x64xf64>
// CHECK: scf.for %[[B:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: memref.load %arg3[%[[B]], %{{.*}}] : memref<32x64xf32>
// CHECK: memref.store %{{.*}}, %[[BUF]][%c0, %{{.*}}] : memref<1x64xf64>
// CHECK: scf.for {{.*}} to %c512
// CHECK: arith.addf %{{.*}} : f64
// CHECK: arith.truncf
// CHECK: memref.store %{{.*}}, %arg3[%[[B]], %{{.*}}] : memref<32x64xf32>
func.func @middle_mean(%x: memref<32x512x64xf32>, %y: memref<32x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, r, c) -> (b, r, c)>, affine_map<(b, r, c) -> (b, c)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x : memref<32x512x64xf32>) outs(%y : memref<32x64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// dg-cpu-kernels: a reduction over several trailing loops sums each inner loop
// from the identity and combines the partial once per outer iteration, so the
// rounding error of a full f32 sum grows with the loop lengths, not their
// product (a sequential sum of 8M elements was off by 7e-4 relative).
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

// CHECK-LABEL: func.func @total(
// CHECK: %[[ACC:.*]] = memref.load %arg1[]
// CHECK: scf.for {{.*}} iter_args(%[[OUTER:[a-z0-9_]+]] = %[[ACC]])
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[PART:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]])
// CHECK: arith.addf {{.*}} fastmath<reassoc>
// CHECK: arith.addf %[[OUTER]], %[[PART]] fastmath<reassoc>
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
// the H and W sums innermost in registers. The caller adds the partials.
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
// CHECK: call @channel_mean_k{{[0-9]+}}__parallel(%c32,
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

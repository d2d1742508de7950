// dg-collapse-reduction-dims with a run-time batch: a per-channel statistic over
// (n, h, w) of an n x c x h x w buffer whose n only the run time knows still runs h x w
// as one unit-stride loop, as the two dims merged are static.
// RUN: fusegrad-opt %s -p 'dg-collapse-reduction-dims' | filecheck %s

// CHECK-LABEL: func.func @channel_sums(
// CHECK: %[[V:.*]] = memref.collapse_shape %arg0 {{\[}}[0], [1], [2, 3]] : memref<?x16x8x8xf32> into memref<?x16x64xf32>
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction", "reduction"]
// CHECK-SAME: ins(%[[V]] : memref<?x16x64xf32>)
func.func @channel_sums(%x: memref<?x16x8x8xf32>, %s: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, n, h, w) -> (n, c, h, w)>, affine_map<(c, n, h, w) -> (c)>],
                  iterator_types = ["parallel", "reduction", "reduction", "reduction"]}
      ins(%x : memref<?x16x8x8xf32>) outs(%s : memref<16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// Not merged: one of the two dims is a run-time size.
// CHECK-LABEL: func.func @dynamic_width(
// CHECK-NOT: memref.collapse_shape
func.func @dynamic_width(%x: memref<2x16x8x?xf32>, %s: memref<16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, n, h, w) -> (n, c, h, w)>, affine_map<(c, n, h, w) -> (c)>],
                  iterator_types = ["parallel", "reduction", "reduction", "reduction"]}
      ins(%x : memref<2x16x8x?xf32>) outs(%s : memref<16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

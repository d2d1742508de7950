// dg-cpu-kernels: an op that reads a buffer through a view merging dims after dim 0
// (dg-collapse-reduction-dims) still shares a row kernel with the op that writes the
// buffer: view row i is buffer row i.
// RUN: fusegrad-opt %s -p 'dg-collapse-reduction-dims,dg-cpu-kernels' | filecheck %s

// CHECK-LABEL: func.func private @bn_k0(
// CHECK: arith.negf
// CHECK: scf.for {{.*}} to %c256
// CHECK-NOT: func.func private @bn_k1(
#x = affine_map<(n, c, h, w) -> (n, c, h, w)>
#c = affine_map<(n, c, h, w) -> (c)>
func.func @bn(%x: memref<64x8x16x16xf32>, %y: memref<64x8x16x16xf32>, %s: memref<8xf32>) {
  linalg.generic {indexing_maps = [#x, #x], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<64x8x16x16xf32>) outs(%y : memref<64x8x16x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.negf %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#x, #c], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%y : memref<64x8x16x16xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %in, %acc : f32
    linalg.yield %0 : f32
  }
  return
}

// dg-cpu-kernels: a transposing op whose strided input rows are a multiple of 1 KiB
// apart (an attention head transpose, 8 KiB here) runs its two transposed loops in
// 16 x 16 tiles (full ones with a static trip count), so a tile's input lines stay
// in L1; with other strides (6000 bytes below) the loops keep dim order.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

#in = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// CHECK-LABEL: func.func private @heads_k0(
// CHECK:         scf.for %[[ROW:.*]] =
// CHECK:           scf.for %[[J0:.*]] = %{{.*}} to %c64 step %c16
// CHECK:             scf.for %[[I0:.*]] = %{{.*}} to %c128 step %c16
// CHECK:               %[[JE:.*]] = arith.addi %[[J0]]
// CHECK:               scf.for %[[J:.*]] = %[[J0]] to %[[JE]]
// CHECK:                 %[[IE:.*]] = arith.addi %[[I0]]
// CHECK:                 scf.for %[[I:.*]] = %[[I0]] to %[[IE]]
// CHECK:                   memref.load %{{.*}}[%[[I]], %[[ROW]], %[[J]]]
// CHECK:                   memref.store %{{.*}}, %{{.*}}[%[[ROW]], %[[J]], %[[I]]]
func.func @heads(%x: memref<128x32x64xf32>, %out: memref<32x64x128xf32>) {
  %c = arith.constant 0.35 : f32
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<128x32x64xf32>) outs(%out : memref<32x64x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  }
  return
}

// CHECK-LABEL: func.func private @odd_k{{[0-9]+}}(
// CHECK-NOT:     arith.constant 16
// CHECK-LABEL: func.func @odd(
func.func @odd(%x: memref<100x30x50xf32>, %out: memref<30x50x100xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<100x30x50xf32>) outs(%out : memref<30x50x100xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}

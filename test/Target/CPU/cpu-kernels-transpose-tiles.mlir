// dg-cpu-kernels: a transposing op whose strided input rows are a multiple of 1 KiB
// apart (an attention head transpose, 8 KiB here) runs its two transposed loops j, i in
// 16 x 16 tiles (full ones with a static trip count). Each tile of the input is first
// transposed onto the stack (a full tile by 16 row loads, a shuffle network and 16 row
// stores; a partial one by scalar loops), then the body reads it along i as it writes.
// When j is the row kernel's dim (a 2-D transpose), the kernel runs over blocks of 16
// rows, each a tile of j. With other strides (6000 bytes below) the loops keep dim order.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

#in = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// CHECK-LABEL: func.func private @heads_k0(
// CHECK:         %[[TILE:.*]] = memref.alloca() : memref<16x16xf32>
// CHECK:         scf.for %[[ROW:.*]] =
// CHECK:           scf.for %[[I0:.*]] = %{{.*}} to %c128 step %c16
// CHECK:             scf.for %[[J0:.*]] = %{{.*}} to %c64 step %c16
// CHECK-COUNT-16:      vector.load %{{.*}}[%{{.*}}, %[[ROW]], %[[J0]]] : memref<128x32x64xf32>, vector<16xf32>
// CHECK-COUNT-64:      vector.shuffle
// CHECK-COUNT-16:      vector.store %{{.*}}, %[[TILE]][%{{.*}}, %c0{{.*}}] : memref<16x16xf32>, vector<16xf32>
// CHECK:               %[[JE:.*]] = arith.addi %[[J0]]
// CHECK:               scf.for %[[J:.*]] = %[[J0]] to %[[JE]]
// CHECK:                 %[[IE:.*]] = arith.addi %[[I0]]
// CHECK:                 scf.for %[[I:.*]] = %[[I0]] to %[[IE]]
// CHECK:                   %[[TJ:.*]] = arith.subi %[[J]], %[[J0]]
// CHECK:                   %[[TI:.*]] = arith.subi %[[I]], %[[I0]]
// CHECK:                   memref.load %[[TILE]][%[[TJ]], %[[TI]]]
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

// CHECK-LABEL: func.func private @rows_k1(
// CHECK:         scf.for %[[BLOCK:.*]] = %arg0 to %arg1
// CHECK:           %[[J0:.*]] = arith.muli %[[BLOCK]], %c16
// CHECK:           scf.for %[[I0:.*]] = %{{.*}} to %c256 step %c16
// CHECK-COUNT-16:    vector.load %{{.*}} : memref<256x512xf32>, vector<16xf32>
// CHECK:             scf.for %[[J:.*]] = %[[J0]]
// CHECK:               scf.for %[[I:.*]] = %[[I0]]
// CHECK:                 memref.store %{{.*}}, %{{.*}}[%[[J]], %[[I]]] : memref<512x256xf32>
// CHECK-LABEL: func.func @rows(
// CHECK:         call @rows_k1__parallel(%c32
func.func @rows(%x: memref<256x512xf32>, %out: memref<512x256xf32>) {
  linalg.transpose ins(%x : memref<256x512xf32>) outs(%out : memref<512x256xf32>) permutation = [1, 0]
  return
}

// CHECK-LABEL: func.func private @partial_k2(
// CHECK-NOT:     vector.load
// CHECK:         %[[J0:.*]] = arith.muli %{{.*}}, %c16
// CHECK:         scf.for %[[I0:.*]] = %{{.*}} to %c264 step %c16
// CHECK:           %[[IE:.*]] = arith.minsi %{{.*}}, %c264
// CHECK:           scf.for %[[I:.*]] = %[[I0]] to %[[IE]]
// CHECK:             scf.for %[[J:.*]] = %[[J0]]
// CHECK:               memref.load %{{.*}}[%[[I]], %[[J]]] : memref<264x256xf32>
// CHECK:               memref.store %{{.*}} : memref<16x16xf32>
// CHECK-LABEL: func.func @partial(
// CHECK:         call @partial_k2__parallel(%c16
func.func @partial(%x: memref<264x256xf32>, %out: memref<256x264xf32>) {
  linalg.transpose ins(%x : memref<264x256xf32>) outs(%out : memref<256x264xf32>) permutation = [1, 0]
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

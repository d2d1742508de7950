// dg-prefetch-streams does not strip-mine a row no longer than a chunk: it prefetches
// before the row's loop. It does nothing for a view whose last dim is not unit-stride
// (a column), nor for a loop with no enclosing loop (no row moves from one pass to the
// next).
// RUN: fusegrad-opt %s -p 'dg-prefetch-streams' | filecheck %s

// 64 floats (4 lines) per row: four prefetches 2 KiB ahead, before the row's loop
// CHECK-LABEL: func.func @short_rows(
// CHECK: scf.for %[[I:.*]] =
// CHECK-COUNT-4: memref.prefetch
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %{{.*}} = %c0 to %c64 step %c1 {
// CHECK-NOT: scf.for
// CHECK: return
func.func @short_rows(%x: memref<512x64xf32>, %y: memref<512x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c512 = arith.constant 512 : index
  scf.for %i = %c0 to %c512 step %c1 {
    scf.for %j = %c0 to %c64 step %c1 {
      %a = memref.load %x[%i, %j] : memref<512x64xf32>
      memref.store %a, %y[%i, %j] : memref<512x64xf32>
    }
  }
  return
}

// CHECK-LABEL: func.func @untouched(
// CHECK-NOT: memref.prefetch
// CHECK-NOT: step %c128
// CHECK: return
func.func @untouched(%x: memref<64x1024xf32, strided<[2, 128]>>, %v: memref<4096xf32>,
                     %y: memref<64x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1024 = arith.constant 1024 : index
  %c4096 = arith.constant 4096 : index
  scf.for %i = %c0 to %c64 step %c1 {
    scf.for %j = %c0 to %c1024 step %c1 {
      %a = memref.load %x[%i, %j] : memref<64x1024xf32, strided<[2, 128]>>
      memref.store %a, %y[%i, %j] : memref<64x1024xf32>
    }
  }
  scf.for %j = %c0 to %c4096 step %c1 {
    %a = memref.load %v[%j] : memref<4096xf32>
    %b = arith.addf %a, %a : f32
    memref.store %b, %v[%j] : memref<4096xf32>
  }
  return
}

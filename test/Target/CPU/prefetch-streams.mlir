// dg-prefetch-streams: an innermost loop that streams through a contiguous array (its
// index is the array's last index, an earlier index moves with the enclosing loop) is
// strip-mined into 512-byte chunks; before each chunk, one prefetch per cache line of
// that chunk's data 2 KiB ahead, in the array's buffer seen as one dim and clamped to
// the array's last line (the next row, near a row's end). A vector every row re-reads
// (%w) is not prefetched, nor is the output.
// RUN: fusegrad-opt %s -p 'dg-prefetch-streams' | filecheck %s

// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[LO:.*]]: index, %[[HI:.*]]: index, %[[X:.*]]: memref<64x1024xf32>, %[[W:.*]]: memref<1024xf32>
// CHECK: scf.for %[[I:.*]] = %[[LO]] to %[[HI]]
// CHECK: scf.for %[[JJ:.*]] = %c0 to %c1024 step %c128 {
// CHECK: %[[END:.*]] = arith.addi %[[JJ]], %c128
// CHECK: %[[FLAT:.*]] = memref.reinterpret_cast %[[X]] to offset: [0], sizes: [65536], strides: [1] : memref<64x1024xf32> to memref<65536xf32>
// CHECK: %[[ROW:.*]] = arith.muli %[[I]], %c1024
// CHECK: %[[AT:.*]] = arith.addi %[[JJ]], %[[ROW]]
// CHECK: %[[AHEAD:.*]] = arith.addi %[[AT]], %c512
// (the last of the 8 lines starts at element 65536 - 1 - 7 * 16)
// CHECK: %[[P0:.*]] = arith.minui %[[AHEAD]], %c65423
// CHECK: memref.prefetch %[[FLAT]][%[[P0]]], read, locality<3>, data
// CHECK: %[[P1:.*]] = arith.addi %[[P0]], %c16
// CHECK: memref.prefetch %[[FLAT]][%[[P1]]], read
// CHECK-COUNT-6: memref.prefetch %[[FLAT]]
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %[[J:.*]] = %[[JJ]] to %[[END]] step %c1 {
// CHECK: memref.load %[[X]][%[[I]], %[[J]]]
// CHECK: memref.load %[[W]][%[[J]]]
func.func @rows(%lo: index, %hi: index, %x: memref<64x1024xf32>, %w: memref<1024xf32>,
                %y: memref<64x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  scf.for %i = %lo to %hi step %c1 {
    scf.for %j = %c0 to %c1024 step %c1 {
      %a = memref.load %x[%i, %j] : memref<64x1024xf32>
      %b = memref.load %w[%j] : memref<1024xf32>
      %s = arith.mulf %a, %b : f32
      memref.store %s, %y[%i, %j] : memref<64x1024xf32>
    }
  }
  return
}

// A reduction keeps its carried value through the chunk loop; a trip count that is
// not a multiple of the chunk ends each chunk at min(jj + 128, 1000). The row's
// second loop reads what the first brought into cache: no prefetch there.
// CHECK-LABEL: func.func @row_sum(
// CHECK: %[[ZERO:.*]] = arith.constant 0.0
// CHECK: %[[SUM:.*]] = scf.for %[[JJ:.*]] = %c0 to %c1000 step %c128 iter_args(%[[OUTER:.*]] = %[[ZERO]]) -> (f32) {
// CHECK: %[[END:.*]] = arith.minsi %{{.*}}, %c1000
// CHECK-COUNT-8: memref.prefetch
// CHECK: %[[PART:.*]] = scf.for %{{.*}} = %[[JJ]] to %[[END]] step %c1 iter_args(%[[ACC:.*]] = %[[OUTER]]) -> (f32) {
// CHECK: scf.yield %[[PART]] : f32
// CHECK: memref.store %[[SUM]]
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %{{.*}} = %c0 to %c1000 step %c1 {
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @row_sum(%x: memref<64x1000xf32>, %out: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c1000 = arith.constant 1000 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c64 step %c1 {
    %s = scf.for %j = %c0 to %c1000 step %c1 iter_args(%acc = %zero) -> (f32) {
      %a = memref.load %x[%i, %j] : memref<64x1000xf32>
      %t = arith.addf %acc, %a : f32
      scf.yield %t : f32
    }
    memref.store %s, %out[%i] : memref<64xf32>
    scf.for %j = %c0 to %c1000 step %c1 {
      %a = memref.load %x[%i, %j] : memref<64x1000xf32>
      %d = arith.subf %a, %s : f32
      memref.store %d, %x[%i, %j] : memref<64x1000xf32>
    }
  }
  return
}

// A loop unrolled by hand (step 16, loads at j + k) is chunked in whole steps.
// CHECK-LABEL: func.func @unrolled(
// CHECK: scf.for %[[JJ:.*]] = %c0 to %c1024 step %c128 iter_args(
// CHECK-COUNT-8: memref.prefetch
// CHECK: scf.for %{{.*}} = %[[JJ]] to %{{.*}} step %c16 iter_args(
func.func @unrolled(%x: memref<8x1024xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  %c1024 = arith.constant 1024 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    %s:2 = scf.for %j = %c0 to %c1024 step %c16 iter_args(%a0 = %zero, %a1 = %zero) -> (f32, f32) {
      %v0 = memref.load %x[%i, %j] : memref<8x1024xf32>
      %j1 = arith.addi %j, %c1 : index
      %v1 = memref.load %x[%i, %j1] : memref<8x1024xf32>
      %t0 = arith.addf %a0, %v0 : f32
      %t1 = arith.addf %a1, %v1 : f32
      scf.yield %t0, %t1 : f32, f32
    }
    %t = arith.addf %s#0, %s#1 : f32
    memref.store %t, %out[%i] : memref<8xf32>
  }
  return
}

// A strided view (a slice of wider rows, at an offset) is prefetched in its buffer:
// element (i, j) is at 8 + 2048 i + j; the last is 8 + 2048 * 3 + 1023 = 7175.
// CHECK-LABEL: func.func @strided_view(
// CHECK-SAME: %[[X:.*]]: memref<4x1024xf32, strided<[2048, 1], offset: 8>>
// CHECK: scf.for %[[I:.*]] =
// CHECK: scf.for %[[JJ:.*]] =
// CHECK: %[[FLAT:.*]] = memref.reinterpret_cast %[[X]] to offset: [0], sizes: [7176], strides: [1]
// CHECK: %[[AT:.*]] = arith.addi %[[JJ]], %c8
// CHECK: %[[ROW:.*]] = arith.muli %[[I]], %c2048
// CHECK: %[[AT2:.*]] = arith.addi %[[AT]], %[[ROW]]
// CHECK: %[[AHEAD:.*]] = arith.addi %[[AT2]], %c512
// CHECK: arith.minui %[[AHEAD]], %c7063
// CHECK-COUNT-8: memref.prefetch %[[FLAT]]
func.func @strided_view(%x: memref<4x1024xf32, strided<[2048, 1], offset: 8>>, %y: memref<4x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c1024 = arith.constant 1024 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c1024 step %c1 {
      %a = memref.load %x[%i, %j] : memref<4x1024xf32, strided<[2048, 1], offset: 8>>
      memref.store %a, %y[%i, %j] : memref<4x1024xf32>
    }
  }
  return
}

// A slice taken at any offset (a kernel's parameter, `memrefs.dynamic_offset`): the offset
// is read from the descriptor, and so is the clamp (offset + the slice's span - 1 - 7 * 16).
// CHECK-LABEL: func.func @slice_rows(
// CHECK-SAME: %[[LO:.*]]: index, %[[HI:.*]]: index, %[[X:.*]]: memref<64x1024xf32, strided<[2048, 1], offset: ?>>
// CHECK: scf.for %[[I:.*]] = %[[LO]] to %[[HI]]
// CHECK: scf.for %[[JJ:.*]] = %c0 to %c1024 step %c128 {
// CHECK: %{{.*}}, %[[OFF:.*]], %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata %[[X]]
// CHECK: %[[EXTENT:.*]] = arith.addi %[[OFF]], %c130048
// CHECK: %[[FLAT:.*]] = memref.reinterpret_cast %[[X]] to offset: [0], sizes: [%[[EXTENT]]], strides: [1] : {{.*}} to memref<?xf32>
// CHECK: %[[AT:.*]] = arith.addi %[[JJ]], %[[OFF]]
// CHECK: %[[LAST:.*]] = arith.subi %[[EXTENT]], %c113
// CHECK: %[[CLAMP:.*]] = arith.maxsi %[[LAST]], %c0
// CHECK: %[[ROW:.*]] = arith.muli %[[I]], %c2048
// CHECK: %[[AT2:.*]] = arith.addi %[[AT]], %[[ROW]]
// CHECK: %[[AHEAD:.*]] = arith.addi %[[AT2]], %c512
// CHECK: %[[P0:.*]] = arith.minui %[[AHEAD]], %[[CLAMP]]
// CHECK: memref.prefetch %[[FLAT]][%[[P0]]], read, locality<3>, data
// CHECK-COUNT-7: memref.prefetch %[[FLAT]]
// CHECK-NOT: memref.prefetch
func.func @slice_rows(%lo: index, %hi: index,
                      %x: memref<64x1024xf32, strided<[2048, 1], offset: ?>>,
                      %y: memref<64x1024xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c1024 = arith.constant 1024 : index
  scf.for %i = %lo to %hi step %c1 {
    scf.for %j = %c0 to %c1024 step %c1 {
      %a = memref.load %x[%i, %j] : memref<64x1024xf32, strided<[2048, 1], offset: ?>>
      %s = arith.mulf %a, %a : f32
      memref.store %s, %y[%i, %j] : memref<64x1024xf32>
    }
  }
  return
}

// dg-prefetch-streams on memrefs of run-time sizes: the stream's extent in its
// buffer (offset + 1 + sum((size - 1) * stride)) comes from its descriptor, the
// buffer is seen as one dim of that extent, and each prefetch is clamped to its last
// line, as for static shapes.
// RUN: fusegrad-opt %s -p 'dg-prefetch-streams' | filecheck %s

// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %[[LO:.*]]: index, %[[HI:.*]]: index, %[[X:.*]]: memref<?x?xf32>, %[[Y:.*]]: memref<?x?xf32>
// CHECK: scf.for %[[I:.*]] = %[[LO]] to %[[HI]]
// CHECK: %[[LEN:.*]] = memref.dim %[[X]], %c1
// CHECK: scf.for %[[JJ:.*]] = %c0 to %[[LEN]] step %c128 {
// CHECK: %[[END:.*]] = arith.minsi %{{.*}}, %[[LEN]]
// CHECK: %[[BASE:.*]], %[[OFF:.*]], %[[SIZES:.*]]:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %[[X]]
// CHECK: %[[FLAT:.*]] = memref.reinterpret_cast %[[X]] to offset: [0], sizes: [%{{.*}}], strides: [1] : memref<?x?xf32> to memref<?xf32>
// CHECK: arith.muli %[[I]], %[[STRIDES]]#0
// CHECK: %[[AT:.*]] = arith.minui
// CHECK: memref.prefetch %[[FLAT]][%[[AT]]], read, locality<3>, data
// CHECK-COUNT-7: memref.prefetch %[[FLAT]]
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %[[J:.*]] = %[[JJ]] to %[[END]] step %c1 {
// CHECK: memref.load %[[X]][%[[I]], %[[J]]]
func.func @rows(%lo: index, %hi: index, %x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %lo to %hi step %c1 {
    %n = memref.dim %x, %c1 : memref<?x?xf32>
    scf.for %j = %c0 to %n step %c1 {
      %a = memref.load %x[%i, %j] : memref<?x?xf32>
      %s = arith.mulf %a, %a : f32
      memref.store %s, %y[%i, %j] : memref<?x?xf32>
    }
  }
  return
}

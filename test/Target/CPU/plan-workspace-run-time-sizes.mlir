// dg-plan-workspace, temporaries of run-time sizes: the entry computes their sizes at
// its start and lays them out (after the static ones, after a 64-byte header) in the
// order of their layout at the size hints, each above the buffers live with it that lie
// below it there; it writes the bytes the call needs into the header of the workspace
// it was given (`memref<?xi8>`), and runs on a block of its own when they do not fit
// (freed at the end); the runtime grows its buffer for the next call. %a and %b are
// live together, %c only with %b: %c shares %a's bytes, %b lies above both.
// RUN: fusegrad-opt %s -p 'dg-plan-workspace' | filecheck %s

// CHECK: module attributes {dg.growing_workspaces = ["grows"], dg.workspaces = {grows = 128 : i64}}
// CHECK-LABEL: func.func @grows(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?xf32>, %{{.*}}: memref<?x?xf32>, %[[WS:.*]]: memref<?xi8>)
// CHECK: %[[R:.*]] = memref.dim %[[X]], %c0
// CHECK: %[[C:.*]] = memref.dim %[[X]], %c1
// CHECK: %[[A4:.*]] = arith.muli %c4, %[[R]]
// CHECK: %[[ABYTES:.*]] = arith.muli %[[A4]], %[[C]]
// CHECK: %[[AEND:.*]] = arith.addi %c128, %{{.*}} : index
// CHECK-NEXT: arith.maxui %c128, %[[AEND]]
// CHECK-NEXT: %[[CEND:.*]] = arith.addi %c128, %{{.*}} : index
// CHECK-NEXT: arith.maxui
// CHECK-NEXT: %[[B0:.*]] = arith.maxui %c128, %[[AEND]]
// CHECK-NEXT: %[[BOFF:.*]] = arith.maxui %[[B0]], %[[CEND]]
// CHECK-NEXT: arith.addi %[[BOFF]],
// CHECK-NEXT: %[[TOTAL:.*]] = arith.maxui
// CHECK: %[[HEADER:.*]] = memref.view %[[WS]][%{{.*}}][] : memref<?xi8> to memref<1xi64>
// CHECK: %[[NEED:.*]] = arith.index_cast %[[TOTAL]] : index to i64
// CHECK: memref.store %[[NEED]], %[[HEADER]]
// CHECK: %[[HAVE:.*]] = memref.dim %[[WS]]
// CHECK: %[[FITS:.*]] = arith.cmpi ule, %[[TOTAL]], %[[HAVE]]
// CHECK: %[[MEM:.*]] = scf.if %[[FITS]] -> (memref<?xi8>) {
// CHECK-NEXT: scf.yield %[[WS]]
// CHECK-NEXT: } else {
// CHECK-NEXT: %[[OWN:.*]] = memref.alloc(%[[TOTAL]]) {alignment = 64 : i64} : memref<?xi8>
// CHECK-NEXT: scf.yield %[[OWN]]
// CHECK: memref.view %[[MEM]][%c64{{.*}}][] : memref<?xi8> to memref<16xf32>
// CHECK: memref.view %[[MEM]][%c128][%{{.*}}, %{{.*}}] : memref<?xi8> to memref<?x?xf32>
// CHECK: memref.view %[[MEM]][%[[BOFF]]][%{{.*}}, %{{.*}}] : memref<?xi8> to memref<?x?xf32>
// CHECK: memref.view %[[MEM]][%c128][%{{.*}}] : memref<?xi8> to memref<?xf32>
// CHECK-NOT: memref.alloc
// CHECK: %[[SPILLED:.*]] = arith.cmpi ugt, %[[TOTAL]], %[[HAVE]]
// CHECK: scf.if %[[SPILLED]] {
// CHECK-NEXT: memref.dealloc %[[MEM]]
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @grows(%x: memref<?x?xf32>, %out: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  %rows = memref.dim %x, %c0 : memref<?x?xf32>
  %cols = memref.dim %x, %c1 : memref<?x?xf32>
  %a = memref.alloc(%rows, %cols) {alignment = 64 : i64} : memref<?x?xf32>
  memref.copy %x, %a : memref<?x?xf32> to memref<?x?xf32>
  %b = memref.alloc(%rows, %cols) {alignment = 64 : i64} : memref<?x?xf32>
  memref.copy %a, %b : memref<?x?xf32> to memref<?x?xf32>
  %two = arith.muli %rows, %cols : index
  %c = memref.alloc(%two) {alignment = 64 : i64} : memref<?xf32>
  %flat = memref.collapse_shape %b [[0, 1]] : memref<?x?xf32> into memref<?xf32>
  memref.copy %flat, %c : memref<?xf32> to memref<?xf32>
  %cc = memref.expand_shape %c [[0, 1]] output_shape [%rows, %cols] : memref<?xf32> into memref<?x?xf32>
  memref.copy %cc, %out : memref<?x?xf32> to memref<?x?xf32>
  memref.copy %s, %s : memref<16xf32> to memref<16xf32>
  memref.dealloc %a : memref<?x?xf32>
  memref.dealloc %b : memref<?x?xf32>
  memref.dealloc %c : memref<?xf32>
  memref.dealloc %s : memref<16xf32>
  return
}

// dg-plan-workspace at run-time sizes, what a dynamic training graph has beside plain
// temporaries: a temporary sized by a dim of another one, or of a reshape of another
// (the partial sums of a row kernel over a collapsed buffer), is planned and so is the
// one it is sized by (a dim is a number, not a use of the buffer's memory); a reshape's
// shape buffer (`memref<3xindex>`) is planned; an alloc nothing but its dealloc uses (a
// library call read the operand in place) is erased. No malloc is left.
// RUN: fusegrad-opt %s -p 'dg-plan-workspace' | filecheck %s

// CHECK-LABEL: func.func @views(
// CHECK-SAME: %[[X:[a-z0-9]+]]: memref<?x?x8xf32>, %{{.*}}: memref<?x8xf32>, %[[WS:.*]]: memref<?xi8>)
// CHECK: %[[R:.*]] = memref.dim %[[X]], %c0
// CHECK: %[[C:.*]] = memref.dim %[[X]], %c1
// The partials' rows at the start: the collapsed dim is the product of the dims it merges.
// CHECK: %[[RC:.*]] = arith.muli %[[R]], %[[C]] : index
// CHECK-NEXT: %{{.*}} = arith.constant 4 : index
// CHECK-NEXT: %{{.*}} = arith.divui %[[RC]]
// CHECK: %[[MEM:.*]] = scf.if
// CHECK: memref.view %[[MEM]][%c128][%{{.*}}, %{{.*}}] : memref<?xi8> to memref<?x?x8xf32>
// CHECK: memref.view %[[MEM]][%c64{{.*}}][] : memref<?xi8> to memref<3xindex>
// %t is dead once its dim is read: the partials reuse its bytes.
// CHECK: memref.view %[[MEM]][%c128][%{{.*}}] : memref<?xi8> to memref<?x8xf32>
// CHECK-NOT: memref<16x?xf32>
// CHECK: scf.if
// CHECK-NEXT: memref.dealloc %[[MEM]]
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @views(%x: memref<?x?x8xf32>, %out: memref<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %rows = memref.dim %x, %c0 : memref<?x?x8xf32>
  %cols = memref.dim %x, %c1 : memref<?x?x8xf32>
  %t = memref.alloc(%rows, %cols) {alignment = 64 : i64} : memref<?x?x8xf32>
  memref.copy %x, %t : memref<?x?x8xf32> to memref<?x?x8xf32>
  %shape = memref.alloc() {alignment = 64 : i64} : memref<3xindex>
  memref.store %rows, %shape[%c0] : memref<3xindex>
  %flat = memref.collapse_shape %t [[0, 1], [2]] : memref<?x?x8xf32> into memref<?x8xf32>
  %n = memref.dim %flat, %c0 : memref<?x8xf32>
  %blocks = arith.divui %n, %c4 : index
  %partials = memref.alloc(%blocks) {alignment = 64 : i64} : memref<?x8xf32>
  %unused = memref.alloc(%cols) {alignment = 64 : i64} : memref<16x?xf32>
  memref.copy %partials, %out : memref<?x8xf32> to memref<?x8xf32>
  memref.dealloc %t : memref<?x?x8xf32>
  memref.dealloc %shape : memref<3xindex>
  memref.dealloc %partials : memref<?x8xf32>
  memref.dealloc %unused : memref<16x?xf32>
  return
}

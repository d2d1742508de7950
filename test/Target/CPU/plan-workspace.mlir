// dg-plan-workspace: the temporaries of a public function become views of one
// trailing workspace argument; buffers live at the same time get disjoint bytes,
// a buffer whose live range ended is reused. Private functions keep their allocs; an
// alloc nothing but its dealloc uses is erased (temporaries of run-time sizes:
// plan-workspace-run-time-sizes.mlir, plan-workspace-sized-by-views.mlir).
// RUN: fusegrad-opt %s -p 'dg-plan-workspace' | filecheck %s

// CHECK: module attributes {dg.workspaces = {chain = 8192 : i64, through_view = 128 : i64}}

// %a (4 KiB) is dead once %b is computed, so %c reuses its bytes; %b overlaps both.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME: %{{.*}}: memref<1024xf32>, %{{.*}}: memref<1024xf32>, %[[WS:.*]]: memref<8192xi8>)
// CHECK-NOT: memref.alloc
// CHECK: arith.constant 0 : index
// CHECK-NEXT: memref.view %[[WS]][%{{.*}}][] : memref<8192xi8> to memref<1024xf32>
// CHECK: arith.constant 4096 : index
// CHECK-NEXT: memref.view %[[WS]][%{{.*}}][] : memref<8192xi8> to memref<1024xf32>
// CHECK: arith.constant 0 : index
// CHECK-NEXT: memref.view %[[WS]][%{{.*}}][] : memref<8192xi8> to memref<1024xf32>
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @chain(%x: memref<1024xf32>, %out: memref<1024xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
  memref.copy %x, %a : memref<1024xf32> to memref<1024xf32>
  %b = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
  memref.copy %a, %b : memref<1024xf32> to memref<1024xf32>
  %c = memref.alloc() {alignment = 64 : i64} : memref<1024xf32>
  memref.copy %b, %c : memref<1024xf32> to memref<1024xf32>
  memref.copy %c, %out : memref<1024xf32> to memref<1024xf32>
  memref.dealloc %a : memref<1024xf32>
  memref.dealloc %b : memref<1024xf32>
  memref.dealloc %c : memref<1024xf32>
  return
}

// A view keeps its buffer alive: %v (a reshape of %a) is read after %b is written,
// so %a and %b overlap in time and get different offsets (64-byte aligned).
// CHECK-LABEL: func.func @through_view(
// CHECK: arith.constant 0 : index
// CHECK-NEXT: %[[A:.*]] = memref.view
// CHECK: memref.expand_shape %[[A]]
// CHECK: arith.constant 64 : index
// CHECK-NEXT: memref.view
// CHECK: return
func.func @through_view(%x: memref<16xf32>, %out: memref<4x4xf32>) {
  %a = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  %v = memref.expand_shape %a [[0, 1]] output_shape [4, 4] : memref<16xf32> into memref<4x4xf32>
  %b = memref.alloc() : memref<16xf32>
  memref.copy %x, %b : memref<16xf32> to memref<16xf32>
  memref.copy %v, %out : memref<4x4xf32> to memref<4x4xf32>
  memref.dealloc %b : memref<16xf32>
  memref.dealloc %a : memref<16xf32>
  return
}

// CHECK-LABEL: func.func private @helper(
// CHECK: memref.alloc
func.func private @helper(%x: memref<4xf32>) {
  %a = memref.alloc() : memref<4xf32>
  memref.copy %x, %a : memref<4xf32> to memref<4xf32>
  memref.dealloc %a : memref<4xf32>
  return
}

// CHECK-LABEL: func.func @unused(
// CHECK-SAME: %{{.*}}: index)
// CHECK-NEXT: return
func.func @unused(%n: index) {
  %a = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %a : memref<?xf32>
  return
}

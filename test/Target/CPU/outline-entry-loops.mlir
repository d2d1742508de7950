// dg-outline-entry-loops: a loop left in an entry (a partial-result combine, an
// inline reduction) moves into a private noinline function of its own, which
// takes the memrefs it reads and writes, clones the constants it uses and returns
// what the loop carries; the entry keeps only a call. Pointers of distinct buffers
// are recorded as for kernels (dg-noalias-kernel-args), so LLVM vectorizes the loop
// without runtime alias checks. LLVM then never runs its
// loop passes over the whole (long, straight-line) entry.
// RUN: fusegrad-opt %s -p 'dg-outline-entry-loops' | filecheck %s

// CHECK-LABEL: func.func private @entry_loop0(
// CHECK-SAME: %[[A:.*]]: memref<8x4xf32>, %[[B:.*]]: memref<4xf32>)
// (aligned pointers: %A fields 0-6, %B fields 7-11)
// CHECK-SAME: dg.noalias_pointers = array<i64: 1, 8>
// CHECK-SAME: passthrough = ["noinline", ["prefer-vector-width", "512"]]
// CHECK: %[[C8:.*]] = arith.constant 8 : index
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[C8]]
// CHECK: memref.load %[[A]][%[[I]], %{{.*}}]
// CHECK: memref.store %{{.*}}, %[[B]]
// CHECK: return
// CHECK-LABEL: func.func private @entry_loop1(
// CHECK-SAME: %{{.*}}: memref<4xf32>) -> f32
// CHECK: %[[SUM:.*]] = scf.for {{.*}} iter_args
// CHECK: return %[[SUM]] : f32
// CHECK-LABEL: func.func @entry(
// CHECK-NOT: scf.for
// CHECK: call @entry_loop0(%arg0, %arg1) : (memref<8x4xf32>, memref<4xf32>) -> ()
// CHECK: %[[S:.*]] = call @entry_loop1(%arg1) : (memref<4xf32>) -> f32
// CHECK: memref.store %[[S]], %arg2[]
func.func @entry(%a: memref<8x4xf32>, %b: memref<4xf32>, %out: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c4 step %c1 {
      %x = memref.load %a[%i, %j] : memref<8x4xf32>
      %y = memref.load %b[%j] : memref<4xf32>
      %z = arith.addf %x, %y : f32
      memref.store %z, %b[%j] : memref<4xf32>
    }
  }
  %s = scf.for %j = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
    %y = memref.load %b[%j] : memref<4xf32>
    %n = arith.addf %acc, %y : f32
    scf.yield %n : f32
  }
  memref.store %s, %out[] : memref<f32>
  return
}

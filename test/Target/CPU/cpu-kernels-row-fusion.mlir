// dg-cpu-kernels: ops parallel over the same rows that share buffers only row
// by row run in one row loop, outlined as a kernel; a temporary used only
// there (the row max) shrinks to one row on the kernel's stack; the row
// reductions carry their accumulators in registers with fastmath<reassoc>;
// large kernels are called through a __parallel launcher, small ones directly.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// CHECK-LABEL: func.func private @softmax_k0(%arg0: index, %arg1: index, %arg2: memref<512x256xf32>, %arg3: memref<512x256xf32>)
// CHECK: %[[MAX:[a-z0-9_]+]] = memref.alloca() : memref<1xf32>
// CHECK: scf.for %[[I:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: memref.store %{{.*}}, %[[MAX]][%{{.*}}] : memref<1xf32>
// CHECK: scf.for {{.*}} iter_args
// CHECK: arith.maximumf {{.*}} fastmath<reassoc>
// CHECK: scf.for
// CHECK: memref.store {{.*}}, %arg3[%[[I]], %{{.*}}]
// CHECK-NOT: linalg.
// CHECK-LABEL: func.func @softmax(
// CHECK-NOT: memref.alloc
// CHECK: call @softmax_k0__parallel(%{{.*}}, %arg0, %arg1) : (index, memref<512x256xf32>, memref<512x256xf32>) -> ()
func.func @softmax(%x: memref<512x256xf32>, %y: memref<512x256xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %m = memref.alloc() : memref<512xf32>
  linalg.fill ins(%ninf : f32) outs(%m : memref<512xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<512x256xf32>) outs(%m : memref<512xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.maximumf %acc, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<512x256xf32>, memref<512xf32>) outs(%y : memref<512x256xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %0 = arith.subf %in, %mx : f32
    %1 = math.exp %0 : f32
    linalg.yield %1 : f32
  }
  memref.dealloc %m : memref<512xf32>
  return
}

// A small kernel is called directly with its row range.
// CHECK-LABEL: func.func @small(
// CHECK: call @small_k{{[0-9]+}}(%{{.*}}, %{{.*}}, %arg0, %arg1) : (index, index, memref<4x8xf32>, memref<4x8xf32>) -> ()
func.func @small(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// A buffer written by one op and read transposed by the next is not row-local:
// two kernels, and the temporary stays a full buffer.
// CHECK-LABEL: func.func @transposed(
// CHECK: memref.alloc() : memref<8x8xf32>
// CHECK: call @transposed_k{{[0-9]+}}(
// CHECK: call @transposed_k{{[0-9]+}}(
func.func @transposed(%x: memref<8x8xf32>, %y: memref<8x8xf32>) {
  %t = memref.alloc() : memref<8x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x8xf32>) outs(%t : memref<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<8x8xf32>) outs(%y : memref<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %t : memref<8x8xf32>
  return
}

// A reduction over rows (a bias gradient) runs inline: its outer loop is not parallel.
// CHECK-LABEL: func.func @colsum(
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.addf
// CHECK-NOT: call
func.func @colsum(%x: memref<64x32xf32>, %y: memref<32xf32>) {
  linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<64x32xf32>) outs(%y : memref<32xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// A large reduction over rows runs by blocks of whole rows, each block summing
// into its own partial row, which the caller adds up: every row is read whole and
// in order. (Threaded by blocks of columns instead, each thread would read a
// strided slice of every row.)
// CHECK-LABEL: func.func private @bias_grad_k{{[0-9]+}}(%arg0: index, %arg1: index
// CHECK-SAME: %[[P:[a-z0-9_]+]]: memref<16x1024xf32>
// CHECK: scf.for %[[B:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: %[[LO:.*]] = arith.muli %[[B]], %c16
// CHECK: scf.for %[[R:[a-z0-9_]+]] = %[[LO]] to
// CHECK: scf.for %[[J:[a-z0-9_]+]] =
// CHECK: memref.load %{{.*}}[%[[R]], %[[J]]] : memref<256x1024xf32>
// CHECK: memref.store %{{.*}}, %[[P]][%[[B]], %[[J]]]
// CHECK-LABEL: func.func @bias_grad(
// CHECK: call @bias_grad_k{{[0-9]+}}__parallel(%c16, %arg0, %{{.*}})
func.func @bias_grad(%x: memref<256x1024xf32>, %y: memref<1024xf32>) {
  linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x1024xf32>) outs(%y : memref<1024xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// One whose partials cannot start from a float identity (an integer count) is
// threaded by blocks of its parallel (column) dim.
// CHECK-LABEL: func.func private @count_k{{[0-9]+}}(%arg0: index, %arg1: index
// CHECK: scf.for %[[B:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: scf.for
// CHECK: %[[LO:.*]] = arith.muli %[[B]], %c128
// CHECK: scf.for %{{.*}} = %[[LO]] to
// CHECK-LABEL: func.func @count(
// CHECK: call @count_k{{[0-9]+}}__parallel(%c8, %arg0, %arg1)
func.func @count(%x: memref<256x1024xi32>, %y: memref<1024xi32>) {
  linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x1024xi32>) outs(%y : memref<1024xi32>) {
  ^bb0(%in: i32, %acc: i32):
    %0 = arith.addi %acc, %in : i32
    linalg.yield %0 : i32
  }
  return
}

// An independent pointwise op over the same loops shares the nest of a reduction
// over rows: one kernel, one innermost body storing both (LLVM computes what the
// two bodies share once).
// CHECK-LABEL: func.func private @grads_k{{[0-9]+}}(
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.addf
// CHECK: memref.store
// CHECK: arith.mulf
// CHECK: memref.store
// CHECK-NOT: scf.for
// CHECK: return
// CHECK-LABEL: func.func @grads(
// CHECK: call @grads_k{{[0-9]+}}__parallel(
// CHECK-NOT: call
func.func @grads(%x: memref<256x1024xf32>, %db: memref<1024xf32>, %dx: memref<256x1024xf32>) {
  linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<256x1024xf32>) outs(%db : memref<1024xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<256x1024xf32>) outs(%dx : memref<256x1024xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// An op between two row loops over the same rows that cannot join them (a fill
// of other rows), independent of the second, moves below it: the row loops
// share one kernel.
// CHECK-LABEL: func.func @sink(
// CHECK: call @sink_k{{[0-9]+}}__parallel(%c256, %arg0, %arg1, %arg2)
// CHECK-NEXT: %{{.*}} = arith.constant
// CHECK-NEXT: %{{.*}} = arith.constant
// CHECK-NEXT: call @sink_k{{[0-9]+}}(%{{.*}}, %{{.*}}, %arg3)
// CHECK-NEXT: return
func.func @sink(%x: memref<256x1024xf32>, %m: memref<256xf32>, %y: memref<256x1024xf32>, %db: memref<1024xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<256x1024xf32>) outs(%m : memref<256xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.maximumf %acc, %in : f32
    linalg.yield %0 : f32
  }
  linalg.fill ins(%zero : f32) outs(%db : memref<1024xf32>)
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<256x1024xf32>, memref<256xf32>) outs(%y : memref<256x1024xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %0 = arith.subf %in, %mx : f32
    linalg.yield %0 : f32
  }
  return
}

// dg-cpu-kernels: a reduction over rows (a weight gradient) that follows row loops
// over the same rows joins their kernel: each block of rows accumulates its own
// partial result (started from the identity) while the row is in cache, and the
// caller adds the blocks' partials in block order in f64 after the kernel. A block
// holds at most 64 rows (its rows add one after the other), so 8192 rows make 128
// blocks. The fill
// and copy that initialise the gradient, standing between the row loop and the
// reduction, move above the row loop (one small kernel). So a layer norm's backward reads its
// inputs from DRAM once. The reduction and the pointwise loop before it, over the same
// loops and independent, share one innermost body. A reduction over everything joins
// the same way.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// CHECK-LABEL: func.func private @ln_bwd_k1(%arg0: index, %arg1: index
// CHECK-SAME: %[[P:[a-z0-9_]+]]: memref<128x1024xf32>
// CHECK: scf.for %[[B:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: scf.for %[[J:[a-z0-9_]+]] =
// CHECK: memref.store %{{.*}}, %[[P]][%[[B]], %[[J]]]
// CHECK: %[[LO:.*]] = arith.muli %[[B]], %c64
// CHECK: scf.for %[[R:[a-z0-9_]+]] = %[[LO]] to
// CHECK: scf.for {{.*}} iter_args
// CHECK: } {dg.sum_blocks}
// CHECK: scf.for %[[K:[a-z0-9_]+]] =
// CHECK: memref.store {{.*}}, %arg{{[0-9]+}}[%[[R]], %[[K]]] : memref<8192x1024xf32>
// CHECK: %[[ACC:.*]] = memref.load %[[P]][%[[B]], %[[K]]]
// CHECK: arith.addf %[[ACC]]
// CHECK: memref.store %{{.*}}, %[[P]][%[[B]], %[[K]]]
// CHECK-LABEL: func.func @ln_bwd(
// CHECK: call @ln_bwd_k0(%{{.*}}, %{{.*}}, %arg3)
// CHECK: %[[PART:.*]] = memref.alloc() : memref<128x1024xf32>
// CHECK: call @ln_bwd_k1__parallel(%c128, {{.*}}%[[PART]])
// CHECK: %[[TOTAL:.*]] = memref.alloc() : memref<1024xf64>
// CHECK: scf.for %[[B2:[a-z0-9_]+]] = %{{.*}} to %c128
// CHECK: scf.for %[[J2:[a-z0-9_]+]] =
// CHECK: %[[NEW:.*]] = memref.load %[[PART]][%[[B2]], %[[J2]]]
// CHECK: %[[NEW64:.*]] = arith.extf %[[NEW]] : f32 to f64
// CHECK: %[[OLD:.*]] = memref.load %[[TOTAL]][%[[J2]]]
// CHECK: %[[SUM:.*]] = arith.addf %[[OLD]], %[[NEW64]] : f64
// CHECK: memref.store %[[SUM]], %[[TOTAL]][%[[J2]]]
// CHECK: arith.truncf
// CHECK: memref.store %{{.*}}, %arg3[
// CHECK: memref.dealloc %[[PART]]
// CHECK-NOT: call
func.func @ln_bwd(%x: memref<8192x1024xf32>, %dy: memref<8192x1024xf32>,
                  %dx: memref<8192x1024xf32>, %dw: memref<1024xf32>) {
  %zero = arith.constant 0.0 : f32
  %s = memref.alloc() : memref<8192xf32>
  linalg.fill ins(%zero : f32) outs(%s : memref<8192xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%dy : memref<8192x1024xf32>) outs(%s : memref<8192xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%dy, %s : memref<8192x1024xf32>, memref<8192xf32>) outs(%dx : memref<8192x1024xf32>) {
  ^bb0(%in: f32, %sum: f32, %out: f32):
    %0 = arith.subf %in, %sum : f32
    linalg.yield %0 : f32
  }
  %init = memref.alloc() : memref<1024xf32>
  linalg.fill ins(%zero : f32) outs(%init : memref<1024xf32>)
  memref.copy %init, %dw : memref<1024xf32> to memref<1024xf32>
  linalg.generic {indexing_maps = [#id, #id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x, %dy : memref<8192x1024xf32>, memref<8192x1024xf32>) outs(%dw : memref<1024xf32>) {
  ^bb0(%a: f32, %g: f32, %acc: f32):
    %0 = arith.mulf %a, %g : f32
    %1 = arith.addf %acc, %0 : f32
    linalg.yield %1 : f32
  }
  memref.dealloc %init : memref<1024xf32>
  memref.dealloc %s : memref<8192xf32>
  return
}

// A reduction over rows that reads what the row loop writes in other rows (here a
// whole column of it) cannot run block by block: it stays a kernel of its own.
// CHECK-LABEL: func.func @transposed_read(
// CHECK: call @transposed_read_k{{[0-9]+}}__parallel(%c256,
// CHECK: call @transposed_read_k{{[0-9]+}}__parallel(%c16,
func.func @transposed_read(%x: memref<256x256xf32>, %t: memref<256x256xf32>, %dw: memref<256xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<256x256xf32>) outs(%t : memref<256x256xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, #col], iterator_types = ["reduction", "parallel"]}
      ins(%t : memref<256x256xf32>) outs(%dw : memref<256xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// A reduction over everything (a loss summed over all elements) joins the row
// kernel too: each row's sum (blocked_sums.py: here one block, the row in L1 after the
// row loop read it) stays in registers and is added to its block's partial once; the
// caller adds the 128 partials to the scalar.
// CHECK-LABEL: func.func private @loss_k{{[0-9]+}}(
// CHECK-SAME: %[[P:[a-z0-9_]+]]: memref<128xf32>
// CHECK: scf.for %[[B:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: memref.store %{{.*}}, %[[P]][%[[B]]]
// CHECK: scf.for %[[R:[a-z0-9_]+]] =
// CHECK: %[[ACC:.*]] = memref.load %[[P]][%[[B]]]
// CHECK: %[[SUM:.*]] = scf.for {{.*}} -> (f32)
// CHECK: } {dg.sum_block = 1024 : i64}
// CHECK: %[[TOTAL:.*]] = arith.addf %[[ACC]], %[[SUM]] : f32
// CHECK: memref.store %[[TOTAL]], %[[P]][%[[B]]]
// CHECK-LABEL: func.func @loss(
// CHECK: memref.alloc() : memref<128xf32>
// CHECK: call @loss_k{{[0-9]+}}__parallel(%c128,
// CHECK-NOT: call
func.func @loss(%x: memref<8192x1024xf32>, %y: memref<8192x1024xf32>, %l: memref<f32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8192x1024xf32>) outs(%y : memref<8192x1024xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<8192x1024xf32>) outs(%l : memref<f32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

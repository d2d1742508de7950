// dg-cpu-kernels with run-time sizes: a layer norm's backward where a scalar computed from
// a run-time size (the row length as a float) and its buffer stand between the row loops
// and the weight gradient's reduction over rows that reads it. The scalar's alloc had
// stayed inside the run when the scalar's loop moved below the first row loop, and the
// reduction then kept a kernel of its own (reading the rows from DRAM twice, 1.3x the
// static program's backward); now alloc, scalar loop and the gradient's fill move above
// the run, and the row loops and the reduction's per-block partials share one kernel.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

// CHECK-LABEL: func.func private @ln_bwd_k0(
// CHECK-LABEL: func.func private @ln_bwd_k1(
// CHECK: math.rsqrt
// CHECK: } {dg.sum_blocks}
// CHECK: memref.load %arg6[] : memref<f32>
// CHECK-NOT: func.func private @ln_bwd_k2
// CHECK-LABEL: func.func @ln_bwd(
// CHECK: %[[COUNT:.*]] = memref.alloc() : memref<f32>
// CHECK: arith.sitofp
// CHECK: memref.store %{{.*}}, %[[COUNT]][]
// CHECK: call @ln_bwd_k0__parallel
// CHECK: call @ln_bwd_k1__parallel({{.*}}%[[COUNT]]
// CHECK-NOT: call @ln_bwd_k2
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#cell = affine_map<(d0, d1) -> (d0, 0)>
#scalar2 = affine_map<(d0, d1) -> ()>
#none = affine_map<() -> ()>

func.func @ln_bwd(%x: memref<?x?xf32>, %dy: memref<?x?xf32>, %var: memref<?xf32>,
                  %n: memref<i64>, %dw: memref<?xf32>, %s: memref<?xf32>) {
  %zero = arith.constant 0.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %c0 = arith.constant 0 : index
  %rows = memref.dim %x, %c0 : memref<?x?xf32>
  %rstd = memref.alloc(%rows) : memref<?x1xf32>
  linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%var : memref<?xf32>) outs(%rstd : memref<?x1xf32>) {
  ^bb0(%v: f32, %out: f32):
    %0 = arith.addf %v, %eps : f32
    %1 = math.rsqrt %0 : f32
    linalg.yield %1 : f32
  }
  %count = memref.alloc() : memref<f32>
  linalg.generic {indexing_maps = [#none, #none], iterator_types = []}
      ins(%n : memref<i64>) outs(%count : memref<f32>) {
  ^bb0(%in: i64, %out: f32):
    %0 = arith.sitofp %in : i64 to f32
    linalg.yield %0 : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<?xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%dy : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  linalg.fill ins(%zero : f32) outs(%dw : memref<?xf32>)
  linalg.generic {indexing_maps = [#id, #id, #cell, #scalar2, #col],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %dy, %rstd, %count : memref<?x?xf32>, memref<?x?xf32>, memref<?x1xf32>, memref<f32>)
      outs(%dw : memref<?xf32>) {
  ^bb0(%a: f32, %g: f32, %r: f32, %c: f32, %acc: f32):
    %0 = arith.mulf %a, %g : f32
    %1 = arith.mulf %0, %r : f32
    %2 = arith.divf %1, %c : f32
    %3 = arith.addf %acc, %2 : f32
    linalg.yield %3 : f32
  }
  memref.dealloc %count : memref<f32>
  memref.dealloc %rstd : memref<?x1xf32>
  return
}

// dg-cpu-kernels: a NaN-propagating max reduction (arith.maximumf) runs in 16
// independent accumulator lanes (one 64-byte vector of f32): LLVM neither
// vectorizes nor unchains such a reduction itself. The lanes are combined once,
// then the remainder of the row (1000 = 62 * 16 + 8) runs with one accumulator.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// CHECK-LABEL: func.func private @row_max_k0(
// CHECK: %[[MAIN:.*]] = arith.constant 992 : index
// CHECK: %[[STEP:.*]] = arith.constant 16 : index
// CHECK: %[[LANES:.*]]:16 = scf.for %[[J:[a-z0-9_]+]] = %{{.*}} to %[[MAIN]] step %[[STEP]] iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK-COUNT-16: arith.maximumf {{.*}} fastmath<reassoc>
// CHECK: scf.yield
// CHECK-COUNT-16: arith.maximumf
// CHECK: scf.for %{{.*}} = %c992{{.*}} to %c1000 step %{{.*}} iter_args
// CHECK: arith.maximumf
func.func @row_max(%x: memref<8x1000xf32>, %m: memref<8xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  linalg.fill ins(%ninf : f32) outs(%m : memref<8xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x1000xf32>) outs(%m : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.maximumf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// A sum keeps one accumulator: LLVM vectorizes it (fastmath<reassoc>).
// CHECK-LABEL: func.func private @row_sum_k{{[0-9]+}}(
// CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32)
// CHECK-NOT: arith.constant 992
func.func @row_sum(%x: memref<8x1000xf32>, %m: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%m : memref<8xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x1000xf32>) outs(%m : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

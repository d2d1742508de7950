// dg-cpu-kernels: a run of row-parallel ops over the same rows is split into kernels
// of at most row-group-max-loops ops (LLVM's loop passes take superlinear time in a
// kernel's size): three ops at a cap of two make two kernels, in order.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels{row-group-max-loops=2}' | filecheck %s
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s --check-prefix=DEFAULT

#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func private @chain_k0(
// CHECK-COUNT-2: arith.mulf
// CHECK-NOT: arith.mulf
// CHECK: return
// CHECK-LABEL: func.func private @chain_k1(
// CHECK: arith.mulf
// CHECK-NOT: arith.mulf
// CHECK: return
// DEFAULT-LABEL: func.func private @chain_k0(
// DEFAULT-COUNT-3: arith.mulf
// DEFAULT-NOT: @chain_k1
// CHECK-LABEL: func.func @chain(
// CHECK: call @chain_k0
// CHECK: call @chain_k1
func.func @chain(%x: memref<4x8xf32>, %a: memref<4x8xf32>, %b: memref<4x8xf32>, %c: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%a : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32>) outs(%b : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : memref<4x8xf32>) outs(%c : memref<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  return
}

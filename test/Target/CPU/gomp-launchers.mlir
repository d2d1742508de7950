// dg-gomp-launchers: a kernel's __parallel declaration (from dg-cpu-kernels)
// becomes a GOMP_parallel call on a packed argument struct, and a __thread
// function gives each OpenMP thread one contiguous chunk of the rows.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels,dg-cpu-llvm' | filecheck %s

// CHECK-DAG: llvm.func @GOMP_parallel(!llvm.ptr, !llvm.ptr, i32, i32)
// CHECK-DAG: llvm.func @omp_get_thread_num() -> i32
// CHECK-LABEL: llvm.func internal @rows_k0__parallel(%arg0: i64, %arg1: !llvm.ptr, %arg2: !llvm.ptr)
// CHECK-SAME: passthrough = ["noinline"]
// CHECK: llvm.alloca
// CHECK: llvm.mlir.addressof @rows_k0__thread
// CHECK: llvm.call @GOMP_parallel(
// CHECK-LABEL: llvm.func internal @rows_k0__thread(%arg0: !llvm.ptr)
// CHECK: llvm.call @omp_get_thread_num()
// CHECK: llvm.call @omp_get_num_threads()
// CHECK: llvm.sdiv
// CHECK: llvm.call @rows_k0(
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @rows(%x: memref<1024x128xf32>, %y: memref<1024x128xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<1024x128xf32>) outs(%y : memref<1024x128xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// dg-prune-kernel-params: a kernel over static memrefs reads only their aligned
// pointers and, for a view, its offset (sizes and strides are constants of its types;
// a view's offset is a parameter, `memrefs.dynamic_offset`, so that the same code over
// other slices is the same kernel), so after canonicalize folds the descriptors it
// rebuilds, the other descriptor fields leave the kernel, its __parallel launcher and
// every call.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels,dg-cpu-llvm' | filecheck %s

// CHECK-LABEL: llvm.func internal @rows_k0(%arg0: i64, %arg1: i64, %arg2: !llvm.ptr {llvm.noalias}, %arg3: i64, %arg4: !llvm.ptr {llvm.noalias})
// CHECK: llvm.getelementptr %arg2[%arg3] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-LABEL: llvm.func @rows(
// CHECK: llvm.call @rows_k0__parallel(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i64, !llvm.ptr, i64, !llvm.ptr) -> ()
// CHECK-LABEL: llvm.func internal @rows_k0__parallel(%arg0: i64, %arg1: !llvm.ptr, %arg2: i64, %arg3: !llvm.ptr)
// CHECK-LABEL: llvm.func internal @rows_k0__thread(
// CHECK: llvm.call @rows_k0(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, !llvm.ptr, i64, !llvm.ptr) -> ()
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @rows(%x: memref<1024x192xf32>, %y: memref<1024x128xf32>) {
  %v = memref.subview %x[0, 64] [1024, 128] [1, 1]
      : memref<1024x192xf32> to memref<1024x128xf32, strided<[192, 1], offset: 64>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%v : memref<1024x128xf32, strided<[192, 1], offset: 64>>)
      outs(%y : memref<1024x128xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  return
}

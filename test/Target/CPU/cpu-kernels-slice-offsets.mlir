// Kernels and outlined loops take a slice at any offset (`memrefs.dynamic_offset`: the
// call casts it), so the same code over slices at different offsets is one function
// after dg-dedup-functions: the time steps of an unrolled GRU made 307 kernels and 103
// loops of its backward, 69 and 13 this way.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels,func.func(convert-linalg-to-loops),dg-outline-entry-loops,dg-dedup-functions' | filecheck %s

// CHECK-LABEL: func.func private @first_k0(%arg0: index, %arg1: index, %arg2: memref<4x32xf32, strided<[96, 1], offset: ?>>, %arg3: memref<4x32xf32>)
// CHECK-NOT: func.func private @second_k
// CHECK-LABEL: func.func @first(
// CHECK: %[[A:.*]] = memref.cast %{{.*}} : memref<4x32xf32, strided<[96, 1]>> to memref<4x32xf32, strided<[96, 1], offset: ?>>
// CHECK: call @first_k0(%{{.*}}, %{{.*}}, %[[A]], %arg1)
// CHECK-LABEL: func.func @second(
// CHECK: %[[B:.*]] = memref.cast %{{.*}} : memref<4x32xf32, strided<[96, 1], offset: 32>> to memref<4x32xf32, strided<[96, 1], offset: ?>>
// CHECK: call @first_k0(%{{.*}}, %{{.*}}, %[[B]], %arg1)
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @first(%x: memref<4x96xf32>, %y: memref<4x32xf32>) {
  %s = memref.subview %x[0, 0] [4, 32] [1, 1] : memref<4x96xf32> to memref<4x32xf32, strided<[96, 1]>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : memref<4x32xf32, strided<[96, 1]>>) outs(%y : memref<4x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  }
  return
}
func.func @second(%x: memref<4x96xf32>, %y: memref<4x32xf32>) {
  %s = memref.subview %x[0, 32] [4, 32] [1, 1] : memref<4x96xf32> to memref<4x32xf32, strided<[96, 1], offset: 32>>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : memref<4x32xf32, strided<[96, 1], offset: 32>>) outs(%y : memref<4x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  }
  return
}

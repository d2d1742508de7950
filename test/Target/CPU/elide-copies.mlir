// dg-elide-copies: a buffer written, then copied whole (through reshapes) into part of
// another buffer and dead after the copy, becomes that part: a reinterpret_cast of the
// destination's buffer with the strides the copy's destination gives it. A
// concatenation's parts are then computed in place, and so is the concatenation
// copied into the out-param: the generic writes both halves of %out directly.
// RUN: fusegrad-opt %s -p 'dg-elide-copies,canonicalize' | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @interleave(
// CHECK-SAME: %[[X:.*]]: memref<4x8xf32>, %[[OUT:.*]]: memref<4x16xf32>)
// CHECK-DAG: %[[EVEN:.*]] = memref.reinterpret_cast %[[OUT]] to offset: [0], sizes: [4, 8], strides: [16, 2]
// CHECK-DAG: %[[ODD:.*]] = memref.reinterpret_cast %[[OUT]] to offset: [1], sizes: [4, 8], strides: [16, 2]
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]] : memref<4x8xf32>) outs(%[[EVEN]], %[[ODD]] :
// CHECK-NOT: memref.copy
// CHECK-NOT: memref.alloc
// CHECK: return
func.func @interleave(%x: memref<4x8xf32>, %out: memref<4x16xf32>) {
  %a = memref.alloc() : memref<4x8xf32>
  %b = memref.alloc() : memref<4x8xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%a, %b : memref<4x8xf32>, memref<4x8xf32>) {
  ^bb0(%in: f32, %o1: f32, %o2: f32):
    %n = arith.negf %in : f32
    linalg.yield %in, %n : f32, f32
  }
  %ea = memref.expand_shape %a [[0], [1, 2]] output_shape [4, 8, 1] : memref<4x8xf32> into memref<4x8x1xf32>
  %eb = memref.expand_shape %b [[0], [1, 2]] output_shape [4, 8, 1] : memref<4x8xf32> into memref<4x8x1xf32>
  %c = memref.alloc() : memref<4x8x2xf32>
  %s0 = memref.subview %c[0, 0, 0] [4, 8, 1] [1, 1, 1] : memref<4x8x2xf32> to memref<4x8x1xf32, strided<[16, 2, 1]>>
  memref.copy %ea, %s0 : memref<4x8x1xf32> to memref<4x8x1xf32, strided<[16, 2, 1]>>
  %s1 = memref.subview %c[0, 0, 1] [4, 8, 1] [1, 1, 1] : memref<4x8x2xf32> to memref<4x8x1xf32, strided<[16, 2, 1], offset: 1>>
  memref.copy %eb, %s1 : memref<4x8x1xf32> to memref<4x8x1xf32, strided<[16, 2, 1], offset: 1>>
  %cc = memref.collapse_shape %c [[0], [1, 2]] : memref<4x8x2xf32> into memref<4x16xf32>
  memref.copy %cc, %out : memref<4x16xf32> to memref<4x16xf32>
  memref.dealloc %a : memref<4x8xf32>
  memref.dealloc %b : memref<4x8xf32>
  memref.dealloc %c : memref<4x8x2xf32>
  return
}

// Views of the part keep their place in the destination: rows 2-3 of the part become
// rows 2-3 of %out's right half, which the copies from %x now write.
// CHECK-LABEL: func.func @part_view(
// CHECK: %[[R:.*]] = memref.reinterpret_cast %{{.*}} to offset: [8], sizes: [4, 8], strides: [16, 1]
// CHECK: memref.subview %[[R]][2, 0] [2, 8] [1, 1] : memref<4x8xf32, strided<[16, 1], offset: 8>> to memref<2x8xf32, strided<[16, 1], offset: 40>>
// CHECK: memref.copy %{{.*}} : memref<2x8xf32> to memref<2x8xf32, strided<[16, 1], offset: 8>>
// CHECK: memref.copy %{{.*}} : memref<2x8xf32> to memref<2x8xf32, strided<[16, 1], offset: 40>>
// CHECK-NOT: memref.copy
func.func @part_view(%x: memref<2x8xf32>, %out: memref<4x16xf32>) {
  %a = memref.alloc() : memref<4x8xf32>
  %low = memref.subview %a[0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  %high = memref.subview %a[2, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  memref.copy %x, %low : memref<2x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  memref.copy %x, %high : memref<2x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  %right = memref.subview %out[0, 8] [4, 8] [1, 1] : memref<4x16xf32> to memref<4x8xf32, strided<[16, 1], offset: 8>>
  memref.copy %a, %right : memref<4x8xf32> to memref<4x8xf32, strided<[16, 1], offset: 8>>
  memref.dealloc %a : memref<4x8xf32>
  return
}

// dg-elide-copies keeps a copy whose source is read after it (@read_later), whose
// destination another op writes in between where the part lies (@overwritten; a
// disjoint write in between does not matter, @disjoint), whose source a matmul
// writes (its library call needs a contiguous buffer, @matmul), and one whose
// destination no strides of the source's shape can describe (@unviewable).
// RUN: fusegrad-opt %s -p 'dg-elide-copies' | filecheck %s

// CHECK-LABEL: func.func @read_later(
// CHECK: memref.copy
func.func @read_later(%x: memref<8xf32>, %out: memref<16xf32>, %y: memref<8xf32>) {
  %a = memref.alloc() : memref<8xf32>
  memref.copy %x, %a : memref<8xf32> to memref<8xf32>
  %half = memref.subview %out[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  memref.copy %a, %half : memref<8xf32> to memref<8xf32, strided<[1]>>
  memref.copy %a, %y : memref<8xf32> to memref<8xf32>
  return
}

// CHECK-LABEL: func.func @overwritten(
// CHECK: memref.copy %[[A:.*]], %{{.*}} : memref<8xf32> to memref<8xf32, strided<[1], offset: 4>>
func.func @overwritten(%x: memref<8xf32>, %z: memref<8xf32>, %out: memref<16xf32>) {
  %a = memref.alloc() : memref<8xf32>
  memref.copy %x, %a : memref<8xf32> to memref<8xf32>
  %first = memref.subview %out[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  memref.copy %z, %first : memref<8xf32> to memref<8xf32, strided<[1]>>
  %mid = memref.subview %out[4] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1], offset: 4>>
  memref.copy %a, %mid : memref<8xf32> to memref<8xf32, strided<[1], offset: 4>>
  return
}

// CHECK-LABEL: func.func @disjoint(
// CHECK: memref.reinterpret_cast %{{.*}} to offset: [8], sizes: [8], strides: [1]
// CHECK-COUNT-2: memref.copy
// CHECK-NOT: memref.copy
func.func @disjoint(%x: memref<8xf32>, %z: memref<8xf32>, %out: memref<16xf32>) {
  %a = memref.alloc() : memref<8xf32>
  memref.copy %x, %a : memref<8xf32> to memref<8xf32>
  %first = memref.subview %out[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  memref.copy %z, %first : memref<8xf32> to memref<8xf32, strided<[1]>>
  %second = memref.subview %out[8] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1], offset: 8>>
  memref.copy %a, %second : memref<8xf32> to memref<8xf32, strided<[1], offset: 8>>
  return
}

// CHECK-LABEL: func.func @matmul(
// CHECK: linalg.matmul
// CHECK: memref.copy
func.func @matmul(%x: memref<4x4xf32>, %out: memref<4x8xf32>) {
  %a = memref.alloc() : memref<4x4xf32>
  linalg.matmul ins(%x, %x : memref<4x4xf32>, memref<4x4xf32>) outs(%a : memref<4x4xf32>)
  %left = memref.subview %out[0, 0] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  memref.copy %a, %left : memref<4x4xf32> to memref<4x4xf32, strided<[8, 1]>>
  return
}

// a 4x4 block of an 8x8 buffer, copied from a 16-element buffer seen as 4x4
// CHECK-LABEL: func.func @unviewable(
// CHECK: memref.copy
func.func @unviewable(%x: memref<16xf32>, %out: memref<8x8xf32>) {
  %a = memref.alloc() : memref<16xf32>
  memref.copy %x, %a : memref<16xf32> to memref<16xf32>
  %e = memref.expand_shape %a [[0, 1]] output_shape [4, 4] : memref<16xf32> into memref<4x4xf32>
  %block = memref.subview %out[0, 0] [4, 4] [1, 1] : memref<8x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  memref.copy %e, %block : memref<4x4xf32> to memref<4x4xf32, strided<[8, 1]>>
  return
}

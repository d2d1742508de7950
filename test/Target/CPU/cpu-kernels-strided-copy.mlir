// dg-cpu-kernels: a strided linalg.copy (a concatenation or interleaving writing
// every other element, as a max-pool backward does) is a loop kernel like any
// other: outlined and vectorizable, not left to convert-linalg-to-loops inline.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

// CHECK-LABEL: func.func private @interleave_k0(
// CHECK:         scf.for
// CHECK-LABEL: func.func @interleave(
// CHECK-NOT:     linalg.copy
// CHECK:         call @interleave_k0(
// CHECK-NOT:     linalg.copy
// CHECK:         return
func.func @interleave(%a: memref<64x32xf32>, %out: memref<64x64xf32>) {
  %v = memref.expand_shape %out [[0], [1, 2]] output_shape [64, 32, 2] : memref<64x64xf32> into memref<64x32x2xf32>
  %even = memref.subview %v[0, 0, 0] [64, 32, 1] [1, 1, 1] : memref<64x32x2xf32> to memref<64x32xf32, strided<[64, 2]>>
  linalg.copy ins(%a : memref<64x32xf32>) outs(%even : memref<64x32xf32, strided<[64, 2]>>)
  return
}

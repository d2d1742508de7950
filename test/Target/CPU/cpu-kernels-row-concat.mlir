// dg-cpu-kernels: the parts of a concatenation along dim 1 are copied by one row
// kernel (a subview slicing only dims after dim 0 keeps buffer rows), so each output
// row is written whole, once; rows sliced (dim 0 offsets) stay kernels of their own.
// RUN: fusegrad-opt %s -p 'dg-strided-copy-to-linalg,dg-cpu-kernels' | filecheck %s

// CHECK-LABEL: func.func private @concat_k0(
// CHECK:         scf.for
// CHECK:           scf.for {{.*}} to %c64
// CHECK:           scf.for {{.*}} to %c32
// CHECK-NOT: func.func private @concat_k1(
// CHECK-LABEL: func.func @concat(
func.func @concat(%a: memref<128x64xf32>, %b: memref<128x32xf32>, %out: memref<128x96xf32>) {
  %left = memref.subview %out[0, 0] [128, 64] [1, 1] : memref<128x96xf32> to memref<128x64xf32, strided<[96, 1]>>
  memref.copy %a, %left : memref<128x64xf32> to memref<128x64xf32, strided<[96, 1]>>
  %right = memref.subview %out[0, 64] [128, 32] [1, 1] : memref<128x96xf32> to memref<128x32xf32, strided<[96, 1], offset: 64>>
  memref.copy %b, %right : memref<128x32xf32> to memref<128x32xf32, strided<[96, 1], offset: 64>>
  return
}

// CHECK-LABEL: func.func private @stack_k{{[0-9]+}}(
// CHECK-LABEL: func.func private @stack_k{{[0-9]+}}(
// CHECK-LABEL: func.func @stack(
func.func @stack(%a: memref<64x96xf32>, %b: memref<64x96xf32>, %out: memref<128x96xf32>) {
  %top = memref.subview %out[0, 0] [64, 96] [1, 1] : memref<128x96xf32> to memref<64x96xf32, strided<[96, 1]>>
  memref.copy %a, %top : memref<64x96xf32> to memref<64x96xf32, strided<[96, 1]>>
  %bottom = memref.subview %out[64, 0] [64, 96] [1, 1] : memref<128x96xf32> to memref<64x96xf32, strided<[96, 1], offset: 6144>>
  memref.copy %b, %bottom : memref<64x96xf32> to memref<64x96xf32, strided<[96, 1], offset: 6144>>
  return
}

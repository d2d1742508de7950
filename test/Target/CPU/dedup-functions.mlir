// dg-dedup-functions: private functions whose bodies print alike (names and
// locations aside) are merged: calls of a copy call the first one, and a copy's
// `__parallel` launcher declaration goes with it (or, where the kept kernel has
// none, becomes the kept kernel's). Functions that differ in a constant, a type
// or an attribute stay apart, and so do public ones.
// RUN: fusegrad-opt %s -p 'dg-dedup-functions' | filecheck %s

// CHECK-LABEL: func.func private @f_k0(
// CHECK-NOT: func.func private @f_k1(
// CHECK-LABEL: func.func private @f_k2(
// CHECK-LABEL: func.func private @f_k0__parallel(
// CHECK-NOT: @f_k1__parallel
// CHECK-LABEL: func.func @f(
// CHECK: call @f_k0(
// CHECK: call @f_k0__parallel(
// CHECK: call @f_k2(
func.func private @f_k0(%lo: index, %hi: index, %x: memref<4xf32>) {
  %c = arith.constant 2.0 : f32
  %c0 = arith.constant 0 : index
  memref.store %c, %x[%c0] : memref<4xf32>
  return
}
func.func private @f_k1(%lo: index, %hi: index, %x: memref<4xf32>) {
  %c = arith.constant 2.0 : f32
  %c0 = arith.constant 0 : index
  memref.store %c, %x[%c0] : memref<4xf32>
  return
}
func.func private @f_k2(%lo: index, %hi: index, %x: memref<4xf32>) {
  %c = arith.constant 3.0 : f32
  %c0 = arith.constant 0 : index
  memref.store %c, %x[%c0] : memref<4xf32>
  return
}
func.func private @f_k1__parallel(index, memref<4xf32>)
func.func @f(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  call @f_k0(%c0, %c1, %x) : (index, index, memref<4xf32>) -> ()
  call @f_k1__parallel(%c1, %x) : (index, memref<4xf32>) -> ()
  call @f_k2(%c0, %c1, %x) : (index, index, memref<4xf32>) -> ()
  return
}

// A 2-D pointwise kernel whose column reads few bytes gives each thread several
// columns, a block's width (256) apart so that every load stays coalesced: one f32
// operand (4 bytes) takes 4 columns per thread (@round: the grid's x covers 1024 columns
// per block), as many as the rows have for the block (@short: 300 columns, 2). A whole
// tile runs in straight-line code, every column's load before any store (as far as the
// compiler knows, a store may alias a later load and would order it after); the row's
// last, partial tile column by column, each guarded. `exp(a+b)*c` reads 12 bytes per
// column and keeps one column per thread (gpu-pointwise.mlir).
// RUN: fusegrad-opt %s -p 'dg-fuse,dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s

// CHECK-LABEL: func.func @round(
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2, {{.*}} = %c64, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c256
// CHECK: scf.if
// CHECK: memref.load
// CHECK-NOT: memref.store
// CHECK: memref.load
// CHECK-NOT: memref.store
// CHECK: memref.load
// CHECK-NOT: memref.store
// CHECK: memref.load
// CHECK-NOT: memref.load
// CHECK: memref.store
// CHECK-NEXT: memref.store
// CHECK-NEXT: memref.store
// CHECK-NEXT: memref.store
// CHECK-NEXT: } else {
// CHECK-COUNT-4: arith.truncf
// CHECK-NOT: arith.truncf
// CHECK: return
func.func @round(%a: tensor<64x2000xf32>) -> tensor<64x2000xbf16> {
  %0 = "dg.convert"(%a) : (tensor<64x2000xf32>) -> tensor<64x2000xbf16>
  return %0 : tensor<64x2000xbf16>
}

// CHECK-LABEL: func.func @short(
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %c64, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c256
// CHECK-COUNT-2: math.exp
// CHECK: } else {
// CHECK-COUNT-2: math.exp
// CHECK-NOT: math.exp
// CHECK: return
func.func @short(%a: tensor<64x300xf32>) -> tensor<64x300xf32> {
  %0 = "dg.exp"(%a) : (tensor<64x300xf32>) -> tensor<64x300xf32>
  return %0 : tensor<64x300xf32>
}

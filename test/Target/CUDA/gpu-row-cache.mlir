// By default (`row-cache=32`) a row kernel that would keep at most 32 values per thread
// (a read-only operand's row elements per thread, summed over the operands) keeps them in
// registers: its loops are unrolled, the sum and the normalisation reuse
// the values the max loaded (the row is read once), the last step of a row that is not
// a multiple of the block reads a clamped index and guards its stores. A longer row is
// read in loops, once per pass, as without the option, and so is a row whose operands
// together exceed the budget (@scaled_softmax_*: x, a scale and a shift, each 8 per
// thread at 8192 wide (24 values, kept), 16 at 16384 (48, not kept)).
// RUN: fusegrad-opt %s -p 'dg-fuse,dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse --ptx sm_90 | filecheck %s --check-prefix=PTX

// CHECK-LABEL: func.func @softmax(%arg0: memref<64x1000xf32>, %arg1: memref<64x1000xf32>)
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c64{{[_0-9]*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c128{{[_0-9]*}},
// CHECK-NOT: scf.for
// CHECK-COUNT-7: memref.load %arg0
// CHECK: %[[OK:.*]] = arith.cmpi ult, %{{.*}}, %c1000
// CHECK: %[[I:.*]] = arith.minui %{{.*}}, %c999
// CHECK: memref.load %arg0[%{{.*}}, %[[I]]]
// CHECK-NOT: memref.load
// CHECK: gpu.all_reduce maximumf {{.*}} uniform
// CHECK-NOT: memref.load
// CHECK: math.exp
// CHECK-NOT: memref.load
// CHECK: gpu.all_reduce add {{.*}} uniform
// CHECK-NOT: memref.load
// CHECK: arith.divf
// CHECK: scf.if
// CHECK-NEXT: memref.store {{.*}}, %arg1
// CHECK: gpu.terminator
// CHECK-LABEL: func.func @softmax_long
// CHECK: gpu.launch
// CHECK: scf.for
// CHECK: gpu.all_reduce maximumf
// CHECK: scf.for
// CHECK: memref.load %arg0
// CHECK: gpu.all_reduce add
// CHECK: scf.for
// CHECK: memref.load %arg0
// CHECK-NOT: gpu.launch
// CHECK-LABEL: func.func @scaled_softmax_8192
// CHECK: gpu.launch
// CHECK-NOT: scf.for
// CHECK: gpu.terminator
// CHECK-LABEL: func.func @scaled_softmax_16384
// CHECK: gpu.launch
// CHECK: scf.for

// PTX: .visible .entry softmax_kernel(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-8: ld.global.b32
// PTX-NOT: ld.global
// PTX: ret;

func.func @softmax(%x: tensor<64x1000xf32>) -> tensor<64x1000xf32> {
  %max = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<64x1000xf32>) -> tensor<64xf32>
  %max_b = "dg.broadcast_in_dim"(%max) {dims = array<i64: 0>} : (tensor<64xf32>) -> tensor<64x1000xf32>
  %shifted = "dg.sub"(%x, %max_b) : (tensor<64x1000xf32>, tensor<64x1000xf32>) -> tensor<64x1000xf32>
  %e = "dg.exp"(%shifted) : (tensor<64x1000xf32>) -> tensor<64x1000xf32>
  %sum = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<64x1000xf32>) -> tensor<64xf32>
  %sum_b = "dg.broadcast_in_dim"(%sum) {dims = array<i64: 0>} : (tensor<64xf32>) -> tensor<64x1000xf32>
  %y = "dg.div"(%e, %sum_b) : (tensor<64x1000xf32>, tensor<64x1000xf32>) -> tensor<64x1000xf32>
  return %y : tensor<64x1000xf32>
}
func.func @softmax_long(%x: tensor<2x65536xf32>) -> tensor<2x65536xf32> {
  %max = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<2x65536xf32>) -> tensor<2xf32>
  %max_b = "dg.broadcast_in_dim"(%max) {dims = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x65536xf32>
  %shifted = "dg.sub"(%x, %max_b) : (tensor<2x65536xf32>, tensor<2x65536xf32>) -> tensor<2x65536xf32>
  %e = "dg.exp"(%shifted) : (tensor<2x65536xf32>) -> tensor<2x65536xf32>
  %sum = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<2x65536xf32>) -> tensor<2xf32>
  %sum_b = "dg.broadcast_in_dim"(%sum) {dims = array<i64: 0>} : (tensor<2xf32>) -> tensor<2x65536xf32>
  %y = "dg.div"(%e, %sum_b) : (tensor<2x65536xf32>, tensor<2x65536xf32>) -> tensor<2x65536xf32>
  return %y : tensor<2x65536xf32>
}
func.func @scaled_softmax_8192(%x: tensor<64x8192xf32>, %w: tensor<8192xf32>, %b: tensor<8192xf32>) -> tensor<64x8192xf32> {
  %max = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<64x8192xf32>) -> tensor<64xf32>
  %max_b = "dg.broadcast_in_dim"(%max) {dims = array<i64: 0>} : (tensor<64xf32>) -> tensor<64x8192xf32>
  %shifted = "dg.sub"(%x, %max_b) : (tensor<64x8192xf32>, tensor<64x8192xf32>) -> tensor<64x8192xf32>
  %e = "dg.exp"(%shifted) : (tensor<64x8192xf32>) -> tensor<64x8192xf32>
  %sum = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<64x8192xf32>) -> tensor<64xf32>
  %sum_b = "dg.broadcast_in_dim"(%sum) {dims = array<i64: 0>} : (tensor<64xf32>) -> tensor<64x8192xf32>
  %y = "dg.div"(%e, %sum_b) : (tensor<64x8192xf32>, tensor<64x8192xf32>) -> tensor<64x8192xf32>
  %w_b = "dg.broadcast_in_dim"(%w) {dims = array<i64: 1>} : (tensor<8192xf32>) -> tensor<64x8192xf32>
  %b_b = "dg.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<8192xf32>) -> tensor<64x8192xf32>
  %z = "dg.mul"(%y, %w_b) : (tensor<64x8192xf32>, tensor<64x8192xf32>) -> tensor<64x8192xf32>
  %out = "dg.add"(%z, %b_b) : (tensor<64x8192xf32>, tensor<64x8192xf32>) -> tensor<64x8192xf32>
  return %out : tensor<64x8192xf32>
}
func.func @scaled_softmax_16384(%x: tensor<64x16384xf32>, %w: tensor<16384xf32>, %b: tensor<16384xf32>) -> tensor<64x16384xf32> {
  %max = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<64x16384xf32>) -> tensor<64xf32>
  %max_b = "dg.broadcast_in_dim"(%max) {dims = array<i64: 0>} : (tensor<64xf32>) -> tensor<64x16384xf32>
  %shifted = "dg.sub"(%x, %max_b) : (tensor<64x16384xf32>, tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %e = "dg.exp"(%shifted) : (tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %sum = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<64x16384xf32>) -> tensor<64xf32>
  %sum_b = "dg.broadcast_in_dim"(%sum) {dims = array<i64: 0>} : (tensor<64xf32>) -> tensor<64x16384xf32>
  %y = "dg.div"(%e, %sum_b) : (tensor<64x16384xf32>, tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %w_b = "dg.broadcast_in_dim"(%w) {dims = array<i64: 1>} : (tensor<16384xf32>) -> tensor<64x16384xf32>
  %b_b = "dg.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<16384xf32>) -> tensor<64x16384xf32>
  %z = "dg.mul"(%y, %w_b) : (tensor<64x16384xf32>, tensor<64x16384xf32>) -> tensor<64x16384xf32>
  %out = "dg.add"(%z, %b_b) : (tensor<64x16384xf32>, tensor<64x16384xf32>) -> tensor<64x16384xf32>
  return %out : tensor<64x16384xf32>
}

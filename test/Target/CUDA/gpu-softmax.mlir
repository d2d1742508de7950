// Softmax is ONE kernel, one block per row: a thread-strided max, gpu.all_reduce,
// a thread-strided sum of exp, gpu.all_reduce, then the normalisation (one
// reciprocal of the row sum, a multiplication per element). The row
// max and sum stay in registers (no temporaries are allocated). After NVVM the
// all_reduces are warp shuffles plus a 32-slot shared array and barriers.
// (This is the loop form, `row-cache=0`; gpu-row-cache.mlir has the default, which keeps
// the row in registers.)
// RUN: fusegrad-opt %s -p 'dg-fuse,dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels{row-cache=0}' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse --row-cache 0 --ptx sm_80 | filecheck %s

// IR-LABEL: func.func @softmax(%arg0: memref<64x1024xf32>, %arg1: memref<64x1024xf32>)
// IR-NOT: memref.alloc
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c64{{[_0-9]*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c128{{[_0-9]*}},
// IR: scf.for
// IR: arith.maximumf {{.*}} fastmath<reassoc>
// IR: gpu.all_reduce maximumf {{.*}} uniform
// IR: scf.for
// IR: math.exp
// IR: gpu.all_reduce add {{.*}} uniform
// IR: scf.for
// IR: arith.divf
// IR: arith.mulf
// IR: memref.store {{.*}}, %arg1
// IR: gpu.terminator
// IR-NOT: gpu.launch

// CHECK: func @softmax (64x1024 f32) -> (64x1024 f32)
// CHECK-NEXT: launch softmax_kernel::softmax_kernel grid=[64, 1, 1] block=[128, 1, 1] smem=0 (arg0, arg1)
// CHECK-NEXT: module softmax_kernel
// CHECK: .target sm_80
// CHECK: .visible .entry softmax_kernel(
// CHECK: .maxntid 128, 1, 1
// CHECK: .shared .align 4 .b8
// CHECK: max.NaN.f32
// CHECK: shfl.sync.bfly.b32
// CHECK: bar.sync 0;
// CHECK: ex2.approx
// CHECK: shfl.sync.bfly.b32
// CHECK: rcp.rn.f32
// CHECK: mul.rn.f32
func.func @softmax(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %max = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<64x1024xf32>) -> tensor<64xf32>
  %max_b = "dg.broadcast_in_dim"(%max) {dims = array<i64: 0>} : (tensor<64xf32>) -> tensor<64x1024xf32>
  %shifted = "dg.sub"(%x, %max_b) : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %e = "dg.exp"(%shifted) : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %sum = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<64x1024xf32>) -> tensor<64xf32>
  %sum_b = "dg.broadcast_in_dim"(%sum) {dims = array<i64: 0>} : (tensor<64xf32>) -> tensor<64x1024xf32>
  %y = "dg.div"(%e, %sum_b) : (tensor<64x1024xf32>, tensor<64x1024xf32>) -> tensor<64x1024xf32>
  return %y : tensor<64x1024xf32>
}

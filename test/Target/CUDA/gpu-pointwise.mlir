// A fused pointwise chain becomes one kernel, one thread per element: the
// contiguous dim on threadIdx.x + blockIdx.x * 256, rows on blockIdx.y; the
// PTX (bare-pointer ABI: one .u64 per buffer) carries the launch bound.
// RUN: fusegrad-opt %s -p 'dg-fuse,dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse --ptx sm_90 | filecheck %s

// IR-LABEL: func.func @ew(%arg0: memref<256x1000xf32>, %arg1: memref<256x1000xf32>, %arg2: memref<256x1000xf32>, %arg3: memref<256x1000xf32>)
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c4, {{.*}} = %c256, {{.*}} = %c1{{.*}}) threads({{.*}}) in ({{.*}} = %c256
// IR: scf.if
// IR: math.exp
// IR: memref.store {{.*}}, %arg3
// IR-NOT: gpu.launch
// IR: return

// CHECK: func @ew (256x1000 f32, 256x1000 f32, 256x1000 f32) -> (256x1000 f32)
// CHECK-NEXT: launch ew_kernel::ew_kernel grid=[4, 256, 1] block=[256, 1, 1] smem=0 (arg0, arg1, arg2, arg3)
// CHECK-NEXT: module ew_kernel kernels=ew_kernel images=sm_80:ptx, sm_90:ptx
// CHECK: .target sm_90
// CHECK: .visible .entry ew_kernel(
// CHECK-NEXT: .param .u64 .ptr .align 1 ew_kernel_param_0,
// CHECK-NEXT: .param .u64 .ptr .align 1 ew_kernel_param_1,
// CHECK-NEXT: .param .u64 .ptr .align 1 ew_kernel_param_2,
// CHECK-NEXT: .param .u64 .ptr .align 1 ew_kernel_param_3
// CHECK-NEXT: )
// CHECK-NEXT: .maxntid 256, 1, 1
// CHECK: ex2.approx
// CHECK-NOT: bar.sync
// CHECK: ret;
func.func @ew(%a: tensor<256x1000xf32>, %b: tensor<256x1000xf32>, %c: tensor<256x1000xf32>) -> tensor<256x1000xf32> {
  %0 = "dg.add"(%a, %b) : (tensor<256x1000xf32>, tensor<256x1000xf32>) -> tensor<256x1000xf32>
  %1 = "dg.exp"(%0) : (tensor<256x1000xf32>) -> tensor<256x1000xf32>
  %2 = "dg.mul"(%1, %c) : (tensor<256x1000xf32>, tensor<256x1000xf32>) -> tensor<256x1000xf32>
  return %2 : tensor<256x1000xf32>
}

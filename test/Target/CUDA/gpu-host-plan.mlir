// Contractions stay on the host as library steps (cuBLAS through PyTorch):
// the zero fill feeding the matmul is dropped and the call overwrites its
// output; the bias + tanh epilogue is a kernel. Transposes are kernels.
// RUN: fusegrad-opt %s -p 'dg-fuse,dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse | filecheck %s

// IR-LABEL: func.func @mlp
// IR-NOT: linalg.fill
// IR: linalg.matmul {dg.gpu.overwrite} ins(%arg0, %arg1 : {{.*}}) outs(%arg3 : memref<64x256xf32>)
// IR: gpu.launch
// IR: math.tanh

// CHECK: func @mlp (64x128 f32, 128x256 f32, 256 f32) -> (64x256 f32)
// CHECK-NEXT: matmul a="arg0" b="arg1" c="arg3" overwrite=true
// CHECK-NEXT: launch mlp_kernel::mlp_kernel grid=[1, 64, 1] block=[256, 1, 1] smem=0 (arg3, arg2)
// CHECK: func @tr (3x5x7 f32) -> (7x3x5 f32)
// CHECK-NEXT: launch tr_kernel::tr_kernel grid=[1, 1, 1] block=[128, 1, 1] smem=0 (arg0, arg1)
func.func @mlp(%x: tensor<64x128xf32>, %w: tensor<128x256xf32>, %b: tensor<256xf32>) -> tensor<64x256xf32> {
  %0 = "dg.matmul"(%x, %w) : (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>
  %1 = "dg.broadcast_in_dim"(%b) {dims = array<i64: 1>} : (tensor<256xf32>) -> tensor<64x256xf32>
  %2 = "dg.add"(%0, %1) : (tensor<64x256xf32>, tensor<64x256xf32>) -> tensor<64x256xf32>
  %3 = "dg.tanh"(%2) : (tensor<64x256xf32>) -> tensor<64x256xf32>
  return %3 : tensor<64x256xf32>
}
func.func @tr(%x: tensor<3x5x7xf32>) -> tensor<7x3x5xf32> {
  %0 = "dg.transpose"(%x) {perm = array<i64: 2, 0, 1>} : (tensor<3x5x7xf32>) -> tensor<7x3x5xf32>
  return %0 : tensor<7x3x5xf32>
}

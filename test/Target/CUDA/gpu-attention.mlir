// dg.attention on the CUDA target: no library kernel, so it lowers by its decomposition
// (matmuls, as cuBLAS plan steps, and the softmax's kernels), forward and backward. The
// ops reach this target only from graphs captured on the CPU (a CUDA capture asks
// PyTorch for the math form). Lowered as they are, the softmax is unfused (first RUN);
// the CUDA compile decomposes them before dg-fuse (Program._optimize, second RUN): the
// forward is then 6 launches and 2 matmuls instead of 28 launches.
// RUN: %python -m fusegrad.codegen.cuda.compile %s --ptx sm_80 | filecheck %s
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p 'dg-decompose-attention,dg-fuse{row-temps=0}' | filecheck %s --check-prefix=FUSED

// FUSED-LABEL: func @forward
// FUSED: matmul a=
// FUSED: matmul a=
// FUSED-NOT: forward_kernel_5
// FUSED: func @backward

// CHECK-LABEL: func @forward (1x2x4x8 f32, 1x2x6x8 f32, 1x2x6x8 f32, 1x1x4x6 f32) -> (1x2x4x8 f32, 1x2x4 f32)
// CHECK-COUNT-2: matmul a=
// CHECK-LABEL: func @backward
// CHECK-COUNT-5: matmul a=
// CHECK: .entry forward_kernel
func.func @forward(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %m: tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return %o#0, %o#1 : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
}

func.func @backward(%g: tensor<1x2x4x8xf32>, %q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %o: tensor<1x2x4x8xf32>, %l: tensor<1x2x4xf32>, %m: tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) {
  %d:3 = "dg.attention_grad"(%g, %q, %k, %v, %o, %l, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %d#0, %d#1, %d#2 : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>
}

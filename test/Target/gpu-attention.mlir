// dg.attention on the CUDA target: no library kernel, so it lowers by its decomposition
// (matmuls, as cuBLAS plan steps, and the softmax's kernels), forward and backward. The
// ops reach this target only from graphs captured on the CPU (a CUDA capture asks
// PyTorch for the math form), and only after fusion, so the softmax is unfused here.
// RUN: %python -m fusegrad.passes.gpu_launch_plan %s --ptx sm_80 | filecheck %s

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

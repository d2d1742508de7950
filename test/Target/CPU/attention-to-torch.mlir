// Attention on the CPU: dg-outline-attention (in dg-cpu-linalg) turns each f32/f64
// dg.attention / dg.attention_grad into a call of a private function holding just that
// op, tagged dg.attention_call; after bufferization, dg-attention-to-torch replaces that
// function's body (the decomposition into matmuls and a softmax) by one call of
// PyTorch's flash kernel, forward or backward.
// RUN: fusegrad-opt %s -p 'dg-outline-attention' | filecheck %s --check-prefix=OUTLINE
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize,dg-attention-to-torch' | filecheck %s

// OUTLINE-LABEL: func.func private @__dg_attention_0(%arg0: tensor<1x2x4x8xf32>, %arg1: tensor<1x2x6x8xf32>, %arg2: tensor<1x2x6x8xf32>, %arg3: tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) attributes {dg.attention_call = {causal = 1 : i64, op = "attention", scale = 2.500000e-01 : f64, unmasked = 0 : i64}}
// OUTLINE-NEXT: "dg.attention"(%arg0, %arg1, %arg2, %arg3)
// OUTLINE-LABEL: func.func @forward(
// OUTLINE-NEXT: call @__dg_attention_0(%arg0, %arg1, %arg2, %arg3)
// OUTLINE-LABEL: func.func private @__dg_attention_grad_0(
// OUTLINE-SAME: op = "attention_grad"
// OUTLINE-LABEL: func.func @backward(
// OUTLINE-NEXT: call @__dg_attention_grad_0(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6)

// The forward's body: pointers to q, k, v, mask, out, logsumexp (the last two the
// out-params), then b, h, l, s, e, the mask's dims, scale, causal, f32 (6).
// CHECK-LABEL: func.func private @__dg_attention_0(%arg0: memref<1x2x4x8xf32>, %arg1: memref<1x2x6x8xf32>, %arg2: memref<1x2x6x8xf32>, %arg3: memref<1x1x4x6xf32>, %arg4: memref<1x2x4x8xf32>, %arg5: memref<1x2x4xf32>)
// CHECK-NOT: linalg.
// CHECK: call @__fusegrad_attention(%{{.*}}, %c1_i64, %c2_i64, %c4_i64, %c6_i64, %c8_i64, %c1_i64{{.*}}, %c1_i64{{.*}}, %c4_i64{{.*}}, %c6_i64{{.*}}, %cst, %c1_i32, %c6_i32)
// CHECK-NEXT: return
// The backward's: grad, q, k, v, out, logsumexp, mask, then the three gradients.
// CHECK-LABEL: func.func private @__dg_attention_grad_0(
// CHECK-SAME: %arg9: memref<1x2x6x8xf32>)
// CHECK-NOT: linalg.
// CHECK: call @__fusegrad_attention_backward(
// CHECK-NEXT: return
// CHECK: llvm.func @aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(
// CHECK: llvm.func @aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu_backward(
func.func @forward(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %m: tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return %o#0, %o#1 : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
}

func.func @backward(%g: tensor<1x2x4x8xf32>, %q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %o: tensor<1x2x4x8xf32>, %l: tensor<1x2x4xf32>, %m: tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) {
  %d:3 = "dg.attention_grad"(%g, %q, %k, %v, %o, %l, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %d#0, %d#1, %d#2 : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>
}

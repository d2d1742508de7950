// Attention of run-time sizes on the CPU: dg-outline-attention outlines it in
// destination-passing style (bufferization makes no out-param for a result of run-time
// size): the caller passes a destination per result (dg.full 0 of the result's type),
// the function writes each result into its destination. After bufferization the
// function has the static case's signature (the inputs, then one buffer per result)
// and the results are computed into the entry's out-params; dg-attention-to-torch reads
// the sizes of run-time size from the buffers.
// RUN: fusegrad-opt %s -p 'dg-outline-attention' | filecheck %s --check-prefix=OUTLINE
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize,dg-attention-to-torch' | filecheck %s

// OUTLINE-LABEL: func.func private @__dg_attention_0(%arg0: tensor<2x4x?x16xf32, "s0">, %arg1: tensor<2x4x?x16xf32, "s0">, %arg2: tensor<2x4x?x16xf32, "s0">, %arg3: tensor<1x1x1x1xf32>, %arg4: tensor<2x4x?x16xf32, "s0"> {dg.destination}, %arg5: tensor<2x4x?xf32, "s0"> {dg.destination}) -> (tensor<2x4x?x16xf32, "s0">, tensor<2x4x?xf32, "s0">)
// OUTLINE-NEXT: %[[O:.*]]:2 = "dg.attention"(%arg0, %arg1, %arg2, %arg3)
// OUTLINE-NEXT: %[[A:.*]] = bufferization.materialize_in_destination %[[O]]#0 in %arg4
// OUTLINE-NEXT: %[[B:.*]] = bufferization.materialize_in_destination %[[O]]#1 in %arg5
// OUTLINE-NEXT: return %[[A]], %[[B]]
// OUTLINE-LABEL: func.func @forward(
// OUTLINE: %[[D0:.*]] = "dg.full"() {value = 0.000000e+00 : f64} : () -> tensor<2x4x?x16xf32, "s0">
// OUTLINE-NEXT: %[[D1:.*]] = "dg.full"() {value = 0.000000e+00 : f64} : () -> tensor<2x4x?xf32, "s0">
// OUTLINE-NEXT: call @__dg_attention_0(%arg0, %arg1, %arg2, %{{.*}}, %[[D0]], %[[D1]])

// CHECK-LABEL: func.func private @__dg_attention_0(%arg0: memref<2x4x?x16xf32>, %arg1: memref<2x4x?x16xf32>, %arg2: memref<2x4x?x16xf32>, %arg3: memref<1x1x1x1xf32>, %arg4: memref<2x4x?x16xf32> {dg.destination}, %arg5: memref<2x4x?xf32> {dg.destination})
// CHECK-NOT: linalg.
// CHECK: %[[L:.*]] = memref.dim %arg0, %c2
// CHECK-NEXT: %[[L64:.*]] = arith.index_cast %[[L]] : index to i64
// CHECK: %[[S:.*]] = memref.dim %arg1, %c2
// CHECK-NEXT: %[[S64:.*]] = arith.index_cast %[[S]] : index to i64
// CHECK: call @__fusegrad_attention(%{{.*}}, %c2_i64, %c4_i64, %[[L64]], %[[S64]], %c16_i64, %c1_i64{{.*}}, %c1_i64{{.*}}, %c1_i64{{.*}}, %c1_i64{{.*}}, %cst, %c1_i32, %c6_i32)
// CHECK-NEXT: return
// The results are computed in the entry's out-params: no fill (dg-unfilled-destinations),
// no copy.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %arg3: memref<2x4x?x16xf32>, %arg4: memref<2x4x?xf32>)
// CHECK-NOT: outs(%arg3
// CHECK-NOT: outs(%arg4
// CHECK: call @__dg_attention_0(%arg0, %arg1, %arg2, %{{.*}}, %arg3, %arg4)
// CHECK-NOT: memref.copy
// CHECK: return
func.func @forward(%q: tensor<2x4x?x16xf32, "s0">, %k: tensor<2x4x?x16xf32, "s0">, %v: tensor<2x4x?x16xf32, "s0">) -> (tensor<2x4x?x16xf32, "s0">, tensor<2x4x?xf32, "s0">) {
  %m = "dg.full"() {value = 0.0 : f64} : () -> tensor<1x1x1x1xf32>
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<2x4x?x16xf32, "s0">, tensor<2x4x?x16xf32, "s0">, tensor<2x4x?x16xf32, "s0">, tensor<1x1x1x1xf32>) -> (tensor<2x4x?x16xf32, "s0">, tensor<2x4x?xf32, "s0">)
  return %o#0, %o#1 : tensor<2x4x?x16xf32, "s0">, tensor<2x4x?xf32, "s0">
}

// dg.attention on the CUDA target is a library step: PyTorch's fused SDPA kernel (the
// one eager picks, runtime/sdpa.py) on the caller's stream, forward and backward, for
// f32, bf16 and f16 (whose log-sum-exp is f32, as the kernels keep it). No [B, H, L, S]
// scores are materialized: no matmul step, no softmax kernel, and the outlined
// functions' decompositions become no kernel (dg-gpu-library-stubs). A mask that is a
// constant 0 (the importer's stand-in for none) is passed as none (flash attention takes
// no mask). At run-time sizes the call writes into destinations of the caller's sizes,
// which no kernel fills first. f64 (eager runs the math form) is
// decomposed before dg-fuse, as Program runs dg-optimize-cuda (second RUN).
// RUN: %python -m fusegrad.codegen.cuda.compile %s | filecheck %s
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p 'dg-decompose-attention{keep-library=1},dg-fuse{row-temps=0}' | filecheck %s --check-prefix=OPT

// CHECK-LABEL: func @forward (1x2x4x8 f32, 1x2x6x8 f32, 1x2x6x8 f32, 1x1x4x6 f32) -> (1x2x4x8 f32, 1x2x4 f32)
// CHECK-NEXT: attention q="arg0" k="arg1" v="arg2" mask="arg3" out="arg4" lse="arg5" scale=0.25 causal=true
// CHECK-LABEL: func @backward (1x2x4x8 f32, 1x2x4x8 f32, 1x2x6x8 f32, 1x2x6x8 f32, 1x2x4x8 f32, 1x2x4 f32, 1x1x4x6 f32) -> (1x2x4x8 f32, 1x2x6x8 f32, 1x2x6x8 f32)
// CHECK-NEXT: attention_grad grad="arg0" q="arg1" k="arg2" v="arg3" out="arg4" lse="arg5" mask="arg6" grad_q="arg7" grad_k="arg8" grad_v="arg9" scale=0.25 causal=true
// CHECK-LABEL: func @forward_bf16 (1x2x4x8 bf16, 1x2x6x8 bf16, 1x2x6x8 bf16) -> (1x2x4x8 bf16, 1x2x4 f32)
// CHECK-NOT: matmul
// CHECK: attention q="arg0" k="arg1" v="arg2" mask=null out="arg3" lse="arg4" scale=0.35355339059327373 causal=true
// CHECK-LABEL: func @backward_bf16 (1x2x4x8 bf16, 1x2x4x8 bf16, 1x2x6x8 bf16, 1x2x6x8 bf16, 1x2x4x8 bf16, 1x2x4 f32) -> (1x2x4x8 bf16, 1x2x6x8 bf16, 1x2x6x8 bf16)
// CHECK-NOT: matmul
// CHECK: attention_grad grad="arg0" q="arg1" k="arg2" v="arg3" out="arg4" lse="arg5" mask=null grad_q="arg6" grad_k="arg7" grad_v="arg8" scale=0.35355339059327373 causal=true
// CHECK-LABEL: func @forward_f16 (1x2x4x8 f16, 1x2x6x8 f16, 1x2x6x8 f16, 1x2x4x6 f16) -> (1x2x4x8 f16, 1x2x4 f32)
// CHECK-NEXT: attention q="arg0" k="arg1" v="arg2" mask="arg3" out="arg4" lse="arg5" scale=0.25 causal=false
// CHECK-LABEL: func @forward_f64
// CHECK-NOT: attention
// CHECK-COUNT-2: matmul a=
// CHECK-LABEL: func @forward_run_time_sizes
// CHECK-NOT: matmul
// CHECK: attention q="arg0" k="arg1" v="arg2" mask=null out="arg3"
// CHECK-NOT: matmul
// CHECK-NOT: module __dg_attention

// OPT-LABEL: func @forward (
// OPT-NEXT: attention q="arg0"
// OPT-LABEL: func @backward (
// OPT-NEXT: attention_grad grad="arg0"
// OPT-LABEL: func @forward_bf16 (
// OPT-NOT: matmul
// OPT: attention q="arg0"
// OPT-LABEL: func @backward_bf16 (
// OPT-NOT: matmul
// OPT: attention_grad grad="arg0"
// OPT-LABEL: func @forward_f16 (
// OPT-NEXT: attention q="arg0"
// OPT-LABEL: func @forward_f64
// OPT-NOT: attention
// OPT-COUNT-2: matmul a=
// OPT-LABEL: func @forward_run_time_sizes (s0x2xs1x8 f32, s0x2xs2x8 f32, s0x2xs2x8 f32) -> (s0x2xs1x8 f32)
// OPT-NOT: matmul
// OPT: alloc buf="[[LSE:t[0-9]+]]" shape=["s0",2,"s1"] dtype="f32"
// OPT-NEXT: attention q="arg0" k="arg1" v="arg2" mask=null out="arg3" lse="[[LSE]]" scale=0.25 causal=true
// OPT-NOT: matmul
// OPT-NOT: module __dg_attention
func.func @forward(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %m: tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return %o#0, %o#1 : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
}

func.func @backward(%g: tensor<1x2x4x8xf32>, %q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %o: tensor<1x2x4x8xf32>, %l: tensor<1x2x4xf32>, %m: tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) {
  %d:3 = "dg.attention_grad"(%g, %q, %k, %v, %o, %l, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %d#0, %d#1, %d#2 : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>
}

func.func @forward_bf16(%q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x6x8xbf16>, %v: tensor<1x2x6x8xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>) {
  %m = "dg.full"() {value = 0.0 : f64} : () -> tensor<1x1x1x1xbf16>
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x1x1x1xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>)
  return %o#0, %o#1 : tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>
}

func.func @backward_bf16(%g: tensor<1x2x4x8xbf16>, %q: tensor<1x2x4x8xbf16>, %k: tensor<1x2x6x8xbf16>, %v: tensor<1x2x6x8xbf16>, %o: tensor<1x2x4x8xbf16>, %l: tensor<1x2x4xf32>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>) {
  %m = "dg.full"() {value = 0.0 : f64} : () -> tensor<1x1x1x1xbf16>
  %d:3 = "dg.attention_grad"(%g, %q, %k, %v, %o, %l, %m) {causal = 1 : i64, scale = 0.35355339059327373 : f64} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>, tensor<1x1x1x1xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>)
  return %d#0, %d#1, %d#2 : tensor<1x2x4x8xbf16>, tensor<1x2x6x8xbf16>, tensor<1x2x6x8xbf16>
}

func.func @forward_f16(%q: tensor<1x2x4x8xf16>, %k: tensor<1x2x6x8xf16>, %v: tensor<1x2x6x8xf16>, %m: tensor<1x2x4x6xf16>) -> (tensor<1x2x4x8xf16>, tensor<1x2x4xf32>) {
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 0 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf16>, tensor<1x2x6x8xf16>, tensor<1x2x6x8xf16>, tensor<1x2x4x6xf16>) -> (tensor<1x2x4x8xf16>, tensor<1x2x4xf32>)
  return %o#0, %o#1 : tensor<1x2x4x8xf16>, tensor<1x2x4xf32>
}

func.func @forward_f64(%q: tensor<1x2x4x8xf64>, %k: tensor<1x2x6x8xf64>, %v: tensor<1x2x6x8xf64>, %m: tensor<1x1x4x6xf64>) -> tensor<1x2x4x8xf64> {
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf64>, tensor<1x2x6x8xf64>, tensor<1x2x6x8xf64>, tensor<1x1x4x6xf64>) -> (tensor<1x2x4x8xf64>, tensor<1x2x4xf64>)
  return %o#0 : tensor<1x2x4x8xf64>
}

func.func @forward_run_time_sizes(%q: tensor<?x2x?x8xf32, "s0, s1">, %k: tensor<?x2x?x8xf32, "s0, s2">, %v: tensor<?x2x?x8xf32, "s0, s2">) -> tensor<?x2x?x8xf32, "s0, s1"> {
  %m = "dg.full"() {value = 0.0 : f64} : () -> tensor<1x1x1x1xf32>
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 1 : i64, scale = 0.25 : f64} : (tensor<?x2x?x8xf32, "s0, s1">, tensor<?x2x?x8xf32, "s0, s2">, tensor<?x2x?x8xf32, "s0, s2">, tensor<1x1x1x1xf32>) -> (tensor<?x2x?x8xf32, "s0, s1">, tensor<?x2x?xf32, "s0, s1">)
  return %o#0 : tensor<?x2x?x8xf32, "s0, s1">
}

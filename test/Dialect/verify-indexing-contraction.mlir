// Indexing and contraction ops: every shape/dtype rule rejects bad IR with a located error.
// RUN: fusegrad-opt %s --split-input-file --verify-diagnostics

func.func @gather_index_dtype(%x: tensor<2x3xf32>, %i: tensor<2x2xf32>) {
  // expected-error @+1 {{'dg.gather' op indices must be i32 or i64, got f32}}
  %0 = "dg.gather"(%x, %i) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @gather_dim(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>) {
  // expected-error @+1 {{'dg.gather' op dim 3 out of range for rank 2}}
  %0 = "dg.gather"(%x, %i) {dim = 3 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
  return
}

// -----

func.func @gather_rank(%x: tensor<2x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{'dg.gather' op indices rank 1 differs from operand rank 2}}
  %0 = "dg.gather"(%x, %i) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @gather_size(%x: tensor<2x3xf32>, %i: tensor<4x2xi64>) {
  // expected-error @+1 {{'dg.gather' op indices dim 0 of size 4 exceeds operand size 2}}
  %0 = "dg.gather"(%x, %i) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
  return
}

// -----

func.func @index_select_dtype(%x: tensor<2x3xf32>, %i: tensor<4xi8>) {
  // expected-error @+1 {{'dg.index_select' op indices must be i32 or i64, got i8}}
  %0 = "dg.index_select"(%x, %i) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<4xi8>) -> tensor<2x4xf32>
  return
}

// -----

func.func @index_select_dim(%x: tensor<2x3xf32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{'dg.index_select' op dim 2 out of range for rank 2}}
  %0 = "dg.index_select"(%x, %i) {dim = 2 : i64} : (tensor<2x3xf32>, tensor<4xi32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @scatter_index_dtype(%x: tensor<2x3xf32>, %i: tensor<2x2xi1>, %s: tensor<2x2xf32>) {
  // expected-error @+1 {{'dg.scatter_add' op indices must be i32 or i64, got i1}}
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi1>, tensor<2x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @scatter_dim(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>, %s: tensor<2x2xf32>) {
  // expected-error @+1 {{'dg.scatter_add' op dim 7 out of range for rank 2}}
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 7 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @scatter_src_dtype(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>, %s: tensor<2x2xf64>) {
  // expected-error @+1 {{'dg.scatter_add' op src dtype f64 differs from operand f32}}
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @scatter_src_shape(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>, %s: tensor<2x1xf32>) {
  // expected-error @+1 {{'dg.scatter_add' op indices shape [2, 2] differs from src shape [2, 1]}}
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x1xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @scatter_rank(%x: tensor<2x3xf32>, %i: tensor<2xi64>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'dg.scatter_add' op indices rank 1 differs from operand rank 2}}
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2xi64>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @scatter_size(%x: tensor<2x3xf32>, %i: tensor<3x2xi64>, %s: tensor<3x2xf32>) {
  // expected-error @+1 {{'dg.scatter_add' op indices dim 0 of size 3 exceeds operand size 2}}
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 1 : i64} : (tensor<2x3xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @matmul_dtype(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) {
  // expected-error @+1 {{'dg.matmul' op operand dtypes differ (f32 vs f16)}}
  %0 = "dg.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{'dg.matmul' op operands need equal rank >= 2, got 1 and 2}}
  %0 = "dg.matmul"(%a, %b) : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<5x3x4xf32>) {
  // expected-error @+1 {{'dg.matmul' op batch dims [2] and [5] differ; broadcast explicitly}}
  %0 = "dg.matmul"(%a, %b) : (tensor<2x2x3xf32>, tensor<5x3x4xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

func.func @matmul_k(%a: tensor<2x3xf32>, %b: tensor<5x4xf32>) {
  // expected-error @+1 {{'dg.matmul' op contracting dims differ: lhs K=3, rhs K=5}}
  %0 = "dg.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<5x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @conv_dtype(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf64>) {
  // expected-error @+1 {{'dg.conv2d' op operand dtypes differ (f32 vs f64)}}
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf64>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<2x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d' op input and weight must be rank 4, got 3 and 4}}
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @conv_entries(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d' op stride, padding and dilation need 2 entries each}}
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @conv_values(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d' op stride/dilation must be >= 1, padding >= 0, groups >= 1}}
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 0, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<1x2x5x5xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d' op 2 input channels, 4 output channels and weight in-channels 2 do not fit groups=2}}
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x2x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32>
  return
}

// -----

func.func @conv_kernel(%x: tensor<1x2x2x2xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d' op kernel 3x3 does not fit the padded input 2x2}}
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x2x2x2xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x1x1xf32>
  return
}

// -----

func.func @conv_input_grad_shape(%g: tensor<1x4x4x4xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d_input_grad' op grad has shape [1, 4, 4, 4], but the convolution of input [1, 2, 5, 5] with weight [4, 2, 3, 3] has shape [1, 4, 3, 3]}}
  %0 = "dg.conv2d_input_grad"(%g, %w) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, input_shape = array<i64: 1, 2, 5, 5>} : (tensor<1x4x4x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x2x5x5xf32>
  return
}

// -----

func.func @conv_weight_grad_dtype(%x: tensor<1x2x5x5xf32>, %g: tensor<1x4x3x3xf64>) {
  // expected-error @+1 {{'dg.conv2d_weight_grad' op operand dtypes differ (f32 vs f64)}}
  %0 = "dg.conv2d_weight_grad"(%x, %g) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, weight_shape = array<i64: 4, 2, 3, 3>} : (tensor<1x2x5x5xf32>, tensor<1x4x3x3xf64>) -> tensor<4x2x3x3xf32>
  return
}

// -----

func.func @conv_weight_grad_named_shape(%x: tensor<1x2x5x5xf32>, %g: tensor<1x4x3x3xf32>) {
  // expected-error @+1 {{'dg.conv2d_weight_grad' op weight_shape must be 4 positive sizes, got [4, 2, 3]}}
  %0 = "dg.conv2d_weight_grad"(%x, %g) {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64, weight_shape = array<i64: 4, 2, 3>} : (tensor<1x2x5x5xf32>, tensor<1x4x3x3xf32>) -> tensor<4x2x3x3xf32>
  return
}

// -----

func.func @attention_mask_broadcast(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %m: tensor<1x1x3x6xf32>) {
  // expected-error @+1 {{'dg.attention' op mask [1, 1, 3, 6] does not broadcast to [1, 2, 4, 6]}}
  %0:2 = "dg.attention"(%q, %k, %k, %m) {causal = 0 : i64, scale = 1.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x3x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_key_width(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x4xf32>, %m: tensor<1x1x1x1xf32>) {
  // expected-error @+1 {{'dg.attention' op key [1, 2, 6, 4] and value [1, 2, 6, 4] must be [1, 2, S, 8] for query [1, 2, 4, 8]}}
  %0:2 = "dg.attention"(%q, %k, %k, %m) {causal = 0 : i64, scale = 1.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x4xf32>, tensor<1x1x1x1xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_dtype(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %m: tensor<1x1x1x1xf64>) {
  // expected-error @+1 {{'dg.attention' op query, key, value and mask must share a float dtype (f16/bf16/f32/f64), got f32, f32, f32, f64}}
  %0:2 = "dg.attention"(%q, %k, %k, %m) {causal = 0 : i64, scale = 1.0 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x1x1xf64>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

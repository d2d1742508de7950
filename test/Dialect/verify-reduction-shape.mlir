// Reductions and data-movement ops: every dim/shape rule rejects bad IR with a located error.
// RUN: fusegrad-opt %s --split-input-file --verify-diagnostics

func.func @dim_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.reduce_sum' op dim 2 out of range for rank 2}}
  %0 = "dg.reduce_sum"(%x) {dims = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @dim_repeated(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.reduce_max' op repeated dim in [1, 1]}}
  %0 = "dg.reduce_max"(%x) {dims = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @sum_i1(%x: tensor<2x3xi1>) {
  // expected-error @+1 {{'dg.reduce_sum' op does not take i1 operands; convert first}}
  %0 = "dg.reduce_sum"(%x) {dims = array<i64: 1>} : (tensor<2x3xi1>) -> tensor<2xi1>
  return
}

// -----

func.func @reduce_result(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.reduce_min' op result type(s) tensor<2x1xf32> do not match the inferred tensor<2xf32>}}
  %0 = "dg.reduce_min"(%x) {dims = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @evenly_read_not_0d(%x: tensor<2x3xf32>, %v: tensor<2xf32>) {
  // expected-error @+1 {{'dg.evenly_read' op value must be a 0-d f32, got tensor<2xf32>}}
  %0 = "dg.evenly_read"(%x, %v) : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @argmax_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.argmax' op dim -1 out of range for rank 2}}
  %0 = "dg.argmax"(%x) {dim = -1 : i64} : (tensor<2x3xf32>) -> tensor<2xi64>
  return
}

// -----

func.func @argmin_empty(%x: tensor<2x0xf32>) {
  // expected-error @+1 {{'dg.argmin' op cannot reduce an empty dim 1}}
  %0 = "dg.argmin"(%x) {dim = 1 : i64} : (tensor<2x0xf32>) -> tensor<2xi64>
  return
}

// -----

func.func @broadcast_rank(%x: tensor<3xf32>) {
  // expected-error @+1 {{'dg.broadcast_in_dim' op dims has 2 entries for an operand of rank 1}}
  %0 = "dg.broadcast_in_dim"(%x) {dims = array<i64: 0, 1>} : (tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_dim_range(%x: tensor<3xf32>) {
  // expected-error @+1 {{'dg.broadcast_in_dim' op dim 2 out of range for rank 2}}
  %0 = "dg.broadcast_in_dim"(%x) {dims = array<i64: 2>} : (tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_order(%x: tensor<3x2xf32>) {
  // expected-error @+1 {{'dg.broadcast_in_dim' op dims [1, 0] must be increasing; transpose explicitly}}
  %0 = "dg.broadcast_in_dim"(%x) {dims = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_size(%x: tensor<2xf32>) {
  // expected-error @+1 {{'dg.broadcast_in_dim' op operand dim 0 of size 2 cannot broadcast to result dim 1 of size 3}}
  %0 = "dg.broadcast_in_dim"(%x) {dims = array<i64: 1>} : (tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reshape_numel(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.reshape' op cannot reshape 6 elements [2, 3] into 8 elements [2, 4]}}
  %0 = "dg.reshape"(%x) : (tensor<2x3xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.transpose' op perm [0, 0] is not a permutation of rank 2}}
  %0 = "dg.transpose"(%x) {perm = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_entries(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.slice' op start/limit/stride need 2 entries each}}
  %0 = "dg.slice"(%x) {start = array<i64: 0>, limit = array<i64: 1>, stride = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.slice' op stride 0 in dim 1 must be >= 1}}
  %0 = "dg.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 2, 3>, stride = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.slice' op bounds [1, 4) out of range for dim 1 of size 3}}
  %0 = "dg.slice"(%x) {start = array<i64: 0, 1>, limit = array<i64: 2, 4>, stride = array<i64: 1, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reverse_dims(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.reverse' op dim 5 out of range for rank 2}}
  %0 = "dg.reverse"(%x) {dims = array<i64: 5>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @pad_entries(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.pad' op low/high/interior need 2 entries each}}
  %0 = "dg.pad"(%x) {low = array<i64: 1>, high = array<i64: 0, 0>, interior = array<i64: 0, 0>, value = 0.0 : f64} : (tensor<2x3xf32>) -> tensor<3x3xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.pad' op padding amounts must be non-negative; use dg.slice to crop}}
  %0 = "dg.pad"(%x) {low = array<i64: -1, 0>, high = array<i64: 0, 0>, interior = array<i64: 0, 0>, value = 0.0 : f64} : (tensor<2x3xf32>) -> tensor<1x3xf32>
  return
}

// -----

func.func @concat_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.concatenate' op dim 2 out of range for rank 2}}
  %0 = "dg.concatenate"(%x, %x) {dim = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_result(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.concatenate' op result type(s) tensor<5x3xf32> do not match the inferred tensor<4x3xf32>}}
  %0 = "dg.concatenate"(%x, %y) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  return
}

// -----

func.func @concat_operands(%x: tensor<2x3xf32>, %y: tensor<2x4xf32>) {
  // expected-error @+1 {{'dg.concatenate' op operand #1 tensor<2x4xf32> does not match operand #0 tensor<2x3xf32> outside dim 0}}
  %0 = "dg.concatenate"(%x, %y) {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

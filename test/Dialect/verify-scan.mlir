// Scans: the shape rules reject bad IR with a located error.
// RUN: fusegrad-opt %s --split-input-file --verify-diagnostics

func.func @dim_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.scan' op dim 2 out of range for rank 2}}
  %0 = "dg.scan"(%x) {combiner = "add", dim = 2 : i64, reverse = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @combiner(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.scan' op combiner must be one of ('add', 'mul', 'max', 'min', 'logaddexp'), got 'sub'}}
  %0 = "dg.scan"(%x) {combiner = "sub", dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @reverse(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.scan' op reverse must be 0 or 1, got 2}}
  %0 = "dg.scan"(%x) {combiner = "add", dim = 1 : i64, reverse = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @bool(%x: tensor<2x3xi1>) {
  // expected-error @+1 {{'dg.scan' op does not take i1 operands; convert first}}
  %0 = "dg.scan"(%x) {combiner = "add", dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xi1>) -> tensor<2x3xi1>
  return
}

// -----

func.func @logaddexp_int(%x: tensor<2x3xi64>) {
  // expected-error @+1 {{'dg.scan' op logaddexp takes floating-point operands, got i64}}
  %0 = "dg.scan"(%x) {combiner = "logaddexp", dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xi64>) -> tensor<2x3xi64>
  return
}

// -----

func.func @max_without_indices(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.scan' op result type(s) tensor<2x3xf32> do not match the inferred tensor<2x3xf32>, tensor<2x3xi64>}}
  %0 = "dg.scan"(%x) {combiner = "max", dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @sum_with_indices(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.scan' op result type(s) tensor<2x3xf32>, tensor<2x3xi64> do not match the inferred tensor<2x3xf32>}}
  %0:2 = "dg.scan"(%x) {combiner = "add", dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi64>)
  return
}

// -----

func.func @grad_types(%x: tensor<2x3xf32>, %g: tensor<2x3xf64>) {
  // expected-error @+1 {{'dg.scan_mul_grad' op x and grad must be one floating-point type, got tensor<2x3xf32> and tensor<2x3xf64>}}
  %0 = "dg.scan_mul_grad"(%x, %g) {dim = 1 : i64, reverse = 0 : i64} : (tensor<2x3xf32>, tensor<2x3xf64>) -> tensor<2x3xf32>
  return
}

// Source and random ops, fusion regions, and the checks common to every dg op
// (static tensor types, supported dtypes, attribute kinds, result types).
// RUN: fusegrad-opt %s --split-input-file --verify-diagnostics

func.func @constant_type() {
  // expected-error @+1 {{'dg.constant' op result type(s) tensor<3xf32> do not match the inferred tensor<2xf32>}}
  %0 = "dg.constant"() {value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> tensor<3xf32>
  return
}

// -----

func.func @iota_dim() {
  // expected-error @+1 {{'dg.iota' op dim 2 out of range for rank 2}}
  %0 = "dg.iota"() {dim = 2 : i64} : () -> tensor<2x3xi64>
  return
}

// -----

func.func @iota_scalar() {
  // expected-error @+1 {{'dg.iota' op dim 0 out of range for rank 0}}
  %0 = "dg.iota"() {dim = 0 : i64} : () -> tensor<i64>
  return
}

// -----

func.func @seed_type(%s: tensor<2xi64>) {
  // expected-error @+1 {{'dg.rng_uniform' op seed must be tensor<i64>, got tensor<2xi64>}}
  %0 = "dg.rng_uniform"(%s) : (tensor<2xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @random_int(%s: tensor<i64>) {
  // expected-error @+1 {{'dg.rng_uniform' op result must be floating point, got i32}}
  %0 = "dg.rng_uniform"(%s) : (tensor<i64>) -> tensor<4xi32>
  return
}

// -----

func.func @bernoulli_p(%s: tensor<i64>) {
  // expected-error @+1 {{'dg.rng_bernoulli' op p=1.5 outside [0, 1]}}
  %0 = "dg.rng_bernoulli"(%s) {p = 1.5 : f64} : (tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @fusion_blocks(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dg.fusion' region must have exactly one block, has 2}}
  %0 = scf.execute_region -> tensor<4xf32> no_inline {
    cf.br ^bb1
  ^bb1:
    %e = "dg.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %e : tensor<4xf32>
  } {dg.fusion}
  return
}

// -----

func.func @fusion_foreign_op(%x: tensor<4xf32>) {
  %0 = scf.execute_region -> tensor<4xf32> no_inline {
    // expected-error @+1 {{'dg.fusion' region may contain only dg ops, found 'arith.constant'}}
    %c = arith.constant dense<1.0> : tensor<4xf32>
    scf.yield %c : tensor<4xf32>
  } {dg.fusion}
  return
}

// -----

func.func @fusion_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{'dg.fusion' region result #0: tensor<?xf32>: a dg tensor's `?` dims need their sizes as the type's encoding}}
  %0 = scf.execute_region -> tensor<?xf32> no_inline {
    scf.yield %x : tensor<?xf32>
  } {dg.fusion}
  return
}

// -----

func.func @fusion_inner(%x: tensor<4xi32>) {
  %0 = scf.execute_region -> tensor<4xi32> no_inline {
    // expected-error @+1 {{'dg.exp' op takes floating-point operands, got i32}}
    %e = "dg.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32>
    scf.yield %e : tensor<4xi32>
  } {dg.fusion}
  return
}

// -----

func.func @dynamic(%a: tensor<?xf32>) {
  // expected-error @+1 {{'dg.exp' op operand #0: tensor<?xf32>: a dg tensor's `?` dims need their sizes as the type's encoding}}
  %0 = "dg.exp"(%a) : (tensor<?xf32>) -> tensor<?xf32>
  return
}

// -----

func.func @element_type(%a: tensor<4xui8>) {
  // expected-error @+1 {{'dg.abs' op operand #0: unsupported element type ui8}}
  %0 = "dg.abs"(%a) : (tensor<4xui8>) -> tensor<4xui8>
  return
}

// -----

func.func @attr_kind(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.transpose' op has an attribute of the wrong kind}}
  %0 = "dg.transpose"(%a) {perm = array<i32: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @attr_missing(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'dg.transpose' op attribute "perm" is expected but not provided}}
  %0 = "dg.transpose"(%a) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// Every shape/dtype rule of the pointwise ops rejects bad IR with a located error.
// RUN: fusegrad-opt %s --split-input-file --verify-diagnostics

func.func @not_float(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dg.not' op takes integer or i1 operands, got f32}}
  %0 = "dg.not"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @exp_int(%x: tensor<4xi32>) {
  // expected-error @+1 {{'dg.exp' op takes floating-point operands, got i32}}
  %0 = "dg.exp"(%x) : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @neg_i1(%x: tensor<4xi1>) {
  // expected-error @+1 {{'dg.neg' op does not take i1 operands}}
  %0 = "dg.neg"(%x) : (tensor<4xi1>) -> tensor<4xi1>
  return
}

// -----

func.func @add_shapes(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'dg.add' op operand #1 has shape [3] but operand #0 has [4]; broadcast explicitly with dg.broadcast_in_dim}}
  %0 = "dg.add"(%a, %b) : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @add_dtypes(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'dg.add' op operand #1 has dtype f16 but operand #0 has f32; insert dg.convert}}
  %0 = "dg.add"(%a, %b) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @and_float(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dg.and' op takes integer or i1 operands, got f32}}
  %0 = "dg.and"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @add_i1(%a: tensor<4xi1>) {
  // expected-error @+1 {{'dg.add' op does not take i1 operands; convert first}}
  %0 = "dg.add"(%a, %a) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return
}

// -----

func.func @add_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dg.add' op result type(s) tensor<4xf16> do not match the inferred tensor<4xf32>}}
  %0 = "dg.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @compare_direction(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dg.compare' op direction must be one of ('eq', 'ne', 'lt', 'le', 'gt', 'ge'), got 'less'}}
  %0 = "dg.compare"(%a, %a) {direction = "less"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return
}

// -----

func.func @compare_shapes(%a: tensor<4xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'dg.compare' op operand #1 has shape [2]}}
  %0 = "dg.compare"(%a, %b) {direction = "lt"} : (tensor<4xf32>, tensor<2xf32>) -> tensor<4xi1>
  return
}

// -----

func.func @select_pred_dtype(%p: tensor<4xi32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'dg.select' op predicate must be i1, got i32}}
  %0 = "dg.select"(%p, %a, %a) : (tensor<4xi32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @select_pred_shape(%p: tensor<2xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{'dg.select' op predicate shape [2] differs from value shape [4]}}
  %0 = "dg.select"(%p, %a, %a) : (tensor<2xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @select_values(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{'dg.select' op operand #1 has dtype f64 but operand #0 has f32}}
  %0 = "dg.select"(%p, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return
}

// -----

func.func @convert_shape(%a: tensor<4xf32>) {
  // expected-error @+1 {{'dg.convert' op result type(s) tensor<2x2xi32> do not match the inferred tensor<4xi32>}}
  %0 = "dg.convert"(%a) : (tensor<4xf32>) -> tensor<2x2xi32>
  return
}

// -----

func.func @atan2_int(%a: tensor<4xi64>) {
  // expected-error @+1 {{'dg.atan2' op takes floating-point operands, got i64}}
  %0 = "dg.atan2"(%a, %a) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return
}

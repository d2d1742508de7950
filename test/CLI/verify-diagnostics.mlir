// --verify-diagnostics: unmatched expectations and unexpected errors fail, with locations.
// RUN: fusegrad-opt %s --split-input-file --verify-diagnostics -p 'func.func(canonicalize)'
// RUN: sed -e 's/shape \[3\]/shape [9]/' %s > %t.mlir
// RUN: not fusegrad-opt %t.mlir --split-input-file --verify-diagnostics 2>&1 | filecheck %s
// CHECK: verify-diagnostics.mlir.tmp.mlir:10:8: error: unexpected error: 'dg.add' op operand #1 has shape [3]
// CHECK: verify-diagnostics.mlir.tmp.mlir:9:6: error: expected error "'dg.add' op operand #1 has shape [9]" was not produced

func.func @below(%a: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @below {{'dg.add' op operand #1 has shape [3]}}
  %0 = "dg.add"(%a, %b) : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @above(%a: tensor<4xf32>) {
  %0 = "dg.exp"(%a) : (tensor<4xi32>) -> tensor<4xf32>
  // expected-error @above {{use of value '%a' expects different type than prior uses}}
  // expected-note @-3 {{prior use here}}
  return
}

// -----

// A valid chunk needs no expectations.
func.func @ok(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "dg.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

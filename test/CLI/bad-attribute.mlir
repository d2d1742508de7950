// Unknown attributes and attributes of the wrong kind are located errors.
// RUN: not fusegrad-opt %s --split-input-file 2>&1 | filecheck %s
// CHECK-NOT: Traceback
// CHECK: bad-attribute.mlir:9:{{[0-9]+}}: error: {{.*}}frob
// CHECK: bad-attribute.mlir:17:8: error: expected base attribute 'builtin.dense_array' but got 'builtin.integer'
// CHECK-NOT: Traceback

func.func @unknown_attr(%a: tensor<4xf32>) {
  %0 = "dg.reduce_sum"(%a) {dims = array<i64: 0>, x = #frob.thing<1>} : (tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @wrong_kind(%a: tensor<4xf32>) {
  // dims must be an array<i64: ...>, not an integer
  %0 = "dg.reduce_sum"(%a) {dims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
  return
}

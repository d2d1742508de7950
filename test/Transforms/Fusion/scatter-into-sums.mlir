// dg-scatter-into-sums: the gradient of a weight that an embedding and an output layer
// share, the output layer's plus the embedding's scattered into zeros, becomes one
// scatter_add into the output layer's: no temporary of the weight's size. A scatter
// whose result something else reads, or into something other than zeros, stays.
// RUN: fusegrad-opt %s -p dg-scatter-into-sums | filecheck %s

// CHECK-LABEL: func.func @tied(
// CHECK-NEXT: %[[W:.*]] = "dg.matmul"(%arg0, %arg1)
// CHECK-NEXT: %[[S:.*]] = "dg.scatter_add"(%[[W]], %arg2, %arg3) {dim = 0 : i64}
// CHECK-NEXT: return %[[S]]
func.func @tied(%g: tensor<100x8xf32>, %h: tensor<8x16xf32>, %idx: tensor<8x16xi64>, %u: tensor<8x16xf32>) -> tensor<100x16xf32> {
  %z = "dg.full"() {value = 0.0 : f64} : () -> tensor<100x16xf32>
  %e = "dg.scatter_add"(%z, %idx, %u) {dim = 0 : i64} : (tensor<100x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<100x16xf32>
  %w = "dg.matmul"(%g, %h) : (tensor<100x8xf32>, tensor<8x16xf32>) -> tensor<100x16xf32>
  %s = "dg.add"(%e, %w) : (tensor<100x16xf32>, tensor<100x16xf32>) -> tensor<100x16xf32>
  return %s : tensor<100x16xf32>
}

// CHECK-LABEL: func.func @kept(
// CHECK: "dg.scatter_add"(%{{.*}}, %arg1, %arg2)
// CHECK: "dg.add"
// CHECK: "dg.scatter_add"(%arg3, %arg1, %arg2)
// CHECK: "dg.add"
func.func @kept(%x: tensor<100x16xf32>, %idx: tensor<8x16xi64>, %u: tensor<8x16xf32>, %y: tensor<100x16xf32>) -> (tensor<100x16xf32>, tensor<100x16xf32>, tensor<100x16xf32>) {
  %z = "dg.full"() {value = 0.0 : f64} : () -> tensor<100x16xf32>
  %e = "dg.scatter_add"(%z, %idx, %u) {dim = 0 : i64} : (tensor<100x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<100x16xf32>
  %s = "dg.add"(%x, %e) : (tensor<100x16xf32>, tensor<100x16xf32>) -> tensor<100x16xf32>
  %f = "dg.scatter_add"(%y, %idx, %u) {dim = 0 : i64} : (tensor<100x16xf32>, tensor<8x16xi64>, tensor<8x16xf32>) -> tensor<100x16xf32>
  %t = "dg.add"(%x, %f) : (tensor<100x16xf32>, tensor<100x16xf32>) -> tensor<100x16xf32>
  return %s, %e, %t : tensor<100x16xf32>, tensor<100x16xf32>, tensor<100x16xf32>
}

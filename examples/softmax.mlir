// Row-wise softmax of a 4x8 matrix in the dg dialect: max-shifted for
// numerical stability, with every broadcast explicit.
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %max = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %max_b = "dg.broadcast_in_dim"(%max) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %shifted = "dg.sub"(%x, %max_b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = "dg.exp"(%shifted) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  %sum_b = "dg.broadcast_in_dim"(%sum) {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x8xf32>
  %y = "dg.div"(%e, %sum_b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// dg-results-in-place: a result returned through a reshape is computed in its
// out-param (seen through a view, which canonicalize folds), not in a temporary
// copied there at the end.
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize' | filecheck %s

// CHECK-LABEL: func.func @logits(
// CHECK-SAME:    %[[OUT:[a-z0-9]+]]: memref<2x3x6xf32>)
// CHECK:         %[[VIEW:.*]] = memref.collapse_shape %[[OUT]] {{\[\[}}0, 1], [2]] : memref<2x3x6xf32> into memref<6x6xf32>
// CHECK:         linalg.matmul ins({{.*}}) outs(%[[VIEW]] : memref<6x6xf32>)
// CHECK-NOT:     memref.copy
// CHECK:         return
func.func @logits(%x: tensor<2x3x4xf32>, %w: tensor<4x6xf32>) -> tensor<2x3x6xf32> {
  %x2 = "dg.reshape"(%x) : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %y = "dg.matmul"(%x2, %w) : (tensor<6x4xf32>, tensor<4x6xf32>) -> tensor<6x6xf32>
  %y3 = "dg.reshape"(%y) : (tensor<6x6xf32>) -> tensor<2x3x6xf32>
  return %y3 : tensor<2x3x6xf32>
}

// A rank-0 out-param (a scalar result of one element) keeps its copy.
// CHECK-LABEL: func.func @scalar(
// CHECK:         memref.copy
func.func @scalar(%x: tensor<1xf32>) -> tensor<f32> {
  %e = "dg.exp"(%x) : (tensor<1xf32>) -> tensor<1xf32>
  %r = "dg.reshape"(%e) : (tensor<1xf32>) -> tensor<f32>
  return %r : tensor<f32>
}

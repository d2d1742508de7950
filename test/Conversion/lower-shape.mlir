// Data movement: index maps, tensor reshapes and slices.
// RUN: fusegrad-opt %s -p dg-lower-to-linalg | filecheck %s

// CHECK-DAG: #[[BCAST:.*]] = affine_map<(d0, d1, d2) -> (d0, 0)>
// CHECK-DAG: #[[REV:.*]] = affine_map<(d0, d1) -> (-d0 + 2, d1)>
// CHECK-LABEL: func.func @broadcast
// CHECK: linalg.generic {indexing_maps = [#[[BCAST]], #{{.*}}]
func.func @broadcast(%x: tensor<3x1xf32>) -> tensor<3x4x5xf32> {
  %0 = "dg.broadcast_in_dim"(%x) {dims = array<i64: 0, 2>} : (tensor<3x1xf32>) -> tensor<3x4x5xf32>
  return %0 : tensor<3x4x5xf32>
}

// CHECK-LABEL: func.func @reshape
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1, 2]] output_shape [3, 1, 2] : tensor<6xf32> into tensor<3x1x2xf32>
// CHECK: tensor.expand_shape %{{.*}} [] output_shape [1] : tensor<f32> into tensor<1xf32>
func.func @reshape(%x: tensor<2x3xf32>, %s: tensor<f32>) -> (tensor<3x1x2xf32>, tensor<1xf32>) {
  %0 = "dg.reshape"(%x) : (tensor<2x3xf32>) -> tensor<3x1x2xf32>
  %1 = "dg.reshape"(%s) : (tensor<f32>) -> tensor<1xf32>
  return %0, %1 : tensor<3x1x2xf32>, tensor<1xf32>
}

// CHECK-LABEL: func.func @views
// CHECK: linalg.transpose ins(%arg0 : tensor<3x4xi64>) outs(%{{.*}} : tensor<4x3xi64>) permutation = [1, 0]
// CHECK: tensor.extract_slice %arg0[1, 0] [2, 2] [1, 3] : tensor<3x4xi64> to tensor<2x2xi64>
// CHECK: linalg.generic {indexing_maps = [#[[REV]], #{{.*}}]
func.func @views(%x: tensor<3x4xi64>) -> (tensor<4x3xi64>, tensor<2x2xi64>, tensor<3x4xi64>) {
  %0 = "dg.transpose"(%x) {perm = array<i64: 1, 0>} : (tensor<3x4xi64>) -> tensor<4x3xi64>
  %1 = "dg.slice"(%x) {start = array<i64: 1, 0>, limit = array<i64: 3, 4>, stride = array<i64: 1, 3>} : (tensor<3x4xi64>) -> tensor<2x2xi64>
  %2 = "dg.reverse"(%x) {dims = array<i64: 0>} : (tensor<3x4xi64>) -> tensor<3x4xi64>
  return %0, %1, %2 : tensor<4x3xi64>, tensor<2x2xi64>, tensor<3x4xi64>
}

// Interior padding: fill with the value, insert with stride interior+1.
// CHECK-LABEL: func.func @pad
// CHECK: %[[V:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: %[[F:.*]] = linalg.fill ins(%[[V]] : f32) outs(%{{.*}} : tensor<5x4xf32>)
// CHECK: tensor.insert_slice %arg0 into %[[F]][1, 0] [2, 2] [3, 1] : tensor<2x2xf32> into tensor<5x4xf32>
func.func @pad(%x: tensor<2x2xf32>) -> tensor<5x4xf32> {
  %0 = "dg.pad"(%x) {low = array<i64: 1, 0>, high = array<i64: 0, 2>, interior = array<i64: 2, 0>, value = 0.5 : f64} : (tensor<2x2xf32>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}

// CHECK-LABEL: func.func @concat
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK: %[[A:.*]] = tensor.insert_slice %arg0 into %[[E]][0, 0] [2, 2] [1, 1]
// CHECK: tensor.insert_slice %arg1 into %[[A]][0, 2] [2, 2] [1, 1]
func.func @concat(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>) -> tensor<2x4xf32> {
  %0 = "dg.concatenate"(%a, %b) {dim = 1} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// A tree of binary concatenations (how n-ary ones are built) is one buffer: the parts of
// an inner concatenation along the same dim go straight into the outer one; a
// concatenation along another dim stays a part of its own.
// CHECK-LABEL: func.func @concat_tree
// CHECK: %[[E:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = tensor.insert_slice %arg0 into %[[E]][0, 0] [1, 4] [1, 1]
// CHECK-NEXT: %[[B:.*]] = tensor.insert_slice %arg1 into %[[A]][1, 0] [1, 4] [1, 1]
// CHECK-NEXT: %[[C:.*]] = tensor.insert_slice %arg2 into %[[B]][2, 0] [1, 4] [1, 1]
// CHECK-NEXT: %[[D:.*]] = tensor.insert_slice %[[ACROSS:.*]] into %[[C]][3, 0] [1, 4] [1, 1]
// CHECK-NEXT: return %[[D]]
func.func @concat_tree(%a: tensor<1x4xf32>, %b: tensor<1x4xf32>, %c: tensor<1x4xf32>,
                       %d: tensor<1x2xf32>) -> tensor<4x4xf32> {
  %ab = "dg.concatenate"(%a, %b) {dim = 0} : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %dd = "dg.concatenate"(%d, %d) {dim = 1} : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x4xf32>
  %cd = "dg.concatenate"(%c, %dd) {dim = 0} : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  %0 = "dg.concatenate"(%ab, %cd) {dim = 0} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// Reductions: a generic with reduction iterators into a filled init.
// RUN: fusegrad-opt %s -p dg-lower-to-linalg | filecheck %s

// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[KEPT:.*]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-LABEL: func.func @max
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[NEGINF]] : f32)
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[KEPT]]], iterator_types = ["reduction", "parallel", "reduction"]}
// CHECK-SAME: outs(%[[INIT]] : tensor<3xf32>)
// CHECK: arith.maximumf
func.func @max(%x: tensor<2x3x4xf32>) -> tensor<3xf32> {
  %0 = "dg.reduce_max"(%x) {dims = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// CHECK-LABEL: func.func @sum_int
// CHECK: arith.constant 0 : i64
// CHECK: arith.addi
func.func @sum_int(%x: tensor<5xi64>) -> tensor<i64> {
  %0 = "dg.reduce_sum"(%x) {dims = array<i64: 0>} : (tensor<5xi64>) -> tensor<i64>
  return %0 : tensor<i64>
}

// A sum of bf16 accumulates in f32 (as eager's) and rounds once at the end; a max
// stays in bf16 (it is exact).
// CHECK-LABEL: func.func @sum_bf16
// CHECK: %[[ACC:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<3xf32>)
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK-SAME: outs(%[[ACC]] : tensor<3xf32>)
// CHECK: %[[X:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK: arith.addf %[[X]], %{{.*}} : f32
// CHECK: linalg.generic {{.*}} ins(%[[SUM]] : tensor<3xf32>) outs(%{{.*}} : tensor<3xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK-LABEL: func.func @max_bf16
// CHECK-NOT: arith.extf
// CHECK: arith.maximumf %{{.*}} : bf16
func.func @sum_bf16(%x: tensor<3x4096xbf16>) -> tensor<3xbf16> {
  %0 = "dg.reduce_sum"(%x) {dims = array<i64: 1>} : (tensor<3x4096xbf16>) -> tensor<3xbf16>
  return %0 : tensor<3xbf16>
}
func.func @max_bf16(%x: tensor<3x4096xbf16>) -> tensor<3xbf16> {
  %0 = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<3x4096xbf16>) -> tensor<3xbf16>
  return %0 : tensor<3xbf16>
}

// argmax: two outputs (value, index); NaN wins, ties keep the first index.
// CHECK-LABEL: func.func @argmax
// CHECK: linalg.generic
// CHECK-SAME: outs(%{{.*}}, %{{.*}} : tensor<2xf32>, tensor<2xi64>)
// CHECK: linalg.index 1
// CHECK: arith.cmpf ogt
// CHECK: arith.cmpf uno
// CHECK: linalg.yield %{{.*}}, %{{.*}} : f32, i64
func.func @argmax(%x: tensor<2x7xf32>) -> tensor<2xi64> {
  %0 = "dg.argmax"(%x) {dim = 1} : (tensor<2x7xf32>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

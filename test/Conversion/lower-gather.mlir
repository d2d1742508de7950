// Indexing ops: a gather checks each index in its own body (every element reads x at an
// index of its own, so nothing is lost to the store); index_select and embedding-like
// gathers of rows first clamp and check the indices in a generic of their own (an
// out-of-range one stores its site in the error flag), then a generic tensor.extracts at
// the computed coordinates, with no store in its loop; the scatters are scf.for nests
// carrying the result tensor, combining each target with its src elements in order
// (scatter_add adds, scatter_max takes the NaN-propagating maximum, a boolean
// scatter_add ors, as an unsigned maximum; of repeated indices scatter keeps the
// last, as eager's CPU kernel).
// RUN: fusegrad-opt %s -p dg-lower-to-linalg | filecheck %s

// CHECK-LABEL: func.func @gather
// CHECK: linalg.generic {{.*}} ins(%arg1 : tensor<2x4xi64>) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: ^bb0(%[[IDX:.*]]: i64, %{{.*}}: f32):
// CHECK: %[[I:.*]] = arith.index_cast %[[IDX]] : i64 to index
// CHECK: %[[GE:.*]] = arith.cmpi sge, %[[I]]
// CHECK: %[[LT:.*]] = arith.cmpi slt, %[[I]]
// CHECK: %[[OK:.*]] = arith.andi %[[GE]], %[[LT]]
// CHECK: scf.if
// CHECK: memref.get_global @__fusegrad_index_error
// CHECK: %[[SAFE:.*]] = arith.select %[[OK]], %[[I]]
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK: tensor.extract %arg0[%[[SAFE]], %[[J]]] : tensor<3x4xf32>
func.func @gather(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>) -> tensor<2x4xf32> {
  %0 = "dg.gather"(%x, %i) {dim = 0} : (tensor<3x4xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @index_select
// CHECK: %[[SAFE:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<2x2xi32>) outs(%{{.*}} : tensor<2x2xi64>)
// CHECK: scf.if
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<4x2x2xf32>)
// CHECK-NOT: scf.if
// CHECK: tensor.extract %[[SAFE]][{{.*}}] : tensor<2x2xi64>
// CHECK: tensor.extract %arg0[{{.*}}] : tensor<4x5xf32>
func.func @index_select(%x: tensor<4x5xf32>, %i: tensor<2x2xi32>) -> tensor<4x2x2xf32> {
  %0 = "dg.index_select"(%x, %i) {dim = 1} : (tensor<4x5xf32>, tensor<2x2xi32>) -> tensor<4x2x2xf32>
  return %0 : tensor<4x2x2xf32>
}

// CHECK-LABEL: func.func @scatter_add
// CHECK: scf.for {{.*}} iter_args(%[[T0:.*]] = %arg0) -> (tensor<3x4xf32>)
// CHECK: scf.for {{.*}} iter_args(%[[T1:.*]] = %[[T0]]) -> (tensor<3x4xf32>)
// CHECK: tensor.extract %arg1
// CHECK: tensor.extract %[[T1]]
// CHECK: tensor.extract %arg2
// CHECK: arith.addf
// CHECK: tensor.insert {{.*}} into %[[T1]]
func.func @scatter_add(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 0} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @scatter_max
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.maximumf
// CHECK: tensor.insert
func.func @scatter_max(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = "dg.scatter_max"(%x, %i, %s) {dim = 0} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// CHECK-LABEL: func.func @scatter_add_bool
// CHECK: scf.for
// CHECK: scf.for
// CHECK: arith.maxui {{.*}} : i1
// CHECK: tensor.insert
func.func @scatter_add_bool(%x: tensor<3x4xi1>, %i: tensor<5x4xi64>, %s: tensor<5x4xi1>) -> tensor<3x4xi1> {
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 0} : (tensor<3x4xi1>, tensor<5x4xi64>, tensor<5x4xi1>) -> tensor<3x4xi1>
  return %0 : tensor<3x4xi1>
}

// CHECK-LABEL: func.func @scatter(
// CHECK: scf.for {{.*}} iter_args(%[[T0:.*]] = %arg0) -> (tensor<3x4xf32>)
// CHECK: scf.for {{.*}} iter_args(%[[T1:.*]] = %[[T0]]) -> (tensor<3x4xf32>)
// CHECK: tensor.extract %arg1
// CHECK: %[[V:.*]] = tensor.extract %arg2
// CHECK-NOT: arith.addf
// CHECK: tensor.insert %[[V]] into %[[T1]]
func.func @scatter(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = "dg.scatter"(%x, %i, %s) {dim = 0} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// An index_select's gradient scatters slices: its indices are a 1-D tensor broadcast
// along the scattered dim, so each slice's index is read and checked once, outside the
// loop over the slice, which holds no store to the error flag.
// CHECK-LABEL: func.func @scatter_slices
// CHECK: scf.for %[[I:.*]] = {{.*}} iter_args(%[[T0:.*]] = %arg0) -> (tensor<3x4xf32>)
// CHECK: tensor.extract %arg1[%[[I]]] : tensor<5xi64>
// CHECK: scf.if
// CHECK: %[[ROW:.*]] = arith.select
// CHECK: scf.for %[[J:.*]] = {{.*}} iter_args(%[[T1:.*]] = %[[T0]]) -> (tensor<3x4xf32>)
// CHECK-NOT: scf.if
// CHECK: tensor.extract %[[T1]][%[[ROW]], %[[J]]]
// CHECK: tensor.extract %arg2[%[[I]], %[[J]]]
// CHECK: arith.addf
// CHECK: tensor.insert {{.*}} into %[[T1]][%[[ROW]], %[[J]]]
func.func @scatter_slices(%x: tensor<3x4xf32>, %i: tensor<5xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %wide = "dg.broadcast_in_dim"(%i) {dims = array<i64: 0>} : (tensor<5xi64>) -> tensor<5x4xi64>
  %0 = "dg.scatter_add"(%x, %wide, %s) {dim = 0} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// Indices that a fused region computes while broadcasting them (index_add's wrapping of
// negative indices) are computed once per slice, in a 1-D generic of the same body,
// and the scatter reads them per slice as above (not a full-size index tensor checked
// element by element).
// CHECK-LABEL: func.func @scatter_computed_slices
// CHECK: %[[ROWS:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<5xi64>) outs(%{{.*}} : tensor<5xi64>)
// CHECK: arith.addi
// CHECK: scf.for %[[I:.*]] = {{.*}} iter_args(%[[T0:.*]] = %arg0) -> (tensor<3x4xf32>)
// CHECK: tensor.extract %[[ROWS]][%[[I]]] : tensor<5xi64>
// CHECK: scf.if
// CHECK: scf.for
// CHECK-NOT: scf.if
// CHECK: tensor.insert
func.func @scatter_computed_slices(%x: tensor<3x4xf32>, %i: tensor<5xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %wide = scf.execute_region -> tensor<5x4xi64> no_inline {
    %one = "dg.full"() {value = 1.0 : f64} : () -> tensor<5xi64>
    %j = "dg.add"(%i, %one) : (tensor<5xi64>, tensor<5xi64>) -> tensor<5xi64>
    %w = "dg.broadcast_in_dim"(%j) {dims = array<i64: 0>} : (tensor<5xi64>) -> tensor<5x4xi64>
    scf.yield %w : tensor<5x4xi64>
  } {dg.fusion}
  %0 = "dg.scatter_add"(%x, %wide, %s) {dim = 0} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// A gather by indices broadcast along its dim (a scatter_add's gradient) reads whole
// slices, as index_select does: the indices checked once each in a generic of their own,
// the gather's loop free of stores.
// CHECK-LABEL: func.func @gather_slices
// CHECK: %[[SAFE:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<5xi64>) outs(%{{.*}} : tensor<5xi64>)
// CHECK: scf.if
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<5x4xf32>)
// CHECK-NOT: scf.if
// CHECK: tensor.extract %[[SAFE]][{{.*}}] : tensor<5xi64>
// CHECK: tensor.extract %arg0[{{.*}}] : tensor<3x4xf32>
func.func @gather_slices(%x: tensor<3x4xf32>, %i: tensor<5xi64>) -> tensor<5x4xf32> {
  %wide = "dg.broadcast_in_dim"(%i) {dims = array<i64: 0>} : (tensor<5xi64>) -> tensor<5x4xi64>
  %0 = "dg.gather"(%x, %wide) {dim = 0} : (tensor<3x4xf32>, tensor<5x4xi64>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}

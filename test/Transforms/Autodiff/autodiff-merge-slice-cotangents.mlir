// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s

// A tensor read as adjacent slices (a split): the slices' zero-padded cotangents
// merge into one concatenation instead of a sum of full-size pads.
// CHECK-LABEL: func.func @split_bwd(
// CHECK-NOT:   "dg.pad"
// CHECK-NOT:   "dg.add"
// CHECK:       %[[G:.*]] = "dg.concatenate"({{.*}}) {dim = 1 : i64} : (tensor<4x2xf32>, tensor<4x4xf32>) -> tensor<4x6xf32>
// CHECK-NOT:   "dg.pad"
// CHECK:       return %[[G]]
func.func @split(%x: tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x4xf32>) {
  %a = "dg.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 4, 2>, stride = array<i64: 1, 1>} : (tensor<4x6xf32>) -> tensor<4x2xf32>
  %b = "dg.slice"(%x) {start = array<i64: 0, 2>, limit = array<i64: 4, 6>, stride = array<i64: 1, 1>} : (tensor<4x6xf32>) -> tensor<4x4xf32>
  %e = "dg.exp"(%a) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return %e, %b : tensor<4x2xf32>, tensor<4x4xf32>
}

// Alternate elements (stride-2 windows, as a 2-wide max-pool reads them): the two
// cotangents interleave, a column each, into one tensor.
// CHECK-LABEL: func.func @windows_bwd(
// CHECK-NOT:   "dg.pad"
// CHECK-NOT:   "dg.add"
// CHECK:       "dg.concatenate"({{.*}}) {dim = 2 : i64} : (tensor<4x3x1xf32>, tensor<4x3x1xf32>) -> tensor<4x3x2xf32>
// CHECK:       %[[G:.*]] = "dg.reshape"({{.*}}) : (tensor<4x3x2xf32>) -> tensor<4x6xf32>
// CHECK:       return %[[G]]
func.func @windows(%x: tensor<4x6xf32>) -> tensor<4x3xf32> {
  %a = "dg.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 4, 5>, stride = array<i64: 1, 2>} : (tensor<4x6xf32>) -> tensor<4x3xf32>
  %b = "dg.slice"(%x) {start = array<i64: 0, 1>, limit = array<i64: 4, 6>, stride = array<i64: 1, 2>} : (tensor<4x6xf32>) -> tensor<4x3xf32>
  %m = "dg.mul"(%a, %b) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %m : tensor<4x3xf32>
}

// Overlapping slices (shifted windows, as a 3-d convolution's depth taps read them):
// the overlap is added once where it lies, between the parts only one slice covers.
// CHECK-LABEL: func.func @overlap_bwd(
// CHECK-NOT:   "dg.pad"
// CHECK:       %[[A:.*]] = "dg.slice"(%arg0) {limit = array<i64: 4, 2>, start = array<i64: 0, 0>
// CHECK:       %[[AO:.*]] = "dg.slice"(%arg0) {limit = array<i64: 4, 4>, start = array<i64: 0, 2>
// CHECK:       %[[BO:.*]] = "dg.slice"(%arg1) {limit = array<i64: 4, 2>, start = array<i64: 0, 0>
// CHECK:       %[[O:.*]] = "dg.add"(%[[AO]], %[[BO]])
// CHECK:       %[[B:.*]] = "dg.slice"(%arg1) {limit = array<i64: 4, 4>, start = array<i64: 0, 2>
// CHECK:       %[[AB:.*]] = "dg.concatenate"(%[[A]], %[[O]]) {dim = 1 : i64}
// CHECK:       %[[G:.*]] = "dg.concatenate"(%[[AB]], %[[B]]) {dim = 1 : i64} : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x6xf32>
// CHECK-NOT:   "dg.pad"
// CHECK:       return %[[G]]
func.func @overlap(%x: tensor<4x6xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = "dg.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 4, 4>, stride = array<i64: 1, 1>} : (tensor<4x6xf32>) -> tensor<4x4xf32>
  %b = "dg.slice"(%x) {start = array<i64: 0, 2>, limit = array<i64: 4, 6>, stride = array<i64: 1, 1>} : (tensor<4x6xf32>) -> tensor<4x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// Strided windows two strides apart (a 3-wide, stride-2 pool's first and last taps) lie
// on the same lattice: they merge there, and the union is padded with that stride.
// CHECK-LABEL: func.func @lattice_bwd(
// CHECK:       %[[O:.*]] = "dg.add"
// CHECK:       "dg.concatenate"({{.*}}) {dim = 1 : i64} : (tensor<4x2xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
// CHECK:       %[[G:.*]] = "dg.pad"(%{{.*}}) {high = array<i64: 0, 1>, interior = array<i64: 0, 1>, low = array<i64: 0, 0>, value = 0.000000e+00 : f64} : (tensor<4x3xf32>) -> tensor<4x6xf32>
// CHECK-NOT:   "dg.add"
// CHECK:       return %[[G]]
func.func @lattice(%x: tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %a = "dg.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 4, 3>, stride = array<i64: 1, 2>} : (tensor<4x6xf32>) -> tensor<4x2xf32>
  %b = "dg.slice"(%x) {start = array<i64: 0, 2>, limit = array<i64: 4, 5>, stride = array<i64: 1, 2>} : (tensor<4x6xf32>) -> tensor<4x2xf32>
  return %a, %b : tensor<4x2xf32>, tensor<4x2xf32>
}

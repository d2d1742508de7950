// dg.scan lowers to scf.for loops over the other dims (none for a static dim of 1)
// around a serial loop along the scanned dim that carries the running value, all
// tagged dg.scan (the targets' kernel passes find the nest by it): extract, combine,
// insert. f32 sums accumulate in f64 (eager's CPU kernel does), each result rounded;
// a reverse scan reads the dim from its end; along a dim of one element the scan is
// its operand (and index 0).
// RUN: fusegrad-opt %s -p dg-lower-to-linalg | filecheck %s

// CHECK-LABEL: func.func @sum_rows
// CHECK: %[[N:.*]] = tensor.dim %arg0, %{{.*}} : tensor<3x?xf32, "s0">
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<3x?xf32, "s0">) {
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[N]] step %{{.*}} iter_args(%[[T:.*]] = %{{.*}}, %[[ACC:.*]] = %[[ZERO]]) -> (tensor<3x?xf32, "s0">, f64) {
// CHECK: %[[X:.*]] = tensor.extract %arg0[%[[R]], %[[I]]]
// CHECK: %[[WIDE:.*]] = arith.extf %[[X]] : f32 to f64
// CHECK: %[[SUM:.*]] = arith.addf %[[ACC]], %[[WIDE]] : f64
// CHECK: %[[Y:.*]] = arith.truncf %[[SUM]] : f64 to f32
// CHECK: %[[NEW:.*]] = tensor.insert %[[Y]] into %[[T]][%[[R]], %[[I]]]
// CHECK: scf.yield %[[NEW]], %[[SUM]]
// CHECK: } {dg.scan = {combiner = "add", dim = 1 : i64, reverse = false}}
// CHECK: } {dg.scan = {combiner = "add", dim = 1 : i64, reverse = false}}
func.func @sum_rows(%x: tensor<3x?xf32, "s0">) -> tensor<3x?xf32, "s0"> {
  %0 = "dg.scan"(%x) {combiner = "add", dim = 1 : i64, reverse = 0 : i64} : (tensor<3x?xf32, "s0">) -> tensor<3x?xf32, "s0">
  return %0 : tensor<3x?xf32, "s0">
}

// The running max and its index: the element wins when it is NaN, or at least as
// large as the running one (ordered: never where that is NaN); before the start the
// running value is -inf, which every element beats or ties.
// CHECK-LABEL: func.func @max_reverse
// CHECK: %[[LOWEST:.*]] = arith.constant 0xFF800000 : f32
// CHECK: scf.for %[[I:.*]] = {{.*}} iter_args({{.*}}, {{.*}}, %[[V:.*]] = %[[LOWEST]], %[[K:.*]] = %{{.*}}) -> (tensor<4x2xf32>, tensor<4x2xi64>, f32, i64)
// CHECK: %[[POS:.*]] = arith.subi %{{.*}}, %[[I]] : index
// CHECK: %[[X:.*]] = tensor.extract %arg0[%[[POS]], %{{.*}}]
// CHECK: %[[AT:.*]] = arith.index_cast %[[POS]] : index to i64
// CHECK: %[[NAN:.*]] = arith.cmpf uno, %[[X]], %[[X]]
// CHECK: %[[GE:.*]] = arith.cmpf oge, %[[X]], %[[V]]
// CHECK: %[[TAKE:.*]] = arith.ori %[[NAN]], %[[GE]]
// CHECK: arith.select %[[TAKE]], %[[X]], %[[V]]
// CHECK: arith.select %[[TAKE]], %[[AT]], %[[K]]
// CHECK: {dg.scan = {combiner = "max", dim = 0 : i64, reverse = true}}
func.func @max_reverse(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xi64>) {
  %0:2 = "dg.scan"(%x) {combiner = "max", dim = 0 : i64, reverse = 1 : i64} : (tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xi64>)
  return %0#0, %0#1 : tensor<4x2xf32>, tensor<4x2xi64>
}

// eager's log-add-exp: the larger plus log1p(exp(-|x - y|)); where the running value is
// infinite, the larger of it and the element (the element where both are the same
// infinity, or it is NaN). The dim of 1 gets no loop.
// CHECK-LABEL: func.func @logaddexp
// CHECK: %[[INIT:.*]] = arith.constant 0xFFF0000000000000 : f64
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[Y:.*]] = %[[INIT]])
// CHECK: %[[X:.*]] = tensor.extract
// CHECK: %[[D:.*]] = arith.subf %[[X]], %[[Y]] : f64
// CHECK: %[[UP:.*]] = arith.cmpf ogt, %[[D]], %{{.*}} : f64
// CHECK: %[[HI:.*]] = arith.select %[[UP]], %[[X]], %[[Y]] : f64
// CHECK: %[[ABS:.*]] = math.absf %[[D]] : f64
// CHECK: %[[GAP:.*]] = arith.negf %[[ABS]] : f64
// CHECK: %[[E:.*]] = math.exp %[[GAP]] : f64
// CHECK: %[[STEP:.*]] = math.log1p %[[E]] : f64
// CHECK: %[[GENERAL:.*]] = arith.addf %[[STEP]], %[[HI]] : f64
// CHECK: %[[ABOVE:.*]] = arith.cmpf ogt, %[[Y]], %[[X]] : f64
// CHECK: %[[AT_INF:.*]] = arith.select %[[ABOVE]], %[[Y]], %[[X]] : f64
// CHECK: %[[ABS_Y:.*]] = math.absf %[[Y]] : f64
// CHECK: %[[INFINITE:.*]] = arith.cmpf oeq, %[[ABS_Y]], %{{.*}} : f64
// CHECK: arith.select %[[INFINITE]], %[[AT_INF]], %[[GENERAL]] : f64
// CHECK: {dg.scan = {combiner = "logaddexp", dim = 1 : i64, reverse = false}}
// CHECK-NEXT: return
func.func @logaddexp(%x: tensor<1x5xf64>) -> tensor<1x5xf64> {
  %0 = "dg.scan"(%x) {combiner = "logaddexp", dim = 1 : i64, reverse = 0 : i64} : (tensor<1x5xf64>) -> tensor<1x5xf64>
  return %0 : tensor<1x5xf64>
}

// f32 log-sum-exps run in f64 (eager's CPU kernel does), each result rounded; the step
// log1p(exp(gap)) stays f32, its rounding relative to the step.
// CHECK-LABEL: func.func @logaddexp_f32
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %[[Y:.*]] = %{{.*}}) -> (tensor<3x5xf32>, f64)
// CHECK: %[[X:.*]] = arith.extf %{{.*}} : f32 to f64
// CHECK: arith.subf %[[X]], %[[Y]] : f64
// CHECK: %[[GAP:.*]] = arith.truncf %{{.*}} : f64 to f32
// CHECK: %[[E:.*]] = math.exp %[[GAP]] : f32
// CHECK: %[[STEP:.*]] = math.log1p %[[E]] : f32
// CHECK: %[[WIDE:.*]] = arith.extf %[[STEP]] : f32 to f64
// CHECK: arith.addf %[[WIDE]], %{{.*}} : f64
// CHECK: %[[INFINITE:.*]] = arith.cmpf oeq
// CHECK: %[[NEW:.*]] = arith.select %[[INFINITE]], %{{.*}}, %{{.*}} : f64
// CHECK: %[[OUT:.*]] = arith.truncf %[[NEW]] : f64 to f32
// CHECK: tensor.insert %[[OUT]]
// CHECK: scf.yield %{{.*}}, %[[NEW]] : tensor<3x5xf32>, f64
func.func @logaddexp_f32(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %0 = "dg.scan"(%x) {combiner = "logaddexp", dim = 1 : i64, reverse = 0 : i64} : (tensor<3x5xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// CHECK-LABEL: func.func @one_element
// CHECK-NOT: scf.for
// CHECK: %[[ZEROS:.*]] = linalg.fill
// CHECK: return %arg0, %[[ZEROS]]
func.func @one_element(%x: tensor<4x1xf32>) -> (tensor<4x1xf32>, tensor<4x1xi64>) {
  %0:2 = "dg.scan"(%x) {combiner = "min", dim = 1 : i64, reverse = 0 : i64} : (tensor<4x1xf32>) -> (tensor<4x1xf32>, tensor<4x1xi64>)
  return %0#0, %0#1 : tensor<4x1xf32>, tensor<4x1xi64>
}

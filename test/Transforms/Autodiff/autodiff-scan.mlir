// Scans' derivatives, as eager's: a sum's cotangent is the reversed running sum of the
// output's; a running max's goes to the element each index names (a scatter_add, so
// the forward saves the indices); a product's is dg.scan_mul_grad (eager's
// cumprod_backward: zeros and NaN included), reading x; logcumsumexp's is eager's
// formula, two reversed log-sum-exp scans of log|g| - y. Forward mode: a running sum
// of the tangent; the tangent at each running extreme's index.
// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s
// RUN: fusegrad-opt %s -p dg-jvp | filecheck %s --check-prefix=JVP

// CHECK-LABEL: func.func @f_fwd(
// CHECK: %[[MAX:.*]]:2 = "dg.scan"(%arg0) {combiner = "max", dim = 1 : i64, reverse = 0 : i64}
// CHECK: return {{.*}}, %arg0, %[[MAX]]#1 :
// CHECK-LABEL: func.func @f_bwd(
// CHECK-SAME: %[[X:[^:]*]]: tensor<3x?xf32, "s0">, %[[INDEX:[^:]*]]: tensor<3x?xi64, "s0">, %[[G0:[^:]*]]: tensor<3x?xf32, "s0">, %[[G1:[^:]*]]: tensor<3x?xf32, "s0">, %[[G3:[^:]*]]: tensor<3x?xf32, "s0">
// CHECK-DAG: "dg.scan_mul_grad"(%[[X]], %[[G3]]) {dim = 0 : i64, reverse = 1 : i64}
// CHECK-DAG: %[[ZEROS:.*]] = "dg.full"() {value = 0.000000e+00 : f64}
// CHECK-DAG: "dg.scatter_add"(%[[ZEROS]], %[[INDEX]], %[[G1]]) {dim = 1 : i64}
// CHECK-DAG: "dg.scan"(%[[G0]]) {combiner = "add", dim = 1 : i64, reverse = 1 : i64}
func.func @f(%x: tensor<3x?xf32, "s0">) -> (tensor<3x?xf32, "s0">, tensor<3x?xf32, "s0">, tensor<3x?xi64, "s0">, tensor<3x?xf32, "s0">) {
  %0 = "dg.scan"(%x) {combiner = "add", dim = 1 : i64, reverse = 0 : i64} : (tensor<3x?xf32, "s0">) -> tensor<3x?xf32, "s0">
  %1:2 = "dg.scan"(%x) {combiner = "max", dim = 1 : i64, reverse = 0 : i64} : (tensor<3x?xf32, "s0">) -> (tensor<3x?xf32, "s0">, tensor<3x?xi64, "s0">)
  %2 = "dg.scan"(%x) {combiner = "mul", dim = 0 : i64, reverse = 1 : i64} : (tensor<3x?xf32, "s0">) -> tensor<3x?xf32, "s0">
  return %0, %1#0, %1#1, %2 : tensor<3x?xf32, "s0">, tensor<3x?xf32, "s0">, tensor<3x?xi64, "s0">, tensor<3x?xf32, "s0">
}

// CHECK-LABEL: func.func @g_bwd(
// CHECK: %[[LOGABS:.*]] = "dg.log"
// CHECK: %[[POS:.*]] = "dg.select"(%{{.*}}, %[[LOGABS]], %{{.*}})
// CHECK: %[[SHIFTED:.*]] = "dg.sub"(%[[POS]], %{{.*}})
// CHECK: "dg.scan"(%[[SHIFTED]]) {combiner = "logaddexp", dim = 1 : i64, reverse = 1 : i64}
// CHECK: "dg.scan"(%{{.*}}) {combiner = "logaddexp", dim = 1 : i64, reverse = 1 : i64}
// CHECK: "dg.sub"

// JVP-LABEL: func.func @f_jvp(%arg0: tensor<3x?xf32, "s0">, %arg1: tensor<3x?xf32, "s0">)
// JVP: "dg.scan"(%arg1) {combiner = "add", dim = 1 : i64, reverse = 0 : i64}
// JVP: %[[MAX:.*]]:2 = "dg.scan"(%arg0) {combiner = "max", dim = 1 : i64, reverse = 0 : i64}
// JVP: "dg.gather"(%arg1, %[[MAX]]#1) {dim = 1 : i64}
func.func @g(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = "dg.scan"(%x) {combiner = "logaddexp", dim = 1 : i64, reverse = 0 : i64} : (tensor<3x4xf64>) -> tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

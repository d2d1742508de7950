// Elementwise dg ops become one all-parallel linalg.generic whose body is the
// op's scalar rule.
// RUN: fusegrad-opt %s -p dg-lower-to-linalg | filecheck %s

// CHECK-LABEL: func.func @binary
// CHECK: %[[E:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]{{.*}} ins(%arg0, %arg1 : tensor<2x3xf32>, tensor<2x3xf32>) outs(%[[E]] : tensor<2x3xf32>)
// CHECK: arith.maximumf
// CHECK: linalg.yield
// CHECK-NOT: dg.
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "dg.max"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @ints
// CHECK: arith.divsi
// CHECK: arith.maxsi
// CHECK: math.ipowi
func.func @ints(%a: tensor<4xi32>, %b: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
  %0 = "dg.div"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %1 = "dg.max"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %2 = "dg.pow"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  return %0, %1, %2 : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
}

// `ne` is unordered (true on NaN, like torch); the others are ordered.
// CHECK-LABEL: func.func @compare
// CHECK: arith.cmpf une
// CHECK: arith.cmpf olt
// CHECK: arith.select
func.func @compare(%a: tensor<f32>, %b: tensor<f32>) -> (tensor<i1>, tensor<f32>) {
  %0 = "dg.compare"(%a, %b) {direction = "ne"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %1 = "dg.compare"(%a, %b) {direction = "lt"} : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %2 = "dg.select"(%1, %a, %b) : (tensor<i1>, tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0, %2 : tensor<i1>, tensor<f32>
}

// CHECK-LABEL: func.func @convert
// CHECK: arith.sitofp {{.*}} : i64 to f32
// CHECK: arith.cmpf une
// CHECK: arith.extui {{.*}} : i1 to i64
// CHECK: arith.fptosi {{.*}} : f32 to i32
func.func @convert(%a: tensor<3xi64>, %b: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xi64>, tensor<3xi32>) {
  %0 = "dg.convert"(%a) : (tensor<3xi64>) -> tensor<3xf32>
  %1 = "dg.convert"(%b) : (tensor<3xf32>) -> tensor<3xi1>
  %2 = "dg.convert"(%1) : (tensor<3xi1>) -> tensor<3xi64>
  %3 = "dg.convert"(%b) : (tensor<3xf32>) -> tensor<3xi32>
  return %0, %2, %3 : tensor<3xf32>, tensor<3xi64>, tensor<3xi32>
}

// CHECK-LABEL: func.func @unary
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: arith.divf
// CHECK: math.roundeven
func.func @unary(%a: tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>) {
  %0 = "dg.sigmoid"(%a) : (tensor<2xf64>) -> tensor<2xf64>
  %1 = "dg.round"(%a) : (tensor<2xf64>) -> tensor<2xf64>
  return %0, %1 : tensor<2xf64>, tensor<2xf64>
}

// Inverse trigonometric and hyperbolic functions, erfc and exp2 are math ops (libm on
// the CPU, libdevice on CUDA); atan2 takes (y, x) in that order.
// CHECK-LABEL: func.func @inverse_and_hyperbolic
// CHECK: math.acosh
// CHECK: math.erfc
// CHECK: math.exp2
// CHECK: math.atan2 %{{.*}}, %{{.*}} : f32
func.func @inverse_and_hyperbolic(%y: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = "dg.acosh"(%y) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "dg.erfc"(%y) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "dg.exp2"(%y) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "dg.atan2"(%y, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

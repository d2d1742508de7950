// Round trip: every pointwise op (unary, binary, compare, select, convert) parses, verifies and prints back unchanged.
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @float_unary(
// CHECK-NEXT: %0 = "dg.neg"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %1 = "dg.abs"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %2 = "dg.exp"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %3 = "dg.log"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %4 = "dg.log1p"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %5 = "dg.expm1"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %6 = "dg.sqrt"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %7 = "dg.rsqrt"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %8 = "dg.tanh"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %9 = "dg.sigmoid"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %10 = "dg.erf"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %11 = "dg.sin"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %12 = "dg.cos"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %13 = "dg.reciprocal"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %14 = "dg.sign"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %15 = "dg.floor"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %16 = "dg.ceil"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %17 = "dg.round"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
func.func @float_unary(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %0 = "dg.neg"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "dg.abs"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "dg.exp"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = "dg.log"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = "dg.log1p"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "dg.expm1"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = "dg.sqrt"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = "dg.rsqrt"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %8 = "dg.tanh"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %9 = "dg.sigmoid"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %10 = "dg.erf"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %11 = "dg.sin"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %12 = "dg.cos"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %13 = "dg.reciprocal"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %14 = "dg.sign"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %15 = "dg.floor"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %16 = "dg.ceil"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %17 = "dg.round"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// CHECK-LABEL: func.func @int_unary(
// CHECK-NEXT: %0 = "dg.neg"(%arg0) : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %1 = "dg.abs"(%arg0) : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %2 = "dg.sign"(%arg0) : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %3 = "dg.not"(%arg0) : (tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %4 = "dg.not"(%arg1) : (tensor<2x3xi1>) -> tensor<2x3xi1>
// CHECK-NEXT: return %0, %1, %2, %3, %4 : tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi1>
func.func @int_unary(%arg0: tensor<2x3xi32>, %arg1: tensor<2x3xi1>) -> (tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi1>) {
  %0 = "dg.neg"(%arg0) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %1 = "dg.abs"(%arg0) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %2 = "dg.sign"(%arg0) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %3 = "dg.not"(%arg0) : (tensor<2x3xi32>) -> tensor<2x3xi32>
  %4 = "dg.not"(%arg1) : (tensor<2x3xi1>) -> tensor<2x3xi1>
  return %0, %1, %2, %3, %4 : tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi32>, tensor<2x3xi1>
}

// CHECK-LABEL: func.func @binary(
// CHECK-NEXT: %0 = "dg.add"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %1 = "dg.sub"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %2 = "dg.mul"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %3 = "dg.div"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %4 = "dg.pow"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %5 = "dg.max"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %6 = "dg.min"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %7 = "dg.and"(%arg2, %arg3) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: %8 = "dg.or"(%arg2, %arg3) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
// CHECK-NEXT: return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xi32>
func.func @binary(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>, %arg2: tensor<2x3xi32>, %arg3: tensor<2x3xi32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xi32>) {
  %0 = "dg.add"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "dg.sub"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "dg.mul"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = "dg.div"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = "dg.pow"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "dg.max"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = "dg.min"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = "dg.and"(%arg2, %arg3) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  %8 = "dg.or"(%arg2, %arg3) : (tensor<2x3xi32>, tensor<2x3xi32>) -> tensor<2x3xi32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xi32>
}

// CHECK-LABEL: func.func @compare_select_convert(
// CHECK-NEXT: %0 = "dg.compare"(%arg0, %arg1) {direction = "lt"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: %1 = "dg.select"(%0, %arg0, %arg1) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %2 = "dg.convert"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xi32>
// CHECK-NEXT: %3 = "dg.convert"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xbf16>
// CHECK-NEXT: return %0, %1, %2, %3 : tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xbf16>
func.func @compare_select_convert(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xbf16>) {
  %0 = "dg.compare"(%arg0, %arg1) {direction = "lt"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %1 = "dg.select"(%0, %arg0, %arg1) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "dg.convert"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xi32>
  %3 = "dg.convert"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xbf16>
  return %0, %1, %2, %3 : tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3xbf16>
}

// CHECK-LABEL: func.func @stop_gradient(
// CHECK-NEXT: %0 = "dg.stop_gradient"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @stop_gradient(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "dg.stop_gradient"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @inverse_and_hyperbolic(
// CHECK-NEXT: "dg.atan"(%arg0)
// CHECK-NEXT: "dg.asin"(%arg0)
// CHECK-NEXT: "dg.acos"(%arg0)
// CHECK-NEXT: "dg.sinh"(%arg0)
// CHECK-NEXT: "dg.cosh"(%arg0)
// CHECK-NEXT: "dg.asinh"(%arg0)
// CHECK-NEXT: "dg.acosh"(%arg0)
// CHECK-NEXT: "dg.atanh"(%arg0)
// CHECK-NEXT: "dg.erfc"(%arg0)
// CHECK-NEXT: "dg.exp2"(%arg0)
// CHECK-NEXT: "dg.atan2"(%arg0, %arg0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
func.func @inverse_and_hyperbolic(%arg0: tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>) {
  %0 = "dg.atan"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %1 = "dg.asin"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %2 = "dg.acos"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %3 = "dg.sinh"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %4 = "dg.cosh"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %5 = "dg.asinh"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %6 = "dg.acosh"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %7 = "dg.atanh"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %8 = "dg.erfc"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %9 = "dg.exp2"(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
  %10 = "dg.atan2"(%arg0, %arg0) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2xf64>
}

// dg-expand-math: f32 transcendentals become inline arith (no libm call, so
// the loop around them vectorizes), on scalars and vectors alike; powf with a
// constant exponent becomes multiplications; f64 and a general powf are kept.
// RUN: fusegrad-opt %s -p 'dg-expand-math' | filecheck %s

// CHECK-LABEL: func.func @unary(
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK-NOT: math.erf
// CHECK-NOT: math.log
// CHECK-NOT: math.sin
// CHECK: math.roundeven
// CHECK: arith.bitcast
// CHECK: return
func.func @unary(%x: f32) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
  %0 = math.exp %x : f32
  %1 = math.expm1 %x : f32
  %2 = math.log %x : f32
  %3 = math.log1p %x : f32
  %4 = math.tanh %x : f32
  %5 = math.erf %x : f32
  %6 = math.sin %x : f32
  %7 = math.cos %x : f32
  return %0, %1, %2, %3, %4, %5, %6, %7 : f32, f32, f32, f32, f32, f32, f32, f32
}

// CHECK-LABEL: func.func @vector(
// CHECK-NOT: math.exp
// CHECK: arith.bitcast {{.*}} : vector<16xi32> to vector<16xf32>
func.func @vector(%x: vector<16xf32>) -> vector<16xf32> {
  %0 = math.exp %x : vector<16xf32>
  return %0 : vector<16xf32>
}

// CHECK-LABEL: func.func @pow(
// CHECK: %[[SQ:.*]] = arith.mulf %arg0, %arg0 : f32
// CHECK: math.powf %arg0, %arg1 : f32
// CHECK: math.exp %arg2 : f64
func.func @pow(%x: f32, %y: f32, %z: f64) -> (f32, f32, f64) {
  %two = arith.constant 2.0 : f32
  %0 = math.powf %x, %two : f32
  %1 = math.powf %x, %y : f32
  %2 = math.exp %z : f64
  return %0, %1, %2 : f32, f32, f64
}

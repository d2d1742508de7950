// Round trip: dg.fusion, whose body block takes the operands and ends in gpu.yield.
// (IRDL binds one type per variadic operand group, so all operands share one
// type and all results share one type; see the Status section of README.md.)
// RUN: fusegrad-opt %s | fusegrad-opt | filecheck %s

// CHECK-LABEL: func.func @fused(
// CHECK-NEXT: %0:2 = "dg.fusion"(%arg0, %arg1) ({
// CHECK-NEXT: ^bb0(%arg2: tensor<4xf32>, %arg3: tensor<4xf32>):
// CHECK-NEXT: %1 = "dg.add"(%arg2, %arg3) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %2 = "dg.exp"(%1) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: gpu.yield %1, %2 : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT: }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
func.func @fused(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r:2 = "dg.fusion"(%a, %b) ({
  ^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
    %s = "dg.add"(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %e = "dg.exp"(%s) : (tensor<4xf32>) -> tensor<4xf32>
    "gpu.yield"(%s, %e) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}

// A fusion without operands or results (a side-effect-free empty kernel).
// CHECK-LABEL: func.func @empty(
// CHECK-NEXT: "dg.fusion"() ({
// CHECK-NEXT: gpu.yield
// CHECK-NEXT: }) : () -> ()
func.func @empty() {
  "dg.fusion"() ({
    "gpu.yield"() : () -> ()
  }) : () -> ()
  return
}

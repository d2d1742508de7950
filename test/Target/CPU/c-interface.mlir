// dg-c-interface gives each entry a C interface, the way the CPU runtime calls it;
// private functions get none.
// RUN: fusegrad-opt %s -p dg-c-interface | filecheck %s

// CHECK: func.func @f({{.*}}) -> tensor<4xf32> attributes {llvm.emit_c_interface}
// CHECK: func.func private @g({{.*}}) -> tensor<4xf32> {
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @g(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @g(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

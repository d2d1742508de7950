// RUN: fusegrad-opt %s -p 'dg-autodiff{joint=true wrt=1}' | filecheck %s

// joint=true emits one function (inputs, cotangents) -> (outputs, grads) for
// double backward; wrt=1 differentiates the second input only.
// CHECK-LABEL: func.func @f(
// CHECK-SAME: dg.differentiated
// CHECK-NOT:  @f_fwd
// CHECK-LABEL: func.func @f_vjp(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>, %arg2: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
// CHECK-SAME: dg.ct_outputs = array<i64: 0>
// CHECK-SAME: dg.num_outputs = 1
// CHECK-SAME: dg.wrt = array<i64: 1>
// CHECK-NEXT: %[[Y:.*]] = "dg.div"(%arg0, %arg1)
// CHECK:      return %[[Y]], %{{.*}} : tensor<3xf32>, tensor<3xf32>
// CHECK-NOT:  @f_bwd
func.func @f(%x: tensor<3xf32>, %y: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "dg.div"(%x, %y) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

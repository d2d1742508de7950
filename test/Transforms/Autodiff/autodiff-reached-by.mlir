// RUN: fusegrad-opt %s -p dg-autodiff | filecheck %s
// RUN: fusegrad-opt %s -p 'dg-autodiff{joint=true ct_outputs=1}' | filecheck %s --check-prefix=JOINT

// dg.reached_by lists, per wrt input, the outputs whose cotangents reach its
// gradient: %w reaches output 1 only through a detach (dg.stop_gradient), so not
// at all; %u reaches no output. The runtime gives such inputs None, as eager does.
// CHECK-LABEL: func.func @f_bwd(
// CHECK-SAME: dg.ct_outputs = array<i64: 0, 1>
// CHECK-SAME: dg.reached_by = [array<i64: 0>, array<i64: 0>, array<i64: 1>, array<i64>]
// CHECK-SAME: dg.wrt = array<i64: 0, 1, 2, 3>

// ct_outputs=1: a joint whose output 0 takes no cotangent (eager builds no backward
// terms for it), so %x and %w get zeros and reach nothing.
// JOINT-LABEL: func.func @f_vjp(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>, %arg2: tensor<3xf32>, %arg3: tensor<3xf32>, %arg4: tensor<3xf32>)
// JOINT-SAME: dg.ct_outputs = array<i64: 1>
// JOINT-SAME: dg.reached_by = [array<i64>, array<i64>, array<i64: 1>, array<i64>]
// JOINT-NOT:  "dg.mul"(%arg4, %arg0)
func.func @f(%x: tensor<3xf32>, %w: tensor<3xf32>, %v: tensor<3xf32>, %u: tensor<3xf32>)
    -> (tensor<3xf32>, tensor<3xf32>) {
  %0 = "dg.mul"(%x, %w) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = "dg.stop_gradient"(%w) : (tensor<3xf32>) -> tensor<3xf32>
  %2 = "dg.mul"(%1, %v) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0, %2 : tensor<3xf32>, tensor<3xf32>
}

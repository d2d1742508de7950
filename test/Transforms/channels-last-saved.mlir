// dg-channels-last on a forward/backward pair: the values @f_fwd saves for @f_bwd keep
// their channels-last layout across the boundary (the saved relu mask and the input
// as @f_fwd made it), with no transpose on either side; the gradients are the NHWC
// twins, and what each function returns to its caller is NCHW.
// RUN: fusegrad-opt %s -p dg-autodiff,dg-remat,dg-channels-last | filecheck %s

// CHECK-LABEL: func.func @f_fwd(
// CHECK: %[[Y:.*]] = "dg.conv2d_nhwc"
// CHECK: %[[MASK:.*]] = "dg.compare"({{.*}}) {direction = "gt"} : (tensor<2x6x6x4xf32>, tensor<2x6x6x4xf32>) -> tensor<2x6x6x4xi1>
// CHECK: return {{.*}} : tensor<f32>, {{.*}}tensor<2x6x6x4xi1>
// CHECK-LABEL: func.func @f_bwd(
// CHECK-SAME: tensor<2x6x6x4xi1>
// CHECK-NOT: "dg.conv2d"(
// CHECK: "dg.conv2d_nhwc_weight_grad"
// CHECK-SAME: -> tensor<4x3x3x3xf32>
func.func @f(%x: tensor<2x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<f32> {
  %y = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %z = "dg.full"() {value = 0.0 : f64} : () -> tensor<2x4x6x6xf32>
  %m = "dg.compare"(%y, %z) {direction = "gt"} : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xi1>
  %r = "dg.select"(%m, %y, %z) : (tensor<2x4x6x6xi1>, tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<2x4x6x6xf32>
  %s = "dg.reduce_sum"(%r) {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x4x6x6xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

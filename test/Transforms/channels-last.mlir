// dg-channels-last: an ungrouped f32 convolution (activations outweighing its weight) becomes dg.conv2d_nhwc, and the ops
// after it compute channels-last too, their attributes remapped (channel dim 1 -> last):
// the bias broadcast's dims, the relu (a dg.full re-emitted in the new shape), the
// batch-norm-like sum over (n, h, w), the strided slice of a max-pool. The input is
// transposed once; what the function returns and what a non-transparent op reads (the
// flattening reshape) are transposed back, right after the value is made.
// RUN: fusegrad-opt %s -p dg-channels-last | filecheck %s

// CHECK-LABEL: func.func @forward(
// CHECK-NEXT: %[[X:.*]] = "dg.transpose"(%arg0) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x3x8x8xf32>) -> tensor<2x8x8x3xf32>
// CHECK-NEXT: %[[Y:.*]] = "dg.conv2d_nhwc"(%[[X]], %arg1) {{.*}} : (tensor<2x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[B:.*]] = "dg.broadcast_in_dim"(%arg2) {dims = array<i64: 3>} : (tensor<4xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[A:.*]] = "dg.add"(%[[Y]], %[[B]]) : (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[Z:.*]] = "dg.full"() {value = 0.000000e+00 : f64} : () -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[R:.*]] = "dg.max"(%[[A]], %[[Z]]) : (tensor<2x8x8x4xf32>, tensor<2x8x8x4xf32>) -> tensor<2x8x8x4xf32>
// CHECK-NEXT: %[[RB:.*]] = "dg.transpose"(%[[R]]) {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x8x8x4xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[S:.*]] = "dg.reduce_sum"(%[[R]]) {dims = array<i64: 0, 1, 2>} : (tensor<2x8x8x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[P:.*]] = "dg.slice"(%[[R]]) {limit = array<i64: 2, 8, 8, 4>, start = array<i64: 0, 0, 1, 0>, stride = array<i64: 1, 2, 2, 1>} : (tensor<2x8x8x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK-NEXT: %[[PB:.*]] = "dg.transpose"(%[[P]]) {perm = array<i64: 0, 3, 1, 2>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK-NEXT: %[[F:.*]] = "dg.reshape"(%[[PB]]) : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
// CHECK-NEXT: return %[[RB]], %[[S]], %[[F]] : tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<2x64xf32>
func.func @forward(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %bias: tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<2x64xf32>) {
  %y = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %b = "dg.broadcast_in_dim"(%bias) {dims = array<i64: 1>} : (tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %a = "dg.add"(%y, %b) : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %z = "dg.full"() {value = 0.0 : f64} : () -> tensor<2x4x8x8xf32>
  %r = "dg.max"(%a, %z) : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s = "dg.reduce_sum"(%r) {dims = array<i64: 0, 2, 3>} : (tensor<2x4x8x8xf32>) -> tensor<4xf32>
  %p = "dg.slice"(%r) {start = array<i64: 0, 0, 0, 1>, limit = array<i64: 2, 4, 8, 8>, stride = array<i64: 1, 1, 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %f = "dg.reshape"(%p) : (tensor<2x4x4x4xf32>) -> tensor<2x64xf32>
  return %r, %s, %f : tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<2x64xf32>
}

// A reshape that keeps the channel dim whole stays channels-last (the max-pool
// gradient's interleaving), and so does a concatenation; a transpose composes with the
// layout (here to nothing: x.permute(0, 2, 3, 1) of a channels-last value is that value).
// CHECK-LABEL: func.func @views(
// CHECK: %[[Y:.*]] = "dg.conv2d_nhwc"
// CHECK-NEXT: %[[E:.*]] = "dg.reshape"(%[[Y]]) : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x1x4xf32>
// CHECK-NEXT: %[[C:.*]] = "dg.concatenate"(%[[E]], %[[E]]) {dim = 3 : i64} : (tensor<2x4x4x1x4xf32>, tensor<2x4x4x1x4xf32>) -> tensor<2x4x4x2x4xf32>
// CHECK-NEXT: %[[M:.*]] = "dg.reshape"(%[[C]]) : (tensor<2x4x4x2x4xf32>) -> tensor<2x4x8x4xf32>
// CHECK-NEXT: %[[MB:.*]] = "dg.transpose"(%[[M]]) {perm = array<i64: 0, 3, 1, 2>}
// CHECK-NEXT: return %[[MB]], %[[Y]] : tensor<2x4x4x8xf32>, tensor<2x4x4x4xf32>
func.func @views(%x: tensor<2x3x4x4xf32>, %w: tensor<4x3x3x3xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x4x4xf32>) {
  %y = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  %e = "dg.reshape"(%y) : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4x1xf32>
  %c = "dg.concatenate"(%e, %e) {dim = 4 : i64} : (tensor<2x4x4x4x1xf32>, tensor<2x4x4x4x1xf32>) -> tensor<2x4x4x4x2xf32>
  %m = "dg.reshape"(%c) : (tensor<2x4x4x4x2xf32>) -> tensor<2x4x4x8xf32>
  %t = "dg.transpose"(%y) {perm = array<i64: 0, 2, 3, 1>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  return %m, %t : tensor<2x4x4x8xf32>, tensor<2x4x4x4xf32>
}

// Grouped (depthwise) convolutions go channels-last too; convolutions of other dtypes
// than f32/f64 (no library call takes them) are left alone.
// CHECK-LABEL: func.func @grouped(
// CHECK: "dg.conv2d_nhwc"({{.*}}) {{{.*}}groups = 4 : i64{{.*}}} : (tensor<2x8x8x4xf32>, tensor<4x1x3x3xf32>) -> tensor<2x8x8x4xf32>
// CHECK-LABEL: func.func @half(
// CHECK-NOT: dg.transpose
// CHECK: "dg.conv2d"
func.func @grouped(%x: tensor<2x4x8x8xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %y = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 4 : i64} : (tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %y : tensor<2x4x8x8xf32>
}

func.func @half(%x: tensor<2x4x8x8xf16>, %w: tensor<4x4x3x3xf16>) -> tensor<2x4x8x8xf16> {
  %y = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x8x8xf16>, tensor<4x4x3x3xf16>) -> tensor<2x4x8x8xf16>
  return %y : tensor<2x4x8x8xf16>
}

// A convolution whose weight outweighs its activations (a ResNet's last stage on small
// images) stays NCHW: oneDNN would convert the weight to channels-last on every call.
// CHECK-LABEL: func.func @heavy_weight(
// CHECK-NOT: dg.transpose
// CHECK: "dg.conv2d"
// CHECK-NOT: dg.conv2d_nhwc
func.func @heavy_weight(%x: tensor<2x64x2x2xf32>, %w: tensor<64x64x3x3xf32>) -> tensor<2x64x2x2xf32> {
  %y = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x64x2x2xf32>, tensor<64x64x3x3xf32>) -> tensor<2x64x2x2xf32>
  return %y : tensor<2x64x2x2xf32>
}

// A 3-d convolution's layout changes around its 2-d one ([n*d, c, h, w] viewed as
// [n, d, c, h, w], transposed to [n, c, d, h, w] for the ops between, and back for the
// next convolution) are each the channels-last value itself: nothing is transposed
// between the two convolutions.
// CHECK-LABEL: func.func @volume(
// CHECK: %[[Y:.*]] = "dg.conv2d_nhwc"
// CHECK-NOT: dg.transpose
// CHECK: "dg.conv2d_nhwc"
func.func @volume(%x: tensor<4x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %w2: tensor<4x4x3x3xf32>) -> tensor<4x4x8x8xf32> {
  %y = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<4x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<4x4x8x8xf32>
  %v = "dg.reshape"(%y) : (tensor<4x4x8x8xf32>) -> tensor<2x2x4x8x8xf32>
  %t = "dg.transpose"(%v) {perm = array<i64: 0, 2, 1, 3, 4>} : (tensor<2x2x4x8x8xf32>) -> tensor<2x4x2x8x8xf32>
  %z = "dg.full"() {value = 0.0 : f64} : () -> tensor<2x4x2x8x8xf32>
  %r = "dg.max"(%t, %z) : (tensor<2x4x2x8x8xf32>, tensor<2x4x2x8x8xf32>) -> tensor<2x4x2x8x8xf32>
  %b = "dg.transpose"(%r) {perm = array<i64: 0, 2, 1, 3, 4>} : (tensor<2x4x2x8x8xf32>) -> tensor<2x2x4x8x8xf32>
  %f = "dg.reshape"(%b) : (tensor<2x2x4x8x8xf32>) -> tensor<4x4x8x8xf32>
  %y2 = "dg.conv2d"(%f, %w2) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<4x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<4x4x8x8xf32>
  return %y2 : tensor<4x4x8x8xf32>
}

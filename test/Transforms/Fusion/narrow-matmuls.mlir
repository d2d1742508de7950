// RUN: fusegrad-opt %s -p dg-narrow-matmuls | filecheck %s

// A linear layer's product as PyTorch's bf16 addmm decomposition writes it (operands
// widened to f32, the product rounded back): the matmul runs on the bf16 operands, the
// transposed weight transposed in bf16.
// CHECK-LABEL: func.func @widened(
// CHECK-NEXT: %[[WT:.*]] = "dg.transpose"(%arg1) {perm = array<i64: 1, 0>} : (tensor<16x8xbf16>) -> tensor<8x16xbf16>
// CHECK-NEXT: %[[P:.*]] = "dg.matmul"(%arg0, %[[WT]]) : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: return %[[P]]
func.func @widened(%x: tensor<4x8xbf16>, %w: tensor<16x8xbf16>) -> tensor<4x16xbf16> {
  %0 = "dg.convert"(%x) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %1 = "dg.convert"(%w) : (tensor<16x8xbf16>) -> tensor<16x8xf32>
  %2 = "dg.transpose"(%1) {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %3 = "dg.matmul"(%0, %2) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %4 = "dg.convert"(%3) : (tensor<4x16xf32>) -> tensor<4x16xbf16>
  return %4 : tensor<4x16xbf16>
}

// A widened bf16 bias added before the rounding: the bias, broadcast in bf16, is the
// product's accumulator (dg.matmul_add, rounded once as eager's addmm).
// CHECK-LABEL: func.func @bias(
// CHECK-NEXT: %[[B:.*]] = "dg.broadcast_in_dim"(%arg2) {dims = array<i64: 1>} : (tensor<16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: %[[Y:.*]] = "dg.matmul_add"(%arg0, %arg1, %[[B]]) : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<4x16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: return %[[Y]]
func.func @bias(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<16xbf16>) -> tensor<4x16xbf16> {
  %0 = "dg.convert"(%x) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %1 = "dg.convert"(%w) : (tensor<8x16xbf16>) -> tensor<8x16xf32>
  %2 = "dg.matmul"(%0, %1) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %3 = "dg.convert"(%b) : (tensor<16xbf16>) -> tensor<16xf32>
  %4 = "dg.broadcast_in_dim"(%3) {dims = array<i64: 1>} : (tensor<16xf32>) -> tensor<4x16xf32>
  %5 = "dg.add"(%2, %4) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %6 = "dg.convert"(%5) : (tensor<4x16xf32>) -> tensor<4x16xbf16>
  return %6 : tensor<4x16xbf16>
}

// A product read in f32 (an f32 value added before rounding), or of an operand that is
// not a widened bf16 value, stays in f32.
// CHECK-LABEL: func.func @read_in_f32(
// CHECK: "dg.matmul"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-LABEL: func.func @f32_operand(
// CHECK: "dg.matmul"(%{{.*}}, %arg1) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
func.func @read_in_f32(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>, %b: tensor<4x16xf32>) -> tensor<4x16xbf16> {
  %0 = "dg.convert"(%x) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %1 = "dg.convert"(%w) : (tensor<8x16xbf16>) -> tensor<8x16xf32>
  %2 = "dg.matmul"(%0, %1) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %3 = "dg.add"(%2, %b) : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %4 = "dg.convert"(%3) : (tensor<4x16xf32>) -> tensor<4x16xbf16>
  return %4 : tensor<4x16xbf16>
}
func.func @f32_operand(%x: tensor<4x8xbf16>, %w: tensor<8x16xf32>) -> tensor<4x16xbf16> {
  %0 = "dg.convert"(%x) : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %1 = "dg.matmul"(%0, %w) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %2 = "dg.convert"(%1) : (tensor<4x16xf32>) -> tensor<4x16xbf16>
  return %2 : tensor<4x16xbf16>
}

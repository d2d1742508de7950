// dg-sink-to-uses: an op that only feeds the outputs (a weight's gradient, and the
// transpose of its operand) moves up to just after its last input, so the activation it
// reads dies at once; a recomputed activation (a fusion region, whose body reads %big
// from above) moves down to just before its first use; a sum of a big tensor that
// something before its use also reads stays next to it (moving it would keep the big
// one alive longer).
// RUN: fusegrad-opt %s -p dg-sink-to-uses | filecheck %s

// CHECK-LABEL: func.func @backward(
// CHECK-NEXT: %[[H:.*]] = "dg.tanh"(%arg0)
// CHECK-NEXT: %[[HT:.*]] = "dg.transpose"(%[[H]])
// CHECK-NEXT: %[[DW:.*]] = "dg.matmul"(%[[HT]], %arg1)
// CHECK-NEXT: %[[E:.*]] = "dg.exp"(%arg2)
// CHECK-NEXT: %[[ES:.*]] = "dg.slice"(%[[E]])
// CHECK-NEXT: %[[S:.*]] = "dg.reduce_sum"(%[[E]])
// CHECK-NEXT: %[[D1:.*]] = "dg.matmul"(%arg1, %arg3)
// CHECK-NEXT: %[[A:.*]] = "dg.add"(%[[ES]], %[[D1]])
// CHECK-NEXT: %[[R:.*]] = scf.execute_region
// CHECK: "dg.log"(%arg2)
// CHECK: } {dg.fusion}
// CHECK-NEXT: %[[RS:.*]] = "dg.slice"(%[[R]])
// CHECK-NEXT: %[[D2:.*]] = "dg.mul"(%[[RS]], %[[A]])
// CHECK-NEXT: %[[SB:.*]] = "dg.broadcast_in_dim"(%[[S]])
// CHECK-NEXT: %[[D3:.*]] = "dg.mul"(%[[D2]], %[[SB]])
// CHECK-NEXT: return %[[DW]], %[[D3]]
func.func @backward(%x: tensor<64x32xf32>, %dy: tensor<64x32xf32>, %big: tensor<64x256xf32>, %w: tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<64x32xf32>) {
  %h = "dg.tanh"(%x) : (tensor<64x32xf32>) -> tensor<64x32xf32>
  %r = scf.execute_region -> tensor<64x256xf32> no_inline {
    %q = "dg.log"(%big) : (tensor<64x256xf32>) -> tensor<64x256xf32>
    scf.yield %q : tensor<64x256xf32>
  } {dg.fusion}
  %e = "dg.exp"(%big) : (tensor<64x256xf32>) -> tensor<64x256xf32>
  %es = "dg.slice"(%e) {start = array<i64: 0, 0>, limit = array<i64: 64, 32>, stride = array<i64: 1, 1>} : (tensor<64x256xf32>) -> tensor<64x32xf32>
  %s = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<64x256xf32>) -> tensor<64xf32>
  %d1 = "dg.matmul"(%dy, %w) : (tensor<64x32xf32>, tensor<32x32xf32>) -> tensor<64x32xf32>
  %a = "dg.add"(%es, %d1) : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %rs = "dg.slice"(%r) {start = array<i64: 0, 0>, limit = array<i64: 64, 32>, stride = array<i64: 1, 1>} : (tensor<64x256xf32>) -> tensor<64x32xf32>
  %d2 = "dg.mul"(%rs, %a) : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %sb = "dg.broadcast_in_dim"(%s) {dims = array<i64: 0>} : (tensor<64xf32>) -> tensor<64x32xf32>
  %d3 = "dg.mul"(%d2, %sb) : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %ht = "dg.transpose"(%h) {perm = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  %dw = "dg.matmul"(%ht, %dy) : (tensor<32x64xf32>, tensor<64x32xf32>) -> tensor<32x32xf32>
  return %dw, %d3 : tensor<32x32xf32>, tensor<64x32xf32>
}

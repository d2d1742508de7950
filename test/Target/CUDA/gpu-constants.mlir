// A dense constant the kernels read is a constant memref.global on the host side: the
// launch plan carries its data (row-major bytes, saved as <name>.bin) and binds it with a
// `constant` step; the runtime uploads it once per program.
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse | filecheck %s

// CHECK-LABEL: func @scale
// CHECK-NEXT: constant buf="[[C:t[0-9]+]]" name="[[NAME:__constant_[0-9a-z_]+]]"
// CHECK-NEXT: launch {{.*}} ({{.*}}[[C]]{{.*}})
// CHECK: constant [[NAME]]: 3 f32

func.func @scale(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %c = "dg.constant"() {value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>} : () -> tensor<3xf32>
  %b = "dg.broadcast_in_dim"(%c) {shape = array<i64: 4, 3>, dims = array<i64: 1>} : (tensor<3xf32>) -> tensor<4x3xf32>
  %0 = "dg.mul"(%x, %b) : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

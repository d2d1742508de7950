// A result that is an argument (a forward saving its input or a parameter for the
// backward) is not copied into an out-param: the plan forwards the input, as the CPU
// runtime does. HF GPT-2's training forward copied its 28 parameters every step.
// RUN: %python -m fusegrad.codegen.cuda.compile %s | filecheck %s

// CHECK: func @f_fwd (4x8 f32, 8 f32) -> (4x8 f32, 8 f32, 4x8 f32)
// CHECK-NEXT: result 1 is arg1
// CHECK-NEXT: result 2 is arg0
// CHECK-NOT: copy
// CHECK: launch {{.*}} (arg1, arg2)
// CHECK-NOT: arg3
// CHECK: module
func.func @f_fwd(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) {
  %b = "dg.broadcast_in_dim"(%w) {dims = array<i64: 1>} : (tensor<8xf32>) -> tensor<4x8xf32>
  %y = "dg.mul"(%x, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y, %w, %x : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>
}

// dg-matmul-to-blas: contiguous f32/f64 matmuls on memrefs call BLAS gemm
// through one helper per dtype; integer matmuls (generic contractions since
// dg-lower-to-linalg) keep their loops. Transposed
// operands are read in place through the transpose flags ('T' = 84, 'N' = 78),
// and a transposed result is computed directly (beta = 0): no transpose copy.
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize,dg-matmul-to-blas' | filecheck %s

// CHECK-LABEL: func.func @mm(
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: call @__fusegrad_gemm_f32({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i32, i32, i8, i8, i32, i32, f32) -> ()
// CHECK-NOT: linalg.matmul
// CHECK-LABEL: func.func @bmm64(
// CHECK: call @__fusegrad_gemm_f64
// CHECK-LABEL: func.func @imm(
// CHECK-NOT: call @__fusegrad_gemm
// CHECK: linalg.generic {{.*}}"reduction"
// CHECK-LABEL: func.func @linear(
// CHECK-NOT: linalg.transpose
// CHECK: call @__fusegrad_gemm_f32(%{{.*}}, %{{.*}}, %{{.*}}, %c1_i32, %c4_i32, %c6_i32, %c5_i32, %c78_i8, %c84_i8,
// CHECK-NOT: linalg.transpose
// CHECK-LABEL: func.func @transposed_result(
// CHECK-NOT: linalg.
// CHECK: call @__fusegrad_gemm_f32({{.*}}, %cst{{.*}}) :
// CHECK-NOT: linalg.
// Outputs zeroed only to be accumulated into are overwritten (beta = 0) instead: no
// fill, and no copy of the one zero-filled buffer CSE shares between matmuls.
// CHECK-LABEL: func.func @shared_zero_init(
// CHECK-NOT: linalg.fill
// CHECK-NOT: memref.copy
// CHECK: %[[Z1:cst_[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: call @__fusegrad_gemm_f32({{.*}}, %[[Z1]]) :
// CHECK-NOT: linalg.fill
// CHECK-NOT: memref.copy
// CHECK: %[[Z2:cst_[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: call @__fusegrad_gemm_f32({{.*}}, %[[Z2]]) :
// CHECK-NOT: memref.copy
// CHECK: return
// Operands of 2^31 elements or more do not fit gemm's 32-bit sizes: the matmul keeps
// its loops (64-bit indices) rather than calling BLAS with wrapped-around sizes.
// CHECK-LABEL: func.func @huge(
// CHECK: linalg.matmul
// CHECK-DAG: func.func private @sgemm_(
// CHECK-DAG: func.func private @dgemm_(
// CHECK-DAG: func.func private @__fusegrad_gemm_f32(
func.func @mm(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>) -> tensor<4x6xf32> {
  %0 = "dg.matmul"(%a, %b) : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

func.func @bmm64(%a: tensor<2x4x5xf64>, %b: tensor<2x5x6xf64>) -> tensor<2x4x6xf64> {
  %0 = "dg.matmul"(%a, %b) : (tensor<2x4x5xf64>, tensor<2x5x6xf64>) -> tensor<2x4x6xf64>
  return %0 : tensor<2x4x6xf64>
}

func.func @imm(%a: tensor<4x5xi64>, %b: tensor<5x6xi64>) -> tensor<4x6xi64> {
  %0 = "dg.matmul"(%a, %b) : (tensor<4x5xi64>, tensor<5x6xi64>) -> tensor<4x6xi64>
  return %0 : tensor<4x6xi64>
}

func.func @linear(%x: tensor<4x5xf32>, %w: tensor<6x5xf32>) -> tensor<4x6xf32> {
  %wt = "dg.transpose"(%w) {perm = array<i64: 1, 0>} : (tensor<6x5xf32>) -> tensor<5x6xf32>
  %0 = "dg.matmul"(%x, %wt) : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

func.func @transposed_result(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>) -> tensor<6x4xf32> {
  %0 = "dg.matmul"(%a, %b) : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %1 = "dg.transpose"(%0) {perm = array<i64: 1, 0>} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  return %1 : tensor<6x4xf32>
}

func.func @shared_zero_init(%a: tensor<4x5xf32>, %b: tensor<5x6xf32>, %c: tensor<4x5xf32>) -> (tensor<4x6xf32>, tensor<4x6xf32>) {
  %0 = "dg.matmul"(%a, %b) : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %1 = "dg.matmul"(%c, %b) : (tensor<4x5xf32>, tensor<5x6xf32>) -> tensor<4x6xf32>
  %2 = "dg.exp"(%1) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %3 = "dg.mul"(%2, %0) : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return %0, %3 : tensor<4x6xf32>, tensor<4x6xf32>
}

func.func @huge(%a: tensor<1x2147483648xf32>, %b: tensor<2147483648x1xf32>) -> tensor<1x1xf32> {
  %0 = "dg.matmul"(%a, %b) : (tensor<1x2147483648xf32>, tensor<2147483648x1xf32>) -> tensor<1x1xf32>
  return %0 : tensor<1x1xf32>
}

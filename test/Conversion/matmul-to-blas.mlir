// dg-matmul-to-blas: contiguous f32/f64 matmuls on memrefs call BLAS gemm
// through one helper per dtype; integer matmuls keep their loops.
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize,dg-matmul-to-blas' | filecheck %s

// CHECK-LABEL: func.func @mm(
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: call @__fusegrad_gemm_f32({{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i32, i32, i32, i32) -> ()
// CHECK-NOT: linalg.matmul
// CHECK-LABEL: func.func @bmm64(
// CHECK: call @__fusegrad_gemm_f64
// CHECK-LABEL: func.func @imm(
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

// dg-matmul-to-blas calls PyTorch's baddbmm (oneDNN, f32 accumulation, as eager's
// matmul) for bf16/f16 products: tensors view the buffers, a transposed operand through
// its strides (ta/tb), and a zero-filled result is overwritten (beta = 0). Integer
// products keep the loops.
// RUN: fusegrad-opt %s -p 'dg-matmul-to-blas' | filecheck %s

// CHECK-LABEL: func.func @bf16_nt(
// CHECK-NOT: linalg.fill
// CHECK-NOT: linalg.transpose
// CHECK-DAG: %[[BATCH:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[M:.*]] = arith.constant 5 : i64
// CHECK-DAG: %[[N:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[K:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[TA:.*]] = arith.constant false
// CHECK-DAG: %[[TB:.*]] = arith.constant true
// CHECK-DAG: %[[BETA:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG: %[[BF16:.*]] = arith.constant 15 : i32
// CHECK: call @__fusegrad_gemm_torch(%{{.*}}, %{{.*}}, %{{.*}}, %[[BATCH]], %[[M]], %[[N]], %[[K]], %[[TA]], %[[TB]], %[[BETA]], %[[BF16]])
// CHECK-NOT: linalg.matmul
func.func @bf16_nt(%a: memref<5x3xbf16>, %b: memref<4x3xbf16>, %c: memref<5x4xbf16>) {
  %zero = arith.constant 0.0 : bf16
  %bt = memref.alloc() : memref<3x4xbf16>
  linalg.transpose ins(%b : memref<4x3xbf16>) outs(%bt : memref<3x4xbf16>) permutation = [1, 0]
  linalg.fill ins(%zero : bf16) outs(%c : memref<5x4xbf16>)
  linalg.matmul ins(%a, %bt : memref<5x3xbf16>, memref<3x4xbf16>) outs(%c : memref<5x4xbf16>)
  memref.dealloc %bt : memref<3x4xbf16>
  return
}

// CHECK-LABEL: func.func @integers(
// CHECK-NOT: call @__fusegrad_gemm
// CHECK: linalg.matmul
// CHECK: func.func private @__fusegrad_gemm_torch(
// CHECK: llvm.call @aoti_torch_cpu_baddbmm_out
func.func @integers(%a: memref<5x3xi32>, %b: memref<3x4xi32>, %c: memref<5x4xi32>) {
  linalg.matmul ins(%a, %b : memref<5x3xi32>, memref<3x4xi32>) outs(%c : memref<5x4xi32>)
  return
}

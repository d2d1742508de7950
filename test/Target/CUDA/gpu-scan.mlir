// dg.scan's loop nest becomes one kernel with a thread per iteration of its loops over
// the other dims, each running the serial loop along the scanned dim with the running
// value in registers (f32 sums in f64). Along columns, neighbouring threads read
// neighbouring elements; a row's length of run-time size reaches the kernel as an
// argument.
// RUN: fusegrad-opt %s -p 'dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s --ptx sm_90 | filecheck %s

// IR-LABEL: func.func @rows
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c32,
// IR: %[[ROW:.*]] = arith.addi
// IR: scf.if
// IR: scf.for %[[I:.*]] = %{{.*}} to %[[N:.*]] step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f64)
// IR: memref.load %{{.*}}[%[[ROW]], %[[I]]]
// IR: arith.extf
// IR: arith.addf %[[ACC]]
// IR: memref.store %{{.*}}[%[[ROW]], %[[I]]]
// IR: gpu.terminator
// IR-NOT: gpu.launch
// IR-LABEL: func.func @columns
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c4{{(_[0-9]+)?}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// IR: %[[COL:.*]] = arith.addi
// IR: scf.for %[[I:.*]] = {{.*}} iter_args({{.*}}) -> (f32, i64)
// IR: %[[POS:.*]] = arith.subi %{{.*}}, %[[I]]
// IR: memref.load %{{.*}}[%[[POS]], %[[COL]]]
// IR: memref.store %{{.*}}[%[[POS]], %[[COL]]] : memref<1024x1024xf32>
// IR: memref.store %{{.*}}[%[[POS]], %[[COL]]] : memref<1024x1024xi64>

// CHECK: launch rows_kernel::rows_kernel grid=[1, 1, 1] block=[32, 1, 1] smem=0 (s0:i64, {{.*}}arg0, arg1)
// CHECK: launch columns_kernel::columns_kernel grid=[4, 1, 1] block=[256, 1, 1]
// CHECK: .target sm_90
// CHECK: .visible .entry rows_kernel(
// CHECK: add.rn.f64
// CHECK: .visible .entry columns_kernel(
func.func @rows(%x: tensor<4x?xf32, "s0">) -> tensor<4x?xf32, "s0"> {
  %0 = "dg.scan"(%x) {combiner = "add", dim = 1 : i64, reverse = 0 : i64} : (tensor<4x?xf32, "s0">) -> tensor<4x?xf32, "s0">
  return %0 : tensor<4x?xf32, "s0">
}

func.func @columns(%x: tensor<1024x1024xf32>) -> (tensor<1024x1024xf32>, tensor<1024x1024xi64>) {
  %0:2 = "dg.scan"(%x) {combiner = "max", dim = 0 : i64, reverse = 1 : i64} : (tensor<1024x1024xf32>) -> (tensor<1024x1024xf32>, tensor<1024x1024xi64>)
  return %0#0, %0#1 : tensor<1024x1024xf32>, tensor<1024x1024xi64>
}

// Reductions: over the contiguous dim one block per row (gpu.all_reduce, never
// one thread per row); over rows one block per output column while there are
// fewer than 65536 columns, one thread per column (coalesced, serial) beyond;
// over everything (a loss) two stages when large: per-block partials into a
// temporary, then one block combining them. Each of these writes every output element
// once, so the fill of its output just before it is folded in: the result starts from
// the fill's constant, with no fill kernel and no load of the output. A float sum
// over more than 16 elements per output adds in f64 in the last two (a block's partials
// and its tree; a thread's serial loop), rounded to f32 once (wide_sums.py); a row
// kernel's and a full reduction's stay f32.
// (Row kernels in their loop form, `row-cache=0`: gpu-row-cache.mlir has the default.)
// RUN: fusegrad-opt %s -p 'dg-fuse,dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels{row-cache=0}' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse --row-cache 0 --ptx sm_90 | filecheck %s

// IR-LABEL: func.func @rowsum
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c128{{[_0-9]*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c128{{[_0-9]*}},
// IR: scf.for %{{.*}} = %{{.*}} to %c1000{{.*}} step %c128
// IR: gpu.all_reduce add
// IR: arith.cmpi eq
// IR: scf.if
// IR: memref.store {{.*}}, %arg1[
// IR-LABEL: func.func @colsum
// IR-NOT: linalg.fill
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1000{{[_0-9]*}},
// IR: scf.for %{{.*}} = %{{.*}} to %c128{{.*}} step %c32{{.*}} -> (f64)
// IR: %[[E:.*]] = arith.extf %{{.*}} : f32 to f64
// IR-NEXT: arith.addf %{{.*}}, %[[E]] {{.*}}: f64
// IR: %[[S:.*]] = gpu.all_reduce add
// IR-NEXT: } : (f64) -> f64
// IR-NOT: memref.load
// IR: %[[I:.*]] = arith.extf %cst{{.*}} : f32 to f64
// IR-NEXT: %[[T:.*]] = arith.addf %[[I]], %[[S]]
// IR-NEXT: %[[R:.*]] = arith.truncf %[[T]] : f64 to f32
// IR-NEXT: memref.store %[[R]]
// IR-NOT: gpu.launch
// IR-LABEL: func.func @colsum_wide
// IR: gpu.launch
// IR-NOT: memref.load %arg1
// IR: scf.for %{{.*}} = %c0{{.*}} to %c4 {{.*}} -> (f32)
// IR-NOT: gpu.all_reduce
// IR-NOT: f64
// IR-LABEL: func.func @colsum_long
// IR: gpu.launch
// IR: scf.for %{{.*}} = %c0{{.*}} to %c64 {{.*}} -> (f64)
// IR: %[[E:.*]] = arith.extf %{{.*}} : f32 to f64
// IR-NEXT: arith.addf %{{.*}}, %[[E]] {{.*}}: f64
// IR: %[[R:.*]] = arith.truncf %{{.*}} : f64 to f32
// IR-NEXT: memref.store %[[R]]
// IR-NOT: gpu.all_reduce
// IR-LABEL: func.func @total
// IR-NOT: f64
// IR: %[[P:.*]] = memref.alloc() : memref<128xf32>
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c128{{[_0-9]*}},
// IR: gpu.all_reduce add
// IR: memref.store {{.*}}, %[[P]]
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c128{{[_0-9]*}},
// IR: memref.load %[[P]]
// IR: gpu.all_reduce add
// IR: memref.dealloc %[[P]]

// CHECK: func @rowsum (128x1000 f32) -> (128 f32)
// CHECK-NEXT: launch rowsum_kernel::rowsum_kernel grid=[128, 1, 1] block=[128, 1, 1] smem=0 (arg0, arg1)
// CHECK: func @colsum (128x1000 f32) -> (1000 f32)
// CHECK-NEXT: launch colsum_kernel::colsum_kernel grid=[1000, 1, 1] block=[32, 1, 1] smem=0 (arg0, arg1)
// CHECK-NEXT: func @colsum_wide (4x65536 f32) -> (65536 f32)
// CHECK-NEXT: launch colsum_wide_kernel::colsum_wide_kernel grid=[256, 1, 1] block=[256, 1, 1] smem=0 (arg0, arg1)
// CHECK-NEXT: func @colsum_long (64x65536 f32) -> (65536 f32)
// CHECK-NEXT: launch colsum_long_kernel::colsum_long_kernel grid=[256, 1, 1] block=[256, 1, 1] smem=0 (arg0, arg1)
// CHECK-NEXT: func @total (1024x1024 f32) -> (scalar f32)
// CHECK-NEXT: alloc buf="t0" shape=[128] dtype="f32"
// CHECK-NEXT: launch total_kernel{{.*}}::total_kernel grid=[128, 1, 1] block=[1024, 1, 1] smem=0 (arg0, t0)
// CHECK-NEXT: launch total_kernel{{.*}}::total_kernel grid=[1, 1, 1] block=[128, 1, 1] smem=0 (t0, arg1)
// CHECK-NEXT: free buf="t0"
// CHECK: .entry rowsum_kernel(
// CHECK: .maxntid 128, 1, 1
// CHECK: shfl.sync.bfly.b32
// CHECK: bar.sync 0;
// CHECK: .entry colsum_kernel(
// CHECK: cvt.f64.f32
// CHECK: add.rn.f64
// CHECK: shfl.sync.bfly.b32
// CHECK: cvt.rn.f32.f64
func.func @rowsum(%x: tensor<128x1000xf32>) -> tensor<128xf32> {
  %0 = "dg.reduce_sum"(%x) {dims = array<i64: 1>} : (tensor<128x1000xf32>) -> tensor<128xf32>
  return %0 : tensor<128xf32>
}
func.func @colsum(%x: tensor<128x1000xf32>) -> tensor<1000xf32> {
  %0 = "dg.reduce_sum"(%x) {dims = array<i64: 0>} : (tensor<128x1000xf32>) -> tensor<1000xf32>
  return %0 : tensor<1000xf32>
}
func.func @colsum_wide(%x: tensor<4x65536xf32>) -> tensor<65536xf32> {
  %0 = "dg.reduce_sum"(%x) {dims = array<i64: 0>} : (tensor<4x65536xf32>) -> tensor<65536xf32>
  return %0 : tensor<65536xf32>
}
func.func @colsum_long(%x: tensor<64x65536xf32>) -> tensor<65536xf32> {
  %0 = "dg.reduce_sum"(%x) {dims = array<i64: 0>} : (tensor<64x65536xf32>) -> tensor<65536xf32>
  return %0 : tensor<65536xf32>
}
func.func @total(%x: tensor<1024x1024xf32>) -> tensor<f32> {
  %0 = "dg.reduce_sum"(%x) {dims = array<i64: 0, 1>} : (tensor<1024x1024xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

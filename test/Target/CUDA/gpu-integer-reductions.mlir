// Reductions with integer and boolean combiners are parallel too (gpu.all_reduce on
// integers): a loss that counts its valid labels (an i64 sum beside the f32 sum) is one
// block of 1024 threads, not one thread looping over every label; a softmax sum paired
// with an "any unmasked" flag (a boolean max) is a row kernel, not one thread per row.
// Booleans reach the warp shuffles widened to i32 (zero-extended: maxui), i64 sums as
// two 32-bit shuffles.
// RUN: fusegrad-opt %s -p 'dg-fuse{row-temps=0},dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p 'dg-fuse{row-temps=0}' --ptx sm_90 | filecheck %s

// IR-LABEL: func.func @loss
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{[_0-9]*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c1024{{[_0-9]*}},
// IR: scf.for {{.*}} -> (i64, f32)
// IR: arith.addi
// IR: gpu.all_reduce add %{{.*}} uniform {
// IR-NEXT: } : (i64) -> i64
// IR: gpu.all_reduce add %{{.*}} uniform {
// IR-NEXT: } : (f32) -> f32
// IR-NOT: gpu.launch
// IR-LABEL: func.func @any_rows
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c64{{[_0-9]*}},
// IR: gpu.all_reduce add
// IR: %[[WIDE:.*]] = arith.extui %{{.*}} : i1 to i32
// IR-NEXT: %[[ANY:.*]] = gpu.all_reduce maxui %[[WIDE]] uniform {
// IR: arith.trunci %[[ANY]] : i32 to i1
// IR-NOT: gpu.launch

// CHECK: func @loss (1024 f32, 1024 i64) -> (scalar i64, scalar f32)
// CHECK-NEXT: launch loss_kernel::loss_kernel grid=[1, 1, 1] block=[1024, 1, 1]
// CHECK-NEXT: func @any_rows (64x128 f32) -> (64 f32, 64 i1)
// CHECK-NEXT: launch any_rows_kernel::any_rows_kernel grid=[64, 1, 1] block=[32, 1, 1]
// CHECK: .entry loss_kernel(
// CHECK: .maxntid 1024, 1, 1
// CHECK: shfl.sync.bfly.b32
// CHECK: add.s64
// CHECK: .entry any_rows_kernel(
// CHECK: shfl.sync.bfly.b32
// CHECK: max.u32
func.func @loss(%x: tensor<1024xf32>, %l: tensor<1024xi64>) -> (tensor<i64>, tensor<f32>) {
  %ign = "dg.full"() {value = -100.0 : f64} : () -> tensor<1024xi64>
  %valid = "dg.compare"(%l, %ign) {direction = "ne"} : (tensor<1024xi64>, tensor<1024xi64>) -> tensor<1024xi1>
  %n = "dg.convert"(%valid) : (tensor<1024xi1>) -> tensor<1024xi64>
  %count = "dg.reduce_sum"(%n) {dims = array<i64: 0>} : (tensor<1024xi64>) -> tensor<i64>
  %zero = "dg.full"() {value = 0.0 : f64} : () -> tensor<1024xf32>
  %masked = "dg.select"(%valid, %x, %zero) : (tensor<1024xi1>, tensor<1024xf32>, tensor<1024xf32>) -> tensor<1024xf32>
  %sum = "dg.reduce_sum"(%masked) {dims = array<i64: 0>} : (tensor<1024xf32>) -> tensor<f32>
  return %count, %sum : tensor<i64>, tensor<f32>
}
func.func @any_rows(%x: tensor<64x128xf32>) -> (tensor<64xf32>, tensor<64xi1>) {
  %e = "dg.exp"(%x) : (tensor<64x128xf32>) -> tensor<64x128xf32>
  %s = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<64x128xf32>) -> tensor<64xf32>
  %inf = "dg.full"() {value = 0xFFF0000000000000 : f64} : () -> tensor<64x128xf32>
  %ne = "dg.compare"(%x, %inf) {direction = "ne"} : (tensor<64x128xf32>, tensor<64x128xf32>) -> tensor<64x128xi1>
  %any = "dg.reduce_max"(%ne) {dims = array<i64: 1>} : (tensor<64x128xi1>) -> tensor<64xi1>
  return %s, %any : tensor<64xf32>, tensor<64xi1>
}

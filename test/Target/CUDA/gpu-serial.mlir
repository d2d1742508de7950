// Scalar code that canonicalization left without a loop (a scatter-add into a 0-d
// tensor: its one-trip loop is folded away) reads and writes device buffers, so it
// cannot stay on the host: it becomes a kernel of one thread. Host scalars it does not
// depend on stay on the host, and the kernels using them recompute them, also when
// they load through a view (@two_scatters_0d: a 0-d index read as 1-d, checked once,
// used by two scatters with other kernels between them). A load from a buffer the kernel
// stored to earlier stays after that store (@scatter_twice_0d: the second add reads
// what the first wrote).
// RUN: fusegrad-opt %s -p 'dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s --ptx sm_90 | filecheck %s

// IR-LABEL: func.func @scatter_scalar
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}) threads({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}})
// IR-NEXT: memref.load %arg1
// IR: scf.if
// IR: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c32,
// IR: memref.store {{.*}}, %arg3
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}) threads({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}})
// IR-NEXT: memref.load %arg1
// IR: arith.addf
// IR-NEXT: memref.store {{.*}}, %arg3
// IR-NEXT: gpu.terminator
// IR-NOT: memref.load
// IR-LABEL: func.func @scatter_0d
// IR: gpu.launch
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}) threads({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}})
// IR: %[[SUM0:.*]] = arith.addf
// IR: scf.if
// IR: memref.store %[[SUM0]], %alloc
// IR-NEXT: gpu.terminator
// IR-NOT: memref.load

// IR-LABEL: func.func @two_scatters_0d
// IR-NOT: memref.load
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}) threads({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}})
// IR-NEXT: memref.expand_shape
// IR: memref.load {{.*}} : memref<1xi64>
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}) threads({{.*}}) in ({{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}}, {{.*}} = %c1{{(_[0-9]+)?}})
// IR-NEXT: memref.expand_shape
// IR: memref.load {{.*}} : memref<1xi64>

// IR-LABEL: func.func @scatter_twice_0d
// IR: gpu.launch
// IR: gpu.launch
// IR: %[[SUM:.*]] = arith.addf
// IR: memref.store %[[SUM]], %[[BUF:[a-z_0-9]+]][%[[AT:[0-9]+]]]
// IR: %[[AGAIN:.*]] = memref.load %[[BUF]][%[[AT]]]
// IR-NEXT: arith.addf %[[AGAIN]]
// IR-NEXT: memref.store
// IR-NEXT: gpu.terminator

// CHECK-LABEL: func @scatter_scalar
// CHECK-NEXT: index_flag
// CHECK-NEXT: launch {{.*}} grid=[1, 1, 1] block=[1, 1, 1]
// CHECK-NEXT: launch {{.*}} grid=[1, 1, 1] block=[32, 1, 1]
// CHECK-NEXT: launch {{.*}} grid=[1, 1, 1] block=[1, 1, 1]
// CHECK-LABEL: func @scatter_0d

func.func @scatter_scalar(%x: tensor<1xf32>, %i: tensor<1xi64>, %s: tensor<1xf32>) -> tensor<1xf32> {
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 0} : (tensor<1xf32>, tensor<1xi64>, tensor<1xf32>) -> tensor<1xf32>
  return %0 : tensor<1xf32>
}
func.func @scatter_0d(%x: tensor<f32>, %i: tensor<i64>, %s: tensor<f32>) -> tensor<f32> {
  %0 = "dg.reshape"(%x) : (tensor<f32>) -> tensor<1xf32>
  %1 = "dg.reshape"(%i) : (tensor<i64>) -> tensor<1xi64>
  %2 = "dg.reshape"(%s) : (tensor<f32>) -> tensor<1xf32>
  %3 = "dg.scatter_add"(%0, %1, %2) {dim = 0} : (tensor<1xf32>, tensor<1xi64>, tensor<1xf32>) -> tensor<1xf32>
  %4 = "dg.reshape"(%3) : (tensor<1xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
func.func @two_scatters_0d(%x: tensor<f32>, %i: tensor<i64>, %s: tensor<f32>) -> tensor<f32> {
  %0 = "dg.reshape"(%x) : (tensor<f32>) -> tensor<1xf32>
  %1 = "dg.reshape"(%i) : (tensor<i64>) -> tensor<1xi64>
  %2 = "dg.reshape"(%s) : (tensor<f32>) -> tensor<1xf32>
  %3 = "dg.full"() {value = 0.000000e+00 : f64} : () -> tensor<1xf32>
  %4 = "dg.full"() {value = 1.000000e+00 : f64} : () -> tensor<1xf32>
  %5 = "dg.scatter_add"(%3, %1, %4) {dim = 0 : i64} : (tensor<1xf32>, tensor<1xi64>, tensor<1xf32>) -> tensor<1xf32>
  %6 = "dg.full"() {value = 0.000000e+00 : f64} : () -> tensor<1xf32>
  %7 = "dg.compare"(%5, %6) {direction = "gt"} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xi1>
  %8 = "dg.full"() {value = 0.000000e+00 : f64} : () -> tensor<1xf32>
  %9 = "dg.scatter_add"(%8, %1, %2) {dim = 0 : i64} : (tensor<1xf32>, tensor<1xi64>, tensor<1xf32>) -> tensor<1xf32>
  %10 = "dg.select"(%7, %9, %0) : (tensor<1xi1>, tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %11 = "dg.reshape"(%10) : (tensor<1xf32>) -> tensor<f32>
  return %11 : tensor<f32>
}
func.func @scatter_twice_0d(%x: tensor<f32>, %i: tensor<i64>, %s: tensor<f32>) -> tensor<f32> {
  %0 = "dg.reshape"(%x) : (tensor<f32>) -> tensor<1xf32>
  %1 = "dg.reshape"(%i) : (tensor<i64>) -> tensor<1xi64>
  %2 = "dg.reshape"(%s) : (tensor<f32>) -> tensor<1xf32>
  %3 = "dg.scatter_add"(%0, %1, %2) {dim = 0} : (tensor<1xf32>, tensor<1xi64>, tensor<1xf32>) -> tensor<1xf32>
  %4 = "dg.scatter_add"(%3, %1, %2) {dim = 0} : (tensor<1xf32>, tensor<1xi64>, tensor<1xf32>) -> tensor<1xf32>
  %5 = "dg.reshape"(%4) : (tensor<1xf32>) -> tensor<f32>
  return %5 : tensor<f32>
}

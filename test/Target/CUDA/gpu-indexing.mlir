// Gathers, scatter-adds and dropout on the CUDA target. A checked index stores its
// site in the index-error flag, a global whose buffer the kernel takes as an argument
// (the plan binds it to device memory with an `index_flag` step; the host function
// that reads it on the CPU is dropped); a gather's indices are checked and clamped by
// a kernel of their own, which the gather kernel reads. A scatter-add (the gradient of a gather or an
// embedding) is one thread per source element adding with `atomic_rmw addf`, not a
// host loop; a scatter (`x[i] = v`) stores (which of repeated indices stays is not
// fixed, as in eager's CUDA kernel). Scalars derived from loads on the host (dropout's keys from its seed)
// are recomputed in each kernel that uses them. Integer abs (T5's position buckets)
// is expanded for NVVM.
// RUN: fusegrad-opt %s -p 'dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s --ptx sm_90 | filecheck %s

// IR-NOT: func.func @__fusegrad_take_index_error
// IR-LABEL: func.func @embed
// IR: %[[FLAG:.*]] = memref.get_global @__fusegrad_index_error : memref<i32>
// IR-NEXT: gpu.launch
// IR: memref.store %{{.*}}, %[[FLAG]][] : memref<i32>
// IR-LABEL: func.func @scatter
// IR: gpu.launch
// IR: memref.store
// IR: gpu.launch
// IR-NOT: scf.for
// IR: memref.atomic_rmw addf %{{.*}}, %arg3[%{{.*}}, %{{.*}}] : (f32, memref<3x4xf32>) -> f32
// IR-LABEL: func.func @overwrite
// IR: gpu.launch
// IR: gpu.launch
// IR-NOT: scf.for
// IR-NOT: memref.atomic_rmw
// IR: memref.store %{{.*}}, %arg3[%{{.*}}, %{{.*}}] : memref<3x4xf32>
// IR-LABEL: func.func @dropout
// IR-NOT: memref.load
// IR: gpu.launch
// IR-NEXT: memref.load %arg1[] : memref<i64>
// IR-LABEL: func.func @iabs
// IR-NOT: math.absi
// IR: arith.maxsi
// IR-LABEL: func.func @scatter_slices
// IR: gpu.launch
// IR: gpu.launch
// IR-NOT: scf.for
// IR: memref.atomic_rmw addf

// CHECK-LABEL: func @embed
// CHECK-NEXT: alloc buf="[[S:t[0-9]+]]" shape=[8] dtype="i64"
// CHECK-NEXT: index_flag buf="[[F:t[0-9]+]]"
// CHECK-NEXT: launch {{.*}} (arg1, [[F]], [[S]])
// CHECK-NEXT: launch {{.*}} ([[S]], arg0, arg2)
// CHECK-LABEL: func @scatter
// CHECK-NEXT: launch
// CHECK-NEXT: index_flag
// CHECK-NEXT: launch
// CHECK-LABEL: func @overwrite
// CHECK-NEXT: launch
// CHECK-NEXT: index_flag
// CHECK-NEXT: launch
// CHECK-LABEL: func @dropout
// CHECK-NEXT: launch {{.*}} (arg1, arg2)
// CHECK-LABEL: func @scatter_slices
// CHECK-NEXT: launch
// CHECK-NEXT: index_flag
// CHECK-NEXT: launch
// CHECK: index site 1: dg.index_select at
// CHECK: index site 2: dg.scatter_add at
// CHECK: index site 3: dg.scatter at
// CHECK: atom.global.add.f32

func.func @embed(%t: tensor<50x16xf32>, %i: tensor<8xi64>) -> tensor<8x16xf32> {
  %0 = "dg.index_select"(%t, %i) {dim = 0} : (tensor<50x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
func.func @scatter(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = "dg.scatter_add"(%x, %i, %s) {dim = 0} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}
func.func @overwrite(%x: tensor<3x4xf32>, %i: tensor<5x4xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %0 = "dg.scatter"(%x, %i, %s) {dim = 0} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}
func.func @dropout(%x: tensor<4x5xf32>, %seed: tensor<i64>) -> tensor<4x5xf32> {
  %m = "dg.rng_bernoulli"(%seed) {p = 0.25 : f64} : (tensor<i64>) -> tensor<4x5xf32>
  %0 = "dg.mul"(%x, %m) : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}
func.func @iabs(%x: tensor<8xi64>) -> tensor<8xi64> {
  %0 = "dg.abs"(%x) : (tensor<8xi64>) -> tensor<8xi64>
  return %0 : tensor<8xi64>
}
// an index_select's gradient: each slice's row index is computed before the loop over
// the slice on the CPU; here every thread computes its own
func.func @scatter_slices(%x: tensor<3x4xf32>, %i: tensor<5xi64>, %s: tensor<5x4xf32>) -> tensor<3x4xf32> {
  %wide = "dg.broadcast_in_dim"(%i) {dims = array<i64: 0>} : (tensor<5xi64>) -> tensor<5x4xi64>
  %0 = "dg.scatter_add"(%x, %wide, %s) {dim = 0} : (tensor<3x4xf32>, tensor<5x4xi64>, tensor<5x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// Kernels over run-time sizes (a program compiled once for every size): a loop size is a
// host value, the grid is computed from it on the host (the plan holds it as an
// expression of the symbols, the runtime evaluates it at each call), and a kernel takes
// each size it uses as one i64 parameter and each buffer of run-time sizes as a pointer
// (a 0-d memref) that it views again at its sizes: the bare-pointer ABI takes static
// shapes only. Rows of 256 run on blockIdx.y, and z past 65535 of them; a softmax over
// rows of run-time count and length is one kernel, a block per row; a sum of a matmul's
// epilogue over a run-time number of elements runs in two stages, its partial blocks
// counted at run time. (ptxas accepts these kernels: cuda/test_cuda_run_time_sizes.py.)
// RUN: fusegrad-opt %s -p 'dg-fuse,dg-gpu-linalg,dg-gpu-bufferize,dg-gpu-kernels' | filecheck %s --check-prefix=IR
// RUN: %python -m fusegrad.codegen.cuda.compile %s -p dg-fuse --ptx sm_90 | filecheck %s

// IR-LABEL: func.func @pointwise(%arg0: memref<?x256xf32>, %arg1: memref<?x256xf32>)
// IR: %[[ROWS:.*]] = memref.dim %arg0, %c0
// IR: %[[GY:.*]] = arith.minui %[[ROWS]], %c65535
// IR: %[[GZ:.*]] = arith.ceildivui %[[ROWS]], %[[GY]]
// IR: %[[X:.*]] = memref.reinterpret_cast %arg0 to offset: [0], sizes: [], strides: [] : memref<?x256xf32> to memref<f32>
// IR: %[[SIZE:.*]] = arith.index_cast %{{.*}} : index to i64
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}} = %[[GY]], {{.*}} = %[[GZ]])
// IR: %[[N:.*]] = arith.index_cast %[[SIZE]] : i64 to index
// IR: memref.reinterpret_cast %[[X]] to offset: [0], sizes: [%[[N]], 256], strides: [256, 1] : memref<f32> to memref<?x256xf32>
// IR: arith.cmpi ult, %{{.*}}, %[[N]]
// IR: math.tanh
// IR: gpu.terminator
// IR-NOT: memref.copy
// IR-LABEL: func.func @softmax(%arg0: memref<?x?xf32>, %arg1: memref<?x?xf32>)
// IR: %[[R:.*]] = memref.dim %arg0, %c0
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %[[R]], {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// IR: %[[LEN:.*]] = arith.index_cast %{{.*}} : i64 to index
// IR: scf.for {{.*}} to %[[LEN]] step %c256
// IR: gpu.all_reduce maximumf
// IR: scf.for {{.*}} to %[[LEN]] step %c256
// IR: gpu.all_reduce add
// IR: scf.for {{.*}} to %[[LEN]] step %c256
// IR-NOT: gpu.launch
// IR-LABEL: func.func @linear(
// IR: %[[B:.*]] = memref.dim %arg0, %c0
// IR: %[[T:.*]] = memref.alloc(%[[B]]) {{.*}} : memref<?x32xf32>
// IR: linalg.matmul {dg.gpu.overwrite}
// IR: %[[E:.*]] = arith.muli %[[B]], %c32
// IR: %[[BL:.*]] = arith.ceildivui %[[E]], %c8192
// IR: %[[NB:.*]] = arith.minui %[[BL]], %c1024
// IR: memref.alloc() : memref<1024xf32>
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %[[NB]],
// IR: gpu.all_reduce add
// IR: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c1024

// The plan: grids and shapes are expressions of s0 and s1, sizes are i64 arguments.
// CHECK: func @pointwise (s0x256 f32) -> (s0x256 f32)
// CHECK-NEXT: launch pointwise_kernel::pointwise_kernel grid=[1, "Min(65535, s0)", "floor((s0 + Min(65535, s0) - 1)/Min(65535, s0))"] block=[256, 1, 1] smem=0 (s0:i64, arg0, arg1)
// CHECK-NEXT: func @softmax (s0xs1 f32) -> (s0xs1 f32)
// CHECK-NEXT: launch softmax_kernel::softmax_kernel grid=["s0", 1, 1] block=[256, 1, 1] smem=0 (s1:i64, s0:i64, arg0, arg1)
// CHECK-NEXT: func @linear (s0x16 f32, 16x32 f32) -> (scalar f32)
// CHECK-NEXT: alloc buf="t0" shape=["s0",32] dtype="f32"
// CHECK-NEXT: matmul a="arg0" b="arg1" c="t0" overwrite=true
// CHECK-NEXT: alloc buf="t1" shape=[1024] dtype="f32"
// CHECK-NEXT: launch linear_kernel::linear_kernel grid=["Min(1024, floor(s0/256 + 8191/8192))", 1, 1] block=[1024, 1, 1] smem=0 (s0:i64, t0, t1)
// CHECK-NEXT: launch linear_kernel_0::linear_kernel grid=[1, 1, 1] block=[1024, 1, 1] smem=0 (s0:i64, t1, arg2)
// PTX: the sizes are .u64 parameters before the buffers' pointers.
// CHECK: .visible .entry pointwise_kernel(
// CHECK-NEXT: .param .u64 pointwise_kernel_param_0,
// CHECK-NEXT: .param .u64 .ptr .align 1 pointwise_kernel_param_1,
// CHECK-NEXT: .param .u64 .ptr .align 1 pointwise_kernel_param_2
// CHECK: ld.param.b64 {{.*}}, [pointwise_kernel_param_0];
// CHECK: st.global
// CHECK: .visible .entry softmax_kernel(
// CHECK-NEXT: .param .u64 softmax_kernel_param_0,
// CHECK-NEXT: .param .u64 softmax_kernel_param_1,
// CHECK-NEXT: .param .u64 .ptr .align 1 softmax_kernel_param_2,
// CHECK-NEXT: .param .u64 .ptr .align 1 softmax_kernel_param_3
// CHECK: .maxntid 256, 1, 1
// CHECK: shfl.sync.bfly.b32
// CHECK: .visible .entry linear_kernel(
// CHECK-NEXT: .param .u64 linear_kernel_param_0,
func.func @pointwise(%x: tensor<?x256xf32, "s0">) -> tensor<?x256xf32, "s0"> {
  %0 = "dg.tanh"(%x) : (tensor<?x256xf32, "s0">) -> tensor<?x256xf32, "s0">
  return %0 : tensor<?x256xf32, "s0">
}

func.func @softmax(%x: tensor<?x?xf32, "s0, s1">) -> tensor<?x?xf32, "s0, s1"> {
  %max = "dg.reduce_max"(%x) {dims = array<i64: 1>} : (tensor<?x?xf32, "s0, s1">) -> tensor<?xf32, "s0">
  %max_b = "dg.broadcast_in_dim"(%max) {dims = array<i64: 0>} : (tensor<?xf32, "s0">) -> tensor<?x?xf32, "s0, s1">
  %shifted = "dg.sub"(%x, %max_b) : (tensor<?x?xf32, "s0, s1">, tensor<?x?xf32, "s0, s1">) -> tensor<?x?xf32, "s0, s1">
  %e = "dg.exp"(%shifted) : (tensor<?x?xf32, "s0, s1">) -> tensor<?x?xf32, "s0, s1">
  %sum = "dg.reduce_sum"(%e) {dims = array<i64: 1>} : (tensor<?x?xf32, "s0, s1">) -> tensor<?xf32, "s0">
  %sum_b = "dg.broadcast_in_dim"(%sum) {dims = array<i64: 0>} : (tensor<?xf32, "s0">) -> tensor<?x?xf32, "s0, s1">
  %y = "dg.div"(%e, %sum_b) : (tensor<?x?xf32, "s0, s1">, tensor<?x?xf32, "s0, s1">) -> tensor<?x?xf32, "s0, s1">
  return %y : tensor<?x?xf32, "s0, s1">
}

func.func @linear(%x: tensor<?x16xf32, "s0">, %w: tensor<16x32xf32>) -> tensor<f32> {
  %0 = "dg.matmul"(%x, %w) : (tensor<?x16xf32, "s0">, tensor<16x32xf32>) -> tensor<?x32xf32, "s0">
  %1 = "dg.tanh"(%0) : (tensor<?x32xf32, "s0">) -> tensor<?x32xf32, "s0">
  %2 = "dg.reduce_sum"(%1) {dims = array<i64: 0, 1>} : (tensor<?x32xf32, "s0">) -> tensor<f32>
  return %2 : tensor<f32>
}

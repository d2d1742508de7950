// Calls of PyTorch's C shim check their error codes: each `aoti_torch_*` call's code goes
// through @__fusegrad_check_<function>, which keeps a helper's first failure as the
// function's number in runtime.cpu.LIBRARY_CALLS | code << 8; a failed kernel's result
// is neither copied nor deleted (its handle was never made), nor is a kernel called on
// handles that were not made; and each outermost helper passes the failure with its
// site (one per kind of call, listed in dg.index_sites) to @__fusegrad_library_failed,
// which stores site | failure << 16 in the error flag the runtime reads after each call
// (conversion/index_check.py): a convolution (here its forward, after the first RUN line
// its gradient), flash attention, and a bf16 matmul (baddbmm).
// RUN: fusegrad-opt %s -p 'dg-cpu-linalg,dg-cpu-bufferize,dg-conv-to-torch{layout=nchw},dg-attention-to-torch,dg-matmul-to-blas' | filecheck %s

// CHECK: module attributes {dg.index_sites = ["a compiled convolution", "a compiled convolution's gradient", "a compiled attention", "a compiled attention's gradient", "a compiled 16-bit matmul"]}
// CHECK: memref.global @__fusegrad_index_error : memref<i32>

// CHECK-LABEL: func.func private @__fusegrad_library_failed(%arg0: i32, %arg1: i32)
// CHECK: %[[FAILED:.*]] = arith.cmpi ne, %arg0, %{{.*}} : i32
// CHECK-NEXT: scf.if %[[FAILED]] {
// CHECK-NEXT: %[[C16:.*]] = arith.constant 16 : i32
// CHECK-NEXT: %[[HIGH:.*]] = arith.shli %arg0, %[[C16]] : i32
// CHECK-NEXT: %[[VALUE:.*]] = arith.ori %[[HIGH]], %arg1 : i32
// CHECK-NEXT: %[[FLAG:.*]] = memref.get_global @__fusegrad_index_error : memref<i32>
// CHECK-NEXT: memref.store %[[VALUE]], %[[FLAG]][] : memref<i32>

// Wrapping a buffer: the slot starts null, the code is checked.
// CHECK-LABEL: llvm.func @__fusegrad_blob_strided(
// CHECK: llvm.store %{{.*}}, %arg11 : !llvm.ptr, !llvm.ptr
// CHECK: %[[E:.*]] = llvm.call @aoti_torch_create_tensor_from_blob(
// CHECK-NEXT: %[[F:.*]] = llvm.call @__fusegrad_check_aoti_torch_create_tensor_from_blob(%{{.*}}, %[[E]])
// CHECK-NEXT: llvm.return %[[F]] : i32
// CHECK-LABEL: llvm.func @__fusegrad_delete(
// CHECK: %[[E:.*]] = llvm.call @aoti_torch_delete_tensor_object(
// CHECK-NEXT: llvm.call @__fusegrad_check_aoti_torch_delete_tensor_object(%{{.*}}, %[[E]])

// The forward convolution: the result is copied out only if the kernel succeeded.
// CHECK-LABEL: llvm.func @__fusegrad_conv_into(
// CHECK: %[[E:.*]] = llvm.call @aoti_torch_cpu_convolution(
// CHECK-NEXT: %[[F:.*]] = llvm.call @__fusegrad_check_aoti_torch_cpu_convolution(%{{.*}}, %[[E]])
// CHECK-NEXT: %[[OK:.*]] = llvm.icmp "eq" %[[F]], %{{.*}} : i32
// CHECK-NEXT: llvm.cond_br %[[OK]], ^[[COPY:.*]], ^[[DONE:.*]](%[[F]] : i32)
// CHECK: ^[[COPY]]:
// CHECK: %[[E2:.*]] = llvm.call @aoti_torch_copy_(
// CHECK-NEXT: llvm.call @__fusegrad_check_aoti_torch_copy_(%[[F]], %[[E2]])
// CHECK: ^[[DONE]](%[[FAILURE:.*]]: i32):
// CHECK-NEXT: llvm.return %[[FAILURE]] : i32
// The kernel runs only on the handles made; the failure goes to site 1.
// CHECK-LABEL: func.func private @__fusegrad_conv2d(
// CHECK: %[[MADE:.*]] = llvm.icmp "eq" %[[WRAPPED:[0-9]+]], %{{.*}} : i32
// CHECK-NEXT: %[[COMPUTED:.*]] = scf.if %[[MADE]] -> (i32) {
// CHECK-NEXT: llvm.call @__fusegrad_conv_into(
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[WRAPPED]] : i32
// CHECK: llvm.call @__fusegrad_delete(
// CHECK: %[[SITE:.*]] = arith.constant 1 : i32
// CHECK-NEXT: call @__fusegrad_library_failed(%{{[0-9]+}}, %[[SITE]]) : (i32, i32) -> ()
// CHECK-NEXT: return

// The convolution's gradient: copied out only if computed; site 2.
// CHECK-LABEL: func.func private @__fusegrad_conv2d_backward(
// CHECK: scf.if
// CHECK: %[[E:.*]] = llvm.call @aoti_torch_cpu_convolution_backward(
// CHECK-NEXT: %[[F:.*]] = llvm.call @__fusegrad_check_aoti_torch_cpu_convolution_backward(%{{.*}}, %[[E]])
// CHECK-NEXT: %[[OK:.*]] = llvm.icmp "eq" %[[F]], %{{.*}} : i32
// CHECK-NEXT: scf.if %[[OK]] -> (i32) {
// CHECK: llvm.call @aoti_torch_copy_(
// CHECK: arith.constant 2 : i32
// CHECK-NEXT: call @__fusegrad_library_failed(

// Each checker: its function's number (4: aoti_torch_cpu_convolution) | code << 8, 0 on
// success, an earlier failure kept.
// CHECK-LABEL: llvm.func @__fusegrad_check_aoti_torch_cpu_convolution(%arg0: i32, %arg1: i32) -> i32
// CHECK-DAG: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[NUMBER:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-DAG: %[[C8:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK: %[[SHIFTED:.*]] = llvm.shl %{{.*}}, %[[C8]] : i32
// CHECK-NEXT: %[[MINE:.*]] = llvm.or %[[SHIFTED]], %[[NUMBER]] : i32
// CHECK-NEXT: %[[FAILED:.*]] = llvm.icmp "ne" %arg1, %[[ZERO]] : i32
// CHECK-NEXT: %[[NOW:.*]] = llvm.select %[[FAILED]], %[[MINE]], %[[ZERO]] : i1, i32
// CHECK-NEXT: %[[EARLIER:.*]] = llvm.icmp "ne" %arg0, %[[ZERO]] : i32
// CHECK-NEXT: %[[R:.*]] = llvm.select %[[EARLIER]], %arg0, %[[NOW]] : i1, i32
// CHECK-NEXT: llvm.return %[[R]] : i32

// Attention: the results are copied out only if the kernel succeeded (else the
// destinations are just released); sites 3 and 4.
// CHECK-LABEL: llvm.func @__fusegrad_copy_out(
// CHECK: %[[OK:.*]] = llvm.icmp "eq" %arg2, %{{.*}} : i32
// CHECK-NEXT: llvm.cond_br %[[OK]], ^[[COPY:.*]], ^[[DELETE:.*]](%arg2 : i32)
// CHECK: ^[[COPY]]:
// CHECK: llvm.call @aoti_torch_copy_(
// CHECK: ^[[DELETE]](
// CHECK-LABEL: func.func private @__fusegrad_attention(
// CHECK: %[[E:.*]] = llvm.call @aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(
// CHECK-NEXT: llvm.call @__fusegrad_check_aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(%{{.*}}, %[[E]])
// CHECK: arith.constant 3 : i32
// CHECK-NEXT: call @__fusegrad_library_failed(
// CHECK-LABEL: func.func private @__fusegrad_attention_backward(
// CHECK: %[[E:.*]] = llvm.call @aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu_backward(
// CHECK-NEXT: llvm.call @__fusegrad_check_aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu_backward(%{{.*}}, %[[E]])
// CHECK: arith.constant 4 : i32
// CHECK-NEXT: call @__fusegrad_library_failed(

// A bf16 matmul through baddbmm: site 5.
// CHECK-LABEL: func.func private @__fusegrad_gemm_torch(
// CHECK: %[[E:.*]] = llvm.call @aoti_torch_cpu_baddbmm_out(
// CHECK-NEXT: llvm.call @__fusegrad_check_aoti_torch_cpu_baddbmm_out(%{{.*}}, %[[E]])
// CHECK: arith.constant 5 : i32
// CHECK-NEXT: call @__fusegrad_library_failed(
func.func @conv(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %0 = "dg.conv2d"(%x, %w) {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x8x8xf32>
}

func.func @input_grad(%g: tensor<2x4x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32> {
  %0 = "dg.conv2d_input_grad"(%g, %w) {dilation = array<i64: 1, 1>, groups = 1 : i64, input_shape = array<i64: 2, 3, 8, 8>, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  return %0 : tensor<2x3x8x8xf32>
}

func.func @attention(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x8xf32>, %m: tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {
  %o:2 = "dg.attention"(%q, %k, %v, %m) {causal = 0 : i64, scale = 0.25 : f64} : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x4x6xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return %o#0, %o#1 : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
}

func.func @matmul(%a: tensor<5x3xbf16>, %b: tensor<3x4xbf16>) -> tensor<5x4xbf16> {
  %0 = "dg.matmul"(%a, %b) : (tensor<5x3xbf16>, tensor<3x4xbf16>) -> tensor<5x4xbf16>
  return %0 : tensor<5x4xbf16>
}

// Host code the CUDA pipeline cannot run fails with the op named.
// RUN: fusegrad-opt %s -p dg-gpu-kernels --verify-diagnostics --split-input-file

func.func @store(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %x = arith.constant 1.0 : f32
  // expected-error @+1 {{dg-gpu-kernels: 'memref.store' cannot run on the CUDA host side}}
  memref.store %x, %a[%c0] : memref<4xf32>
  return
}

// -----

func.func @dynamic(%a: memref<?xf32>) {
  %x = arith.constant 1.0 : f32
  // expected-error @+1 {{dg-gpu-kernels: cannot map 'linalg.fill' to a GPU kernel}}
  linalg.fill ins(%x : f32) outs(%a : memref<?xf32>)
  return
}

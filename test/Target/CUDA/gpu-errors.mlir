// Host code the CUDA pipeline cannot run fails with the op named.
// RUN: fusegrad-opt %s -p dg-gpu-kernels --verify-diagnostics --split-input-file

// (a loop that only stores would be a scatter: one thread per iteration; this one reads
// what an earlier iteration may have written)
func.func @loop(%a: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  // expected-error @+1 {{dg-gpu-kernels: 'scf.for' cannot run on the CUDA host side}}
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %a[%c0] : memref<4xf32>
    memref.store %x, %a[%i] : memref<4xf32>
  }
  return
}

// -----

func.func @size_from_device(%a: memref<4xindex>) {
  %c0 = arith.constant 0 : index
  %v = memref.subview %a[1] [2] [1] : memref<4xindex> to memref<2xindex, strided<[1], offset: 1>>
  // expected-error @+1 {{dg-gpu-kernels: 'memref.load' computes on the CUDA host side a value that later host code uses}}
  %n = memref.load %v[%c0] : memref<2xindex, strided<[1], offset: 1>>
  %b = memref.alloc(%n) : memref<?xf32>
  memref.dealloc %b : memref<?xf32>
  return
}

// -----

// (run-time sizes: a kernel takes a buffer of them as its pointer, which a strided
// layout would not describe)
func.func @strided_run_time_sizes(%a: memref<?xf32, strided<[2]>>) {
  %x = arith.constant 1.0 : f32
  // expected-error @+1 {{dg-gpu-kernels: a kernel reads a buffer of run-time sizes through a strided layout}}
  linalg.fill ins(%x : f32) outs(%a : memref<?xf32, strided<[2]>>)
  return
}

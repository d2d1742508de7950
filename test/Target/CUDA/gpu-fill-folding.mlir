// A constant fill right before a reduction that writes each output element once is
// folded into it: the kernel starts from the constant and launches no fill. A fill of a
// buffer the reduction also reads as an input stays a kernel of its own.
// RUN: fusegrad-opt %s -p dg-gpu-kernels | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// CHECK-LABEL: func.func @folded
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch
// CHECK-NOT: memref.load %arg1
// CHECK: arith.addf %cst
// CHECK-NOT: gpu.launch
func.func @folded(%x: memref<128x64xf32>, %out: memref<64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%out : memref<64xf32>)
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<128x64xf32>) outs(%out : memref<64xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %acc, %in : f32
    linalg.yield %a : f32
  }
  return
}

// CHECK-LABEL: func.func @reads_its_output
// CHECK: gpu.launch
// CHECK: memref.store %cst{{.*}}, %arg1
// CHECK: gpu.launch
// CHECK: memref.load %arg1
func.func @reads_its_output(%x: memref<128x64xf32>, %out: memref<64xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%out : memref<64xf32>)
  linalg.generic {indexing_maps = [#id, #col, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x, %out : memref<128x64xf32>, memref<64xf32>) outs(%out : memref<64xf32>) {
  ^bb0(%in: f32, %scale: f32, %acc: f32):
    %m = arith.mulf %in, %scale : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  }
  return
}

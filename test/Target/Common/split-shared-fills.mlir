// dg-split-shared-fills: `cse` merges equal zero fills, so two reductions of one shape
// accumulate into one filled tensor; each then gets its own fill, placed before it, so
// bufferization fills each output in place instead of filling one buffer and copying
// it into the other. A convolution's zero padding (a tensor.insert_slice into the
// fill) splits the same way, each clone filling a tensor.empty of its own (else
// bufferization fills one buffer twice). A fill only read (not accumulated into) stays
// shared.
// RUN: fusegrad-opt %s -p dg-split-shared-fills | filecheck %s
// RUN: fusegrad-opt %s -p dg-cpu-bufferize | filecheck %s --check-prefix=BUF

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// CHECK-LABEL: func.func @two_sums
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<8xf32>)
// CHECK-NEXT: %[[S1:.*]] = linalg.generic {{.*}} outs(%[[F1]] : tensor<8xf32>)
// CHECK: %[[F2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<8xf32>)
// CHECK-NEXT: %[[S2:.*]] = linalg.generic {{.*}} outs(%[[F2]] : tensor<8xf32>)
// CHECK: return %[[S1]], %[[S2]]

// BUF-LABEL: func.func @two_sums
// BUF-NOT: memref.copy
// BUF-COUNT-2: linalg.fill
// BUF-NOT: memref.copy
// BUF: return
func.func @two_sums(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x16xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %acc, %in : f32
    linalg.yield %a : f32
  } -> tensor<8xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<8x16xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.mulf %in, %in : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<8xf32>
  return %s1, %s2 : tensor<8xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @two_paddings
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<2x3x8x8xf32>
// CHECK-NEXT: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]] : tensor<2x3x8x8xf32>)
// CHECK-NEXT: tensor.insert_slice %arg0 into %[[F1]][0, 0, 1, 1]
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<2x3x8x8xf32>
// CHECK-NEXT: %[[F2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E2]] : tensor<2x3x8x8xf32>)
// CHECK-NEXT: tensor.insert_slice %arg1 into %[[F2]][0, 0, 1, 1]

// BUF-LABEL: func.func @two_paddings
// BUF-COUNT-2: linalg.fill ins(%{{.*}} : f32) outs(%arg{{[23]}} : memref<2x3x8x8xf32>)
// BUF-NOT: memref.copy %{{.*}} : memref<2x3x8x8xf32> to
// BUF: return
func.func @two_paddings(%x: tensor<2x3x6x6xf32>, %y: tensor<2x3x6x6xf32>)
    -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %px = tensor.insert_slice %x into %f[0, 0, 1, 1] [2, 3, 6, 6] [1, 1, 1, 1]
      : tensor<2x3x6x6xf32> into tensor<2x3x8x8xf32>
  %py = tensor.insert_slice %y into %f[0, 0, 1, 1] [2, 3, 6, 6] [1, 1, 1, 1]
      : tensor<2x3x6x6xf32> into tensor<2x3x8x8xf32>
  return %px, %py : tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>
}

// CHECK-LABEL: func.func @read_only
// CHECK-COUNT-1: linalg.fill
// CHECK-NOT: linalg.fill
func.func @read_only(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%one : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %a = linalg.add ins(%f, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %b = linalg.mul ins(%f, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %a, %b : tensor<8xf32>, tensor<8xf32>
}

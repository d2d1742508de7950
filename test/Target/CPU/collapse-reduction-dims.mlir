// dg-collapse-reduction-dims: a batch norm's per-channel sum over (n, h, w) reads h x w
// as one contiguous reduction loop through a collapse_shape view (one view per buffer,
// shared by the ops that read it alike). Not merged: reduction loops over strided
// memory (@strided), parallel loops (@parallel), and loop dim 0 (@rows).
// RUN: fusegrad-opt %s -p 'dg-collapse-reduction-dims' | filecheck %s

#x = affine_map<(n, c, h, w) -> (n, c, h, w)>
#c = affine_map<(n, c, h, w) -> (c)>

// CHECK-LABEL: func.func @channel_sums(
// CHECK: %[[V:.*]] = memref.collapse_shape %arg0 {{\[}}[0], [1], [2, 3]] : memref<4x8x6x5xf32> into memref<4x8x30xf32>
// CHECK-NOT: memref.collapse_shape
// CHECK: linalg.generic {indexing_maps = [#[[$X:.*]], #[[$C:.*]]], iterator_types = ["reduction", "parallel", "reduction"]} ins(%[[V]] : memref<4x8x30xf32>) outs(%arg1
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction"]} ins(%[[V]] : memref<4x8x30xf32>) outs(%arg2
func.func @channel_sums(%x: memref<4x8x6x5xf32>, %s: memref<8xf32>, %q: memref<8xf32>) {
  linalg.generic {indexing_maps = [#x, #c], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%x : memref<4x8x6x5xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %in, %acc : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#x, #c], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%x : memref<4x8x6x5xf32>) outs(%q : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.mulf %in, %in : f32
    %1 = arith.addf %0, %acc : f32
    linalg.yield %1 : f32
  }
  return
}

// CHECK-LABEL: func.func @strided(
// CHECK-NOT: memref.collapse_shape
// CHECK: iterator_types = ["reduction", "parallel", "reduction", "reduction"]
func.func @strided(%x: memref<4x8x12x5xf32>, %s: memref<8xf32>) {
  %v = memref.subview %x[0, 0, 0, 0] [4, 8, 6, 5] [1, 1, 2, 1] : memref<4x8x12x5xf32> to memref<4x8x6x5xf32, strided<[480, 60, 10, 1]>>
  linalg.generic {indexing_maps = [#x, #c], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%v : memref<4x8x6x5xf32, strided<[480, 60, 10, 1]>>) outs(%s : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %in, %acc : f32
    linalg.yield %0 : f32
  }
  return
}

// CHECK-LABEL: func.func @parallel(
// CHECK-NOT: memref.collapse_shape
// CHECK: iterator_types = ["parallel", "parallel", "parallel", "parallel"]
func.func @parallel(%x: memref<4x8x6x5xf32>, %y: memref<4x8x6x5xf32>) {
  linalg.generic {indexing_maps = [#x, #x], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x : memref<4x8x6x5xf32>) outs(%y : memref<4x8x6x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.negf %in : f32
    linalg.yield %0 : f32
  }
  return
}

// CHECK-LABEL: func.func @rows(
// CHECK-NOT: memref.collapse_shape
// CHECK: iterator_types = ["reduction", "reduction", "parallel"]
func.func @rows(%x: memref<4x8x5xf32>, %s: memref<5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (c)>], iterator_types = ["reduction", "reduction", "parallel"]}
      ins(%x : memref<4x8x5xf32>) outs(%s : memref<5xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %in, %acc : f32
    linalg.yield %0 : f32
  }
  return
}

// dg-elide-copies: a result of run-time sizes that bufferization computes in a
// temporary and copies whole into its out-param (it hoists static allocs only) is
// computed in the out-param: the temporary's uses take it, its alloc and the copy go.
// RUN: fusegrad-opt %s -p 'dg-elide-copies' | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @result(
// CHECK-SAME: %[[X:.*]]: memref<?x8xf32>, %[[OUT:.*]]: memref<?x8xf32>)
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[X]] : memref<?x8xf32>) outs(%[[OUT]] : memref<?x8xf32>)
// CHECK-NOT: memref.copy
// CHECK: return
func.func @result(%x: memref<?x8xf32>, %out: memref<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %t = memref.alloc(%n) : memref<?x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x8xf32>) outs(%t : memref<?x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = arith.negf %in : f32
    linalg.yield %0 : f32
  }
  memref.copy %t, %out : memref<?x8xf32> to memref<?x8xf32>
  memref.dealloc %t : memref<?x8xf32>
  return
}

// Kept: the out-param is read between the temporary's first writer and the copy.
// CHECK-LABEL: func.func @read_between(
// CHECK: memref.alloc
// CHECK: memref.copy
func.func @read_between(%x: memref<?x8xf32>, %out: memref<?x8xf32>, %y: memref<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %t = memref.alloc(%n) : memref<?x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x8xf32>) outs(%t : memref<?x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = arith.negf %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%out : memref<?x8xf32>) outs(%y : memref<?x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  memref.copy %t, %out : memref<?x8xf32> to memref<?x8xf32>
  memref.dealloc %t : memref<?x8xf32>
  return
}

// Kept: the temporary is read after the copy.
// CHECK-LABEL: func.func @used_after(
// CHECK: memref.alloc
// CHECK: memref.copy
func.func @used_after(%x: memref<?x8xf32>, %out: memref<?x8xf32>, %y: memref<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?x8xf32>
  %t = memref.alloc(%n) : memref<?x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x8xf32>) outs(%t : memref<?x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = arith.negf %in : f32
    linalg.yield %0 : f32
  }
  memref.copy %t, %out : memref<?x8xf32> to memref<?x8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<?x8xf32>) outs(%y : memref<?x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  }
  memref.dealloc %t : memref<?x8xf32>
  return
}

// dg-cpu-kernels on memrefs of run-time sizes: the same row fusion, reductions in
// registers and threads as static shapes. A kernel reads each run-time size once
// from its own arguments (memref.dim); the caller reads the row count from its
// operands, counts the iterations at run time and calls the __parallel launcher or
// the kernel. Sizes of two buffers are the same when the function proves it: the
// allocs take one size value, one linalg loop indexes both.
// RUN: fusegrad-opt %s -p 'dg-cpu-kernels' | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// A softmax over rows of a run-time count: one kernel, the row max on its stack.
// CHECK-LABEL: func.func private @softmax_k0(%arg0: index, %arg1: index, %arg2: memref<?x512xf32>, %arg3: memref<?x512xf32>)
// CHECK: %[[MAX:[a-z0-9_]+]] = memref.alloca() : memref<1xf32>
// CHECK: scf.for %[[I:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: scf.for {{.*}} iter_args
// CHECK: arith.maximumf {{.*}} fastmath<reassoc>
// CHECK: memref.store {{.*}}, %arg3[%[[I]], %{{.*}}] : memref<?x512xf32>
// CHECK-NOT: linalg.
// CHECK-LABEL: func.func @softmax(
// CHECK-NOT: memref.alloc
// CHECK: memref.dim %arg0, %c0
// CHECK: arith.muli %{{.*}}, %c512
// CHECK: %[[BIG:.*]] = arith.cmpi uge, %{{.*}}, %c65536
// CHECK: %[[TWO:.*]] = arith.cmpi uge, %[[ROWS:.*]], %c2
// CHECK: %[[THREADS:.*]] = arith.andi %[[BIG]], %[[TWO]]
// CHECK: scf.if %[[THREADS]] {
// CHECK: func.call @softmax_k0__parallel(%[[ROWS]], %arg0, %arg1)
// CHECK: } else {
// CHECK: func.call @softmax_k0(%c0{{.*}}, %[[ROWS]], %arg0, %arg1)
func.func @softmax(%x: memref<?x512xf32>, %y: memref<?x512xf32>) {
  %c0 = arith.constant 0 : index
  %ninf = arith.constant 0xFF800000 : f32
  %n = memref.dim %x, %c0 : memref<?x512xf32>
  %m = memref.alloc(%n) : memref<?xf32>
  linalg.fill ins(%ninf : f32) outs(%m : memref<?xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x512xf32>) outs(%m : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.maximumf %acc, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<?x512xf32>, memref<?xf32>) outs(%y : memref<?x512xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %0 = arith.subf %in, %mx : f32
    %1 = math.exp %0 : f32
    linalg.yield %1 : f32
  }
  memref.dealloc %m : memref<?xf32>
  return
}

// Rows of a run-time length (attention scores: the sequence length is the row's): the
// inner loops end at the length the kernel reads from its argument, the max runs in
// 16 lanes up to the length's last multiple of 16, then the rest; the row temporary
// (exp) of run-time length is one heap row per kernel call.
// CHECK-LABEL: func.func private @scores_k{{[0-9]+}}(%arg0: index, %arg1: index, %arg2: memref<?x?xf32>, %arg3: memref<?x?xf32>)
// CHECK: %[[LEN:.*]] = memref.dim %arg2, %c1
// CHECK: %[[ROW:.*]] = memref.alloc(%[[LEN]]) : memref<1x?xf32>
// CHECK: scf.for %[[I:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: %[[Q:.*]] = arith.divui %[[LEN]], %c16
// CHECK: %[[MAIN:.*]] = arith.muli %[[Q]], %c16
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[MAIN]] step %c16
// CHECK-COUNT-16: arith.maximumf {{.*}} fastmath<reassoc>
// CHECK: scf.for %{{.*}} = %[[MAIN]] to %[[LEN]] step %c1
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[LEN]] step %c1
// CHECK: memref.store %{{.*}}, %[[ROW]][%c0{{.*}}, %{{.*}}] : memref<1x?xf32>
// CHECK: memref.dealloc %[[ROW]] : memref<1x?xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func @scores(
// CHECK-NOT: memref.alloc(
// CHECK: scf.if
func.func @scores(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %ninf = arith.constant 0xFF800000 : f32
  %n = memref.dim %x, %c0 : memref<?x?xf32>
  %l = memref.dim %x, %c1 : memref<?x?xf32>
  %m = memref.alloc(%n) : memref<?xf32>
  linalg.fill ins(%ninf : f32) outs(%m : memref<?xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<?x?xf32>) outs(%m : memref<?xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.maximumf %acc, %in : f32
    linalg.yield %0 : f32
  }
  %e = memref.alloc(%n, %l) : memref<?x?xf32>
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : memref<?x?xf32>, memref<?xf32>) outs(%e : memref<?x?xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %0 = arith.subf %in, %mx : f32
    %1 = math.exp %0 : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e : memref<?x?xf32>) outs(%y : memref<?x?xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  memref.dealloc %m : memref<?xf32>
  memref.dealloc %e : memref<?x?xf32>
  return
}

// A reduction over a run-time number of rows (a bias gradient) after a row loop joins
// its kernel: blocks of rows accumulate partial rows in a buffer of a block per 64 rows
// (at least 16 rows a block, the combine's share; at most 64 blocks below 4096 rows),
// the block size and count computed from the row count, in the kernel as in its
// caller, which adds the blocks it ran in f64.
// CHECK-LABEL: func.func private @bias_grad_k{{[0-9]+}}(%arg0: index, %arg1: index
// CHECK-SAME: %arg2: memref<?x1024xf32>, %arg3: memref<?x1024xf32>, %[[P:[a-z0-9_]+]]: memref<?x1024xf32>)
// CHECK: %[[N:.*]] = memref.dim %arg2, %c0
// CHECK: arith.minui %{{.*}}, %c64
// CHECK: arith.maxui %{{.*}}, %c16
// CHECK: arith.minui %{{.*}}, %[[N]]
// CHECK: %[[PER:.*]] = arith.maxui
// CHECK: scf.for %[[B:[a-z0-9_]+]] = %arg0 to %arg1
// CHECK: memref.store %{{.*}}, %[[P]][%[[B]], %{{.*}}]
// CHECK: %[[LO:.*]] = arith.muli %[[B]], %[[PER]]
// CHECK: %[[HI:.*]] = arith.addi %[[LO]], %[[PER]]
// CHECK: %[[END:.*]] = arith.minsi %[[HI]], %[[N]]
// CHECK: scf.for %[[R:[a-z0-9_]+]] = %[[LO]] to %[[END]]
// CHECK-LABEL: func.func @bias_grad(
// CHECK: arith.minui
// CHECK: %[[BLOCKS:.*]] = arith.divui
// CHECK-NEXT: %[[PART:.*]] = memref.alloc(%[[BLOCKS]]) : memref<?x1024xf32>
// CHECK: scf.if
// CHECK: func.call @bias_grad_k{{[0-9]+}}__parallel(%[[BLOCKS]], %arg0, %arg1, %[[PART]])
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %[[BLOCKS]] step
// CHECK: arith.addf %{{.*}} : f64
// CHECK: memref.dealloc %[[PART]]
func.func @bias_grad(%x: memref<?x1024xf32>, %dx: memref<?x1024xf32>, %db: memref<1024xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x1024xf32>) outs(%dx : memref<?x1024xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.mulf %in, %in : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dx : memref<?x1024xf32>) outs(%db : memref<1024xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %0 = arith.addf %acc, %in : f32
    linalg.yield %0 : f32
  }
  return
}

// Rows whose equality nothing proves (two arguments of run-time sizes that no op
// relates) get a kernel each.
// CHECK-LABEL: func.func @unrelated(
// CHECK: call @unrelated_k{{[0-9]+}}(
// CHECK: call @unrelated_k{{[0-9]+}}(
func.func @unrelated(%x: memref<?x8xf32>, %y: memref<?x8xf32>, %a: memref<?x8xf32>, %b: memref<?x8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x8xf32>) outs(%a : memref<?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : memref<?x8xf32>) outs(%b : memref<?x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}

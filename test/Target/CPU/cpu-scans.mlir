// dg-cpu-scans: each dg.scan loop nest (found by its dg.scan attribute) becomes a
// kernel @<function>_scanN(lo, hi, x, results...), called through its __parallel
// launcher (libgomp's threads) when the scan has 65536 elements and two positions to
// share.
// - Along the last dim, each row in 64-byte vectors: the vector scanned on its own (a
//   combine with itself shifted by 1, 2, 4, 8 lanes, the identity shifted in), then
//   combined with the carry (the previous vector's last lane), the rest of the row a
//   scalar loop. f32 sums run in f64 lanes, rounded when stored.
// - A reverse scan runs the vectors from the end of the row, shifting the other way;
//   the carry is lane 0. max/min carry (value, index) vectors; within a vector the
//   indices are i32 lane numbers, offset after its scan.
// - Along another dim, the scanned loop goes outside the contiguous dims after it,
//   the running values of one slice in a buffer; threads split the columns. LLVM
//   vectorizes that loop, except logaddexp's, which goes in vectors here.
// RUN: fusegrad-opt %s -p 'dg-lower-to-linalg,dg-cpu-bufferize,dg-cpu-scans,canonicalize,cse' | filecheck %s

// CHECK-LABEL: func.func private @rows_scan0(
// CHECK-SAME: %[[LO:.*]]: index, %[[HI:.*]]: index, %[[X:.*]]: memref<4x?xf32>, %[[Y:.*]]: memref<4x?xf32>)
// CHECK-SAME: dg.noalias_pointers
// CHECK: %[[N:.*]] = memref.dim %[[X]]
// CHECK: %[[TAIL:.*]] = arith.remui %[[N]], %c16
// CHECK: %[[WHOLE:.*]] = arith.subi %[[N]], %[[TAIL]]
// CHECK: scf.for %[[R:.*]] = %[[LO]] to %[[HI]]
// CHECK: %[[C:.*]] = scf.for %[[J:.*]] = %c0 to %[[WHOLE]] step %c16 iter_args(%[[CARRY:.*]] = %{{.*}}) -> (vector<16xf64>)
// CHECK: %[[V:.*]] = vector.load %[[X]][%[[R]], %[[J]]] : memref<4x?xf32>, vector<16xf32>
// CHECK: %[[W:.*]] = arith.extf %[[V]] : vector<16xf32> to vector<16xf64>
// CHECK: vector.shuffle %{{.*}}, %[[W]] [0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]
// CHECK: vector.shuffle {{.*}} [0, 1, 16, 17,
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 16, 17,
// CHECK: vector.shuffle {{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17,
// CHECK: %[[S:.*]] = arith.addf
// CHECK: %[[OUT:.*]] = arith.addf %[[CARRY]], %[[S]] : vector<16xf64>
// CHECK: %[[NARROW:.*]] = arith.truncf %[[OUT]] : vector<16xf64> to vector<16xf32>
// CHECK: vector.store %[[NARROW]], %[[Y]][%[[R]], %[[J]]]
// CHECK: vector.shuffle %[[OUT]], %[[OUT]] [15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15]
// CHECK: %[[FIRST:.*]] = vector.extract %[[C]][0]
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[FIRST]]) -> (f64)
// CHECK: memref.load %[[X]]
// CHECK: memref.store {{.*}}, %[[Y]]
// CHECK-LABEL: func.func private @rows_scan0__parallel(index, memref<4x?xf32>, memref<4x?xf32>)
// CHECK-LABEL: func.func @rows(
// CHECK: %[[SIZE:.*]] = arith.muli
// CHECK: %[[BIG:.*]] = arith.cmpi uge, %[[SIZE]], %c65536
// CHECK: scf.if %[[BIG]]
// CHECK: call @rows_scan0__parallel(%c4, %arg0, %arg1)
// CHECK: } else {
// CHECK: call @rows_scan0(%c0, %c4, %arg0, %arg1)
func.func @rows(%x: tensor<4x?xf32, "s0">) -> tensor<4x?xf32, "s0"> {
  %0 = "dg.scan"(%x) {combiner = "add", dim = 1 : i64, reverse = 0 : i64} : (tensor<4x?xf32, "s0">) -> tensor<4x?xf32, "s0">
  return %0 : tensor<4x?xf32, "s0">
}

// CHECK-LABEL: func.func private @rows_max_reverse_scan0(
// CHECK: scf.for %{{.*}} = %c0 to %c96 step %c8 iter_args(%[[V:.*]] = %{{.*}}, %[[K:.*]] = %{{.*}}) -> (vector<8xf64>, vector<8xi64>)
// CHECK: %[[START:.*]] = arith.subi %c92,
// CHECK: vector.load %{{.*}}[%{{.*}}, %[[START]]]
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [1, 2, 3, 4, 5, 6, 7, 15] : vector<8xf64>, vector<8xf64>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [2, 3, 4, 5, 6, 7, 14, 15] : vector<8xi32>, vector<8xi32>
// CHECK: %[[LANE:.*]] = arith.extsi %{{.*}} : vector<8xi32> to vector<8xi64>
// CHECK: %[[BASE:.*]] = vector.broadcast %{{.*}} : i64 to vector<8xi64>
// CHECK: arith.addi %[[LANE]], %[[BASE]] : vector<8xi64>
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %[[START]]] : memref<8x100xf64>, vector<8xf64>
// CHECK: vector.store %{{.*}}, %{{.*}}[%{{.*}}, %[[START]]] : memref<8x100xi64>, vector<8xi64>
// CHECK: vector.shuffle {{.*}} [0, 0, 0, 0, 0, 0, 0, 0] : vector<8xf64>
// CHECK: scf.for %[[T:.*]] = %c0 to %c4 step %c1 iter_args
// CHECK: %[[AT:.*]] = arith.subi %c3, %[[T]]
// CHECK: memref.load %{{.*}}[%{{.*}}, %[[AT]]]
// CHECK-LABEL: func.func @rows_max_reverse(
// CHECK-NOT: scf.if
// CHECK: call @rows_max_reverse_scan0(%c0, %c8,
func.func @rows_max_reverse(%x: tensor<8x100xf64>) -> (tensor<8x100xf64>, tensor<8x100xi64>) {
  %0:2 = "dg.scan"(%x) {combiner = "max", dim = 1 : i64, reverse = 1 : i64} : (tensor<8x100xf64>) -> (tensor<8x100xf64>, tensor<8x100xi64>)
  return %0#0, %0#1 : tensor<8x100xf64>, tensor<8x100xi64>
}

// CHECK-LABEL: func.func private @columns_scan0(
// CHECK-SAME: %[[LO:.*]]: index, %[[HI:.*]]: index, %[[X:.*]]: memref<1024x1024xf32>, %[[Y:.*]]: memref<1024x1024xf32>)
// CHECK: %[[RUNNING:.*]] = memref.alloc() : memref<1024xf64>
// CHECK: scf.for %[[J:.*]] = %[[LO]] to %[[HI]]
// CHECK: memref.store %{{.*}}, %[[RUNNING]][%[[J]]]
// CHECK: scf.for %[[I:.*]] = %c0 to %c1024
// CHECK: scf.for %[[J:.*]] = %[[LO]] to %[[HI]]
// CHECK: %[[OLD:.*]] = memref.load %[[RUNNING]][%[[J]]]
// CHECK: %[[E:.*]] = memref.load %[[X]][%[[I]], %[[J]]]
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]],
// CHECK: memref.store %[[NEW]], %[[RUNNING]][%[[J]]]
// CHECK: memref.store %{{.*}}, %[[Y]][%[[I]], %[[J]]]
// CHECK: memref.dealloc %[[RUNNING]]
// CHECK-LABEL: func.func @columns(
// CHECK: call @columns_scan0__parallel(%c1024, %arg0, %arg1)
func.func @columns(%x: tensor<1024x1024xf32>) -> tensor<1024x1024xf32> {
  %0 = "dg.scan"(%x) {combiner = "add", dim = 0 : i64, reverse = 0 : i64} : (tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  return %0 : tensor<1024x1024xf32>
}

// f32 log-sum-exps along columns: 16 columns at a time, their running values f64
// vectors, the step exp and log1p on f32 vectors; the columns past the last whole
// vector one at a time.
// CHECK-LABEL: func.func private @log_columns_scan0(
// CHECK-SAME: %[[LO:.*]]: index, %[[HI:.*]]: index, %[[X:.*]]: memref<8x40xf32>, %[[Y:.*]]: memref<8x40xf32>)
// CHECK: %[[RUNNING:.*]] = memref.alloc() : memref<40xf64>
// CHECK: scf.for %[[I:.*]] = %c0 to %c8
// CHECK: %[[SPAN:.*]] = arith.subi %[[HI]], %[[LO]]
// CHECK: %[[REST:.*]] = arith.remui %[[SPAN]], %c16
// CHECK: %[[WHOLE:.*]] = arith.subi %[[HI]], %[[REST]]
// CHECK: scf.for %[[J:.*]] = %[[LO]] to %[[WHOLE]] step %c16
// CHECK: %[[OLD:.*]] = vector.load %[[RUNNING]][%[[J]]] : memref<40xf64>, vector<16xf64>
// CHECK: vector.load %[[X]][%[[I]], %[[J]]] : memref<8x40xf32>, vector<16xf32>
// CHECK: %[[GAP:.*]] = arith.truncf %{{.*}} : vector<16xf64> to vector<16xf32>
// CHECK: math.exp %[[GAP]] : vector<16xf32>
// CHECK: math.log1p %{{.*}} : vector<16xf32>
// CHECK: %[[INFINITE:.*]] = arith.cmpf oeq, %{{.*}} : vector<16xf64>
// CHECK: %[[NEW:.*]] = arith.select %[[INFINITE]], %{{.*}} : vector<16xi1>, vector<16xf64>
// CHECK: vector.store %[[NEW]], %[[RUNNING]][%[[J]]] : memref<40xf64>, vector<16xf64>
// CHECK: %[[OUT:.*]] = arith.truncf %[[NEW]] : vector<16xf64> to vector<16xf32>
// CHECK: vector.store %[[OUT]], %[[Y]][%[[I]], %[[J]]]
// CHECK: scf.for %[[K:.*]] = %[[WHOLE]] to %[[HI]] step %c1
// CHECK: memref.load %[[RUNNING]][%[[K]]] : memref<40xf64>
// CHECK: memref.store %{{.*}}, %[[Y]][%[[I]], %[[K]]]
// CHECK-LABEL: func.func @log_columns(
func.func @log_columns(%x: tensor<8x40xf32>) -> tensor<8x40xf32> {
  %0 = "dg.scan"(%x) {combiner = "logaddexp", dim = 0 : i64, reverse = 0 : i64} : (tensor<8x40xf32>) -> tensor<8x40xf32>
  return %0 : tensor<8x40xf32>
}

// One result of a max scan read: canonicalize dropped the other one's stores, and the
// kernel takes the buffer that is left (values; indices along columns).
// CHECK-LABEL: func.func private @values_only_scan0(
// CHECK-SAME: memref<4x100xf32>, %{{.*}}: memref<4x100xf32>)
// CHECK: vector.store %{{.*}}, %{{.*}} : memref<4x100xf32>, vector<16xf32>
// CHECK-NOT: memref<4x100xi64>
// CHECK-LABEL: func.func @values_only(
func.func @values_only(%x: tensor<4x100xf32>) -> tensor<4x100xf32> {
  %0:2 = "dg.scan"(%x) {combiner = "max", dim = 1 : i64, reverse = 0 : i64} : (tensor<4x100xf32>) -> (tensor<4x100xf32>, tensor<4x100xi64>)
  return %0#0 : tensor<4x100xf32>
}

// CHECK-LABEL: func.func private @indices_only_scan0(
// CHECK-SAME: %[[X:.*]]: memref<4x100xi64>, %[[I:.*]]: memref<4x100xi64>)
// CHECK: %[[HIGHEST:.*]] = arith.constant 9223372036854775807 : i64
// CHECK: memref.store %[[HIGHEST]]
// CHECK: arith.cmpi sle
// CHECK: memref.store %{{.*}}, %[[I]]
// CHECK-NOT: memref.store %{{.*}}, %[[X]]
// CHECK-LABEL: func.func @indices_only(
func.func @indices_only(%x: tensor<4x100xi64>) -> tensor<4x100xi64> {
  %0:2 = "dg.scan"(%x) {combiner = "min", dim = 0 : i64, reverse = 1 : i64} : (tensor<4x100xi64>) -> (tensor<4x100xi64>, tensor<4x100xi64>)
  return %0#1 : tensor<4x100xi64>
}

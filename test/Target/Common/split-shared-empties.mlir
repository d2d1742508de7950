// dg-split-shared-empties: `cse` merges the equal tensor.empty ops that ops of one shape
// write into, and one-shot bufferization analyses every pair of writers of one buffer
// (quadratic in the graph's length: 26 s for an unrolled GRU's backward). Each empty
// keeps at most `uses-per-empty` users, consecutive in program order, and a clone next
// to it serves each further group; a group goes on past that size while each user
// reads the previous one's result (%s below: it may be written in place over %m).
// RUN: fusegrad-opt %s -p 'dg-split-shared-empties{uses-per-empty=2}' | filecheck %s
// RUN: fusegrad-opt %s -p dg-split-shared-empties | filecheck %s --check-prefix=DEFAULT
// RUN: not fusegrad-opt %s -p 'dg-split-shared-empties{uses-per-empty=0}' 2>&1 | filecheck %s --check-prefix=ERR

// CHECK-LABEL: func.func @six_writers
// CHECK-NEXT: %[[E2:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: %[[E3:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: %[[E1:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: %[[A:.*]] = linalg.add {{.*}} outs(%[[E1]] : tensor<8xf32>)
// CHECK-NEXT: %[[M:.*]] = linalg.mul {{.*}} outs(%[[E1]] : tensor<8xf32>)
// CHECK-NEXT: linalg.sub ins(%[[M]], %arg1 : {{.*}}) outs(%[[E1]] : tensor<8xf32>)
// CHECK-NEXT: linalg.add {{.*}} outs(%[[E2]] : tensor<8xf32>)
// CHECK-NEXT: linalg.mul {{.*}} outs(%[[E2]] : tensor<8xf32>)
// CHECK-NEXT: linalg.sub ins(%arg0, %[[A]] : {{.*}}) outs(%[[E3]] : tensor<8xf32>)

// DEFAULT-LABEL: func.func @six_writers
// DEFAULT-COUNT-1: tensor.empty
// DEFAULT-NOT: tensor.empty

// ERR: uses-per-empty must be at least 1, not 0
func.func @six_writers(%x: tensor<8xf32>, %y: tensor<8xf32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %a = linalg.add ins(%x, %y : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %m = linalg.mul ins(%x, %y : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %s = linalg.sub ins(%m, %y : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %b = linalg.add ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %c = linalg.mul ins(%y, %y : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %d = linalg.sub ins(%x, %a : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %s, %b, %c, %d : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// dg-split-shared-empties: `cse` merges the equal tensor.empty ops that ops of one shape
// write into, and one-shot bufferization analyses every pair of writers of one buffer
// (quadratic in the graph's length: 26 s for an unrolled GRU's backward). Each empty
// keeps at most `uses-per-empty` users, consecutive in program order; a clone next to
// it serves each further group.
// RUN: fusegrad-opt %s -p 'dg-split-shared-empties{uses-per-empty=2}' | filecheck %s
// RUN: fusegrad-opt %s -p dg-split-shared-empties | filecheck %s --check-prefix=DEFAULT
// RUN: not fusegrad-opt %s -p 'dg-split-shared-empties{uses-per-empty=0}' 2>&1 | filecheck %s --check-prefix=ERR

// CHECK-LABEL: func.func @five_writers
// CHECK-NEXT: %[[E2:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: %[[E3:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: %[[E1:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT: linalg.add {{.*}} outs(%[[E1]] : tensor<8xf32>)
// CHECK-NEXT: linalg.mul {{.*}} outs(%[[E1]] : tensor<8xf32>)
// CHECK-NEXT: linalg.sub {{.*}} outs(%[[E2]] : tensor<8xf32>)
// CHECK-NEXT: linalg.add {{.*}} outs(%[[E2]] : tensor<8xf32>)
// CHECK-NEXT: linalg.mul {{.*}} outs(%[[E3]] : tensor<8xf32>)

// DEFAULT-LABEL: func.func @five_writers
// DEFAULT-COUNT-1: tensor.empty
// DEFAULT-NOT: tensor.empty

// ERR: uses-per-empty must be at least 1, not 0
func.func @five_writers(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %a = linalg.add ins(%x, %y : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %m = linalg.mul ins(%a, %y : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %s = linalg.sub ins(%m, %a : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %b = linalg.add ins(%s, %m : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %c = linalg.mul ins(%b, %s : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %c : tensor<8xf32>
}

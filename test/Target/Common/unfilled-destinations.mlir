// dg-unfilled-destinations: a destination an outlined function writes whole (argument
// attribute dg.destination) gets a fresh empty tensor instead of a zero fill; the fill
// goes when nothing else reads it, and stays (its empty untouched) when something does.
// Operands that are not destinations, and destinations made otherwise, keep their values.
// RUN: fusegrad-opt %s -p dg-unfilled-destinations | filecheck %s

// CHECK-LABEL: func.func @caller(
// CHECK: %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT: %[[KEPT:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<?x4xf32>)
// CHECK-NEXT: %[[E1:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT: %[[E2:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT: %[[R:.*]]:2 = call @writes(%[[KEPT]], %[[E1]], %[[E2]], %arg1)
// CHECK-NEXT: %[[S:.*]] = arith.addf
// CHECK-NOT: linalg.fill
// CHECK: return
func.func private @writes(%x: tensor<?x4xf32>, %d0: tensor<?x4xf32> {dg.destination}, %d1: tensor<?x4xf32> {dg.destination}, %d2: tensor<?x4xf32> {dg.destination}) -> (tensor<?x4xf32>, tensor<?x4xf32>)

func.func @caller(%a: tensor<?x4xf32>, %given: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %a, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %r:2 = call @writes(%f, %f, %f, %given) : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>)
  %s = arith.addf %zero, %zero : f32
  return %f, %r#0, %r#1 : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>
}

// CHECK-LABEL: func.func @only_destinations(
// CHECK-NOT: linalg.fill
// CHECK: call @writes(%arg0, %{{.*}}, %{{.*}}, %arg0)
func.func @only_destinations(%a: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %a, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %r:2 = call @writes(%a, %f, %f, %a) : (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>)
  return %r#0 : tensor<?x4xf32>
}

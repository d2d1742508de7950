// Symbolic sizes: a `?` dim's size is named by the tensor type's encoding, and an
// integer-array attribute's symbolic entries by its `<name>_sizes` companion. Both
// round-trip, and values of one symbolic shape have one type.
// RUN: fusegrad-opt %s -p dg-verify | fusegrad-opt -p dg-verify | filecheck %s

// CHECK-LABEL: func.func @symbolic
// CHECK-SAME: (%arg0: tensor<?x16xf32, "s0">, %arg1: tensor<?x16xf32, "s0">)
// CHECK: "dg.add"(%arg0, %arg1) : (tensor<?x16xf32, "s0">, tensor<?x16xf32, "s0">) -> tensor<?x16xf32, "s0">
// CHECK: "dg.reshape"(%{{.*}}) : (tensor<?x16xf32, "s0">) -> tensor<?xf32, "16*s0">
// CHECK: "dg.concatenate"(%arg0, %arg1) {dim = 0 : i64} : (tensor<?x16xf32, "s0">, tensor<?x16xf32, "s0">) -> tensor<?x16xf32, "2*s0">
// CHECK: "dg.slice"(%{{.*}}) {limit = array<i64: -9223372036854775808, 16>, limit_sizes = "2*s0 - 1", start = array<i64: 1, 0>, stride = array<i64: 1, 1>} : (tensor<?x16xf32, "2*s0">) -> tensor<?x16xf32, "2*s0 - 2">
func.func @symbolic(%x: tensor<?x16xf32, "s0">, %y: tensor<?x16xf32, "s0">) -> (tensor<?xf32, "16*s0">, tensor<?x16xf32, "2*s0 - 2">) {
  %0 = "dg.add"(%x, %y) : (tensor<?x16xf32, "s0">, tensor<?x16xf32, "s0">) -> tensor<?x16xf32, "s0">
  %1 = "dg.reshape"(%0) : (tensor<?x16xf32, "s0">) -> tensor<?xf32, "16*s0">
  %2 = "dg.concatenate"(%x, %y) {dim = 0 : i64} : (tensor<?x16xf32, "s0">, tensor<?x16xf32, "s0">) -> tensor<?x16xf32, "2*s0">
  %3 = "dg.slice"(%2) {start = array<i64: 1, 0>, limit = array<i64: -9223372036854775808, 16>, limit_sizes = "2*s0 - 1", stride = array<i64: 1, 1>} : (tensor<?x16xf32, "2*s0">) -> tensor<?x16xf32, "2*s0 - 2">
  return %1, %3 : tensor<?xf32, "16*s0">, tensor<?x16xf32, "2*s0 - 2">
}

// Two symbols, and a static dim next to them: the encoding names the `?` dims only.
// CHECK-LABEL: func.func @two_symbols
// CHECK: "dg.matmul"(%arg0, %arg1) : (tensor<?x?x8xf32, "s0, s1">, tensor<?x8x?xf32, "s0, s1">) -> tensor<?x?x?xf32, "s0, s1, s1">
func.func @two_symbols(%a: tensor<?x?x8xf32, "s0, s1">, %b: tensor<?x8x?xf32, "s0, s1">) -> tensor<?x?x?xf32, "s0, s1, s1"> {
  %0 = "dg.matmul"(%a, %b) : (tensor<?x?x8xf32, "s0, s1">, tensor<?x8x?xf32, "s0, s1">) -> tensor<?x?x?xf32, "s0, s1, s1">
  return %0 : tensor<?x?x?xf32, "s0, s1, s1">
}

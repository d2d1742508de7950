// dg and upstream passes mix in one pipeline, nested pipelines included;
// stdin, -o, --print-ir-after-all and --mlir-timing behave as in mlir-opt.
// RUN: fusegrad-opt %s -p 'dg-verify,func.func(canonicalize),cse' | filecheck %s
// RUN: cat %s | fusegrad-opt - -p 'builtin.module(func.func(canonicalize))' | filecheck %s
// RUN: fusegrad-opt %s -o %t && filecheck %s < %t
// RUN: fusegrad-opt %s -p 'dg-verify,func.func(canonicalize)' --print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=IR
// RUN: fusegrad-opt %s --mlir-print-debuginfo | filecheck %s --check-prefix=LOC
// RUN: fusegrad-opt %s -p 'dg-verify,cse' --mlir-timing 2>&1 >/dev/null | filecheck %s --check-prefix=TIME

// CHECK-LABEL: func.func @f(
// CHECK: "dg.exp"
// CHECK-NOT: arith.addi
// TIME: Execution time report
// TIME: dg-verify
// TIME: CSE
// IR: IR Dump After dg-verify
// IR: IR Dump After Canonicalizer
// LOC: "dg.exp"{{.*}} loc(
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %unused = arith.addi %c1, %c2 : i32
  %0 = "dg.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

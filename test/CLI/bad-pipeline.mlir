// Unknown passes and bad pass options are located in the pipeline text.
// RUN: not fusegrad-opt %s -p 'dg-verify,bogus-pass' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN: <pass-pipeline>:1:11: error: 'bogus-pass' does not refer to a registered pass
// RUN: not fusegrad-opt %s -p 'func.func(cse,nope)' 2>&1 | filecheck %s --check-prefix=NESTED
// NESTED: <pass-pipeline>:1:15: error: 'nope' does not refer to a registered pass
// RUN: not fusegrad-opt %s -p 'canonicalize{bad-opt=1}' 2>&1 | filecheck %s --check-prefix=UPSTREAM-OPT
// UPSTREAM-OPT: <pass-pipeline>:1:1: error: no such option bad-opt
// RUN: not fusegrad-opt %s -p 'cse,dg-verify{max=3}' 2>&1 | filecheck %s --check-prefix=DG-OPT
// DG-OPT: <pass-pipeline>:1:5: error: pass dg-verify has no option 'max'
// RUN: not fusegrad-opt %s -p 'func.func(cse' 2>&1 | filecheck %s --check-prefix=UNBALANCED
// UNBALANCED: <pass-pipeline>:1:1: error: unbalanced brackets or quotes
// CHECK-NOT: Traceback

func.func @f() {
  return
}

// A missing input or unwritable output file is an error naming the file.
// RUN: not fusegrad-opt %s.does-not-exist 2>&1 | filecheck %s --check-prefix=INPUT
// INPUT: missing-file.mlir.does-not-exist: error: could not open input file: No such file or directory
// RUN: not fusegrad-opt %s -o %s.no-such-dir/out.mlir 2>&1 | filecheck %s --check-prefix=OUTPUT
// OUTPUT: out.mlir: error: could not open output file: No such file or directory

func.func @f() {
  return
}

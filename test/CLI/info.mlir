// --list-passes and --dump-dialect describe what the tool knows.
// RUN: fusegrad-opt --list-passes | filecheck %s --check-prefix=PASSES
// PASSES: dg passes:
// PASSES: dg-verify {{.*}}check dg shape
// PASSES: Upstream passes: every pass that mlir-opt registers
// RUN: fusegrad-opt --dump-dialect | filecheck %s --check-prefix=IRDL
// IRDL: irdl.dialect @dg {
// IRDL: irdl.operation @matmul {
// IRDL: irdl.operands(lhs: %in0, rhs: %in1)
// RUN: %python -m fusegrad.opt --list-passes | filecheck %s --check-prefix=PASSES

// dg-internal-kernels: private definitions (outlined kernels) get internal linkage,
// so the ExecutionEngine builds no packed `_mlir_` wrapper that LLVM would inline
// each kernel into; entries and declarations keep external linkage.
// RUN: fusegrad-opt %s -p 'dg-internal-kernels' | filecheck %s

// CHECK: llvm.func internal @entry_k0(
// CHECK: llvm.func @entry(
// CHECK: llvm.func @sgemm_(
llvm.func @entry_k0(%x: i64) attributes {sym_visibility = "private"} {
  llvm.return
}
llvm.func @entry(%x: i64) attributes {llvm.emit_c_interface} {
  llvm.call @entry_k0(%x) : (i64) -> ()
  llvm.return
}
llvm.func @sgemm_(i64) attributes {sym_visibility = "private"}

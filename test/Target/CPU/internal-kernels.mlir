// dg-internal-kernels: private definitions (outlined kernels) get internal linkage,
// and so does an entry called through its C interface (`_mlir_ciface_<name>`), so
// the ExecutionEngine builds no packed `_mlir_` wrapper for them; the C interface,
// other public definitions and declarations keep external linkage.
// RUN: fusegrad-opt %s -p 'dg-internal-kernels' | filecheck %s

// CHECK: llvm.func internal @entry_k0(
// CHECK: llvm.func internal @entry(
// CHECK: llvm.func @_mlir_ciface_entry(
// CHECK: llvm.func @other(
// CHECK: llvm.func @sgemm_(
llvm.func @entry_k0(%x: i64) attributes {sym_visibility = "private"} {
  llvm.return
}
llvm.func @entry(%x: i64) attributes {llvm.emit_c_interface} {
  llvm.call @entry_k0(%x) : (i64) -> ()
  llvm.return
}
llvm.func @_mlir_ciface_entry(%x: i64) attributes {llvm.emit_c_interface} {
  llvm.call @entry(%x) : (i64) -> ()
  llvm.return
}
llvm.func @other(%x: i64) {
  llvm.return
}
llvm.func @sgemm_(i64) attributes {sym_visibility = "private"}

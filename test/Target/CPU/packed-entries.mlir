// dg-packed-entries: each defined C interface `_mlir_ciface_<name>` gets the packed
// wrapper `_mlir__mlir_ciface_<name>(void **args)` the runtime calls (the
// ExecutionEngine's convention, for code compiled by LLVM's tools): argument i is
// loaded through args[i], a result is stored through args[n]. Declarations and
// functions that are no C interface get none, nor does one that has a wrapper.
// RUN: fusegrad-opt %s -p 'dg-packed-entries' | filecheck %s

// CHECK-LABEL: llvm.func @_mlir__mlir_ciface_entry(%{{.*}}: !llvm.ptr) {
// CHECK: %[[S0:.*]] = llvm.getelementptr %{{.*}}[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[P0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[A0:.*]] = llvm.load %[[P0]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.getelementptr %{{.*}}[1]
// CHECK: %[[A1:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i64
// CHECK: llvm.call @_mlir_ciface_entry(%[[A0]], %[[A1]]) : (!llvm.ptr, i64) -> ()
// CHECK: llvm.return

// CHECK-LABEL: llvm.func @_mlir__mlir_ciface_take(%{{.*}}: !llvm.ptr) {
// CHECK: %[[R:.*]] = llvm.call @_mlir_ciface_take() : () -> i32
// CHECK: %[[SR:.*]] = llvm.getelementptr %{{.*}}[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[PR:.*]] = llvm.load %[[SR]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.store %[[R]], %[[PR]] : i32, !llvm.ptr

// CHECK-NOT: @_mlir__mlir_ciface_wrapped(
// CHECK-NOT: @_mlir_other
// CHECK-NOT: @_mlir__mlir_ciface_declared
llvm.func @_mlir_ciface_entry(%d: !llvm.ptr, %n: i64) {
  llvm.return
}
llvm.func @_mlir_ciface_take() -> i32 {
  %0 = llvm.mlir.constant(0 : i32) : i32
  llvm.return %0 : i32
}
llvm.func @_mlir_ciface_wrapped() {
  llvm.return
}
llvm.func @_mlir__mlir_ciface_wrapped(%p: !llvm.ptr) {
  llvm.call @_mlir_ciface_wrapped() : () -> ()
  llvm.return
}
llvm.func @other(%x: i64) {
  llvm.return
}
llvm.func @_mlir_ciface_declared(!llvm.ptr)

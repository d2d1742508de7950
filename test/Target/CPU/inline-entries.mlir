// dg-inline-entries: an entry's body moves into its C interface, which called it with
// every field of every memref descriptor; the interface's loads feed the body's uses,
// the entry's returns continue after the call (with its result), and the entry is gone. An entry whose
// interface calls it twice is left as it is.
// RUN: fusegrad-opt %s -p 'dg-inline-entries' | filecheck %s

// CHECK-NOT: llvm.func @entry(
// CHECK-LABEL: llvm.func @_mlir_ciface_entry(%arg0: !llvm.ptr)
// CHECK: %[[S:.*]] = llvm.load %arg0
// CHECK: %[[P:.*]] = llvm.extractvalue %[[S]][1]
// CHECK-NOT: llvm.call @entry
// CHECK: llvm.br ^[[BODY:bb[0-9]+]]
// CHECK: ^[[AFTER:bb[0-9]+]]:
// CHECK-NEXT: llvm.return
// CHECK: ^[[BODY]]:
// CHECK: llvm.call @entry_k0(%[[P]])
// CHECK: llvm.cond_br %{{.*}}, ^[[LAST:bb[0-9]+]], ^[[OTHER:bb[0-9]+]]
// CHECK: ^[[LAST]]:
// CHECK-NEXT: llvm.call @entry_k0
// CHECK-NEXT: llvm.br ^[[AFTER]]
// CHECK: ^[[OTHER]]:
// CHECK-NEXT: llvm.br ^[[AFTER]]
llvm.func @entry_k0(!llvm.ptr) attributes {sym_visibility = "private"}
llvm.func @entry(%alloc: !llvm.ptr, %aligned: !llvm.ptr, %offset: i64, %size: i64, %stride: i64) {
  llvm.call @entry_k0(%aligned) : (!llvm.ptr) -> ()
  %c = llvm.icmp "eq" %size, %offset : i64
  llvm.cond_br %c, ^bb1, ^bb2
^bb1:
  llvm.call @entry_k0(%aligned) : (!llvm.ptr) -> ()
  llvm.return
^bb2:
  llvm.return
}
llvm.func @_mlir_ciface_entry(%d: !llvm.ptr) {
  %s = llvm.load %d : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %0 = llvm.extractvalue %s[0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %1 = llvm.extractvalue %s[1] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %2 = llvm.extractvalue %s[2] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %3 = llvm.extractvalue %s[3, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  %4 = llvm.extractvalue %s[4, 0] : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)>
  llvm.call @entry(%0, %1, %2, %3, %4) : (!llvm.ptr, !llvm.ptr, i64, i64, i64) -> ()
  llvm.return
}

// A result: the entry's returned value reaches the interface's uses of the call.
// CHECK-LABEL: llvm.func @_mlir_ciface_value(
// CHECK: llvm.br ^[[VBODY:bb[0-9]+]]
// CHECK: ^[[VAFTER:bb[0-9]+]](%[[R:[0-9]+]]: i64):
// CHECK-NEXT: llvm.store %[[R]]
// CHECK: ^[[VBODY]]:
// CHECK-NEXT: %[[V:[0-9]+]] = llvm.add
// CHECK-NEXT: llvm.br ^[[VAFTER]](%[[V]] : i64)
llvm.func @value(%x: i64) -> i64 {
  %0 = llvm.add %x, %x : i64
  llvm.return %0 : i64
}
llvm.func @_mlir_ciface_value(%out: !llvm.ptr, %x: i64) {
  %0 = llvm.call @value(%x) : (i64) -> i64
  llvm.store %0, %out : i64, !llvm.ptr
  llvm.return
}

// CHECK-LABEL: llvm.func @twice(
// CHECK-LABEL: llvm.func @_mlir_ciface_twice(
// CHECK: llvm.call @twice(
// CHECK: llvm.call @twice(
llvm.func @twice(%x: i64) {
  llvm.return
}
llvm.func @_mlir_ciface_twice(%x: i64) {
  llvm.call @twice(%x) : (i64) -> ()
  llvm.call @twice(%x) : (i64) -> ()
  llvm.return
}

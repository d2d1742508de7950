// dg-half-loads-as-i16: a private function's bf16/f16 arguments and results become i16,
// bitcast at its entry, its returns and its calls (without AVX512-BF16, LLVM narrowed
// a bf16 argument for the call with __truncsfbf2, which libgcc_s has only from GCC 13);
// a public function's signature is left alone.
// RUN: fusegrad-opt %s -p 'dg-half-loads-as-i16' | filecheck %s

// CHECK-LABEL: llvm.func internal @running_max(%arg0: i16, %arg1: f32) -> i16
// CHECK-NEXT: %[[X:.*]] = llvm.bitcast %arg0 : i16 to bf16
// CHECK-NEXT: %[[E:.*]] = llvm.fpext %[[X]] : bf16 to f32
// CHECK:      %[[R:.*]] = llvm.bitcast %{{.*}} : bf16 to i16
// CHECK-NEXT: llvm.return %[[R]] : i16
llvm.func internal @running_max(%x: bf16, %y: f32) -> bf16 {
  %e = llvm.fpext %x : bf16 to f32
  %m = llvm.intr.maximum(%e, %y) : (f32, f32) -> f32
  %t = llvm.fptrunc %m : f32 to bf16
  llvm.return %t : bf16
}

// CHECK-LABEL: llvm.func @entry(%arg0: bf16) -> bf16
// CHECK:      %[[A:.*]] = llvm.bitcast %arg0 : bf16 to i16
// CHECK:      %[[C:.*]] = llvm.call @running_max(%[[A]], %{{.*}}) : (i16, f32) -> i16
// CHECK-NEXT: %[[F:.*]] = llvm.bitcast %[[C]] : i16 to bf16
// CHECK-NEXT: llvm.return %[[F]] : bf16
llvm.func @entry(%x: bf16) -> bf16 {
  %y = llvm.mlir.constant(1.0 : f32) : f32
  %r = llvm.call @running_max(%x, %y) : (bf16, f32) -> bf16
  llvm.return %r : bf16
}

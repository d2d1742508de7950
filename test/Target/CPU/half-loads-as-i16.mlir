// dg-half-loads-as-i16: loads and stores of bf16/f16 scalars and vectors move i16 bits
// and bitcast in registers (LLVM's X86 backend with AVX512-BF16 aborts on the masked
// loads of odd-length bf16 vectors that SLP makes of a small strided copy); other
// types are left alone.
// RUN: fusegrad-opt %s -p 'dg-half-loads-as-i16' | filecheck %s

// CHECK-LABEL: llvm.func @copy(
// CHECK: %[[B:.*]] = llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr -> i16
// CHECK: %[[X:.*]] = llvm.bitcast %[[B]] : i16 to bf16
// CHECK: %[[E:.*]] = llvm.fpext %[[X]] : bf16 to f32
// CHECK: %[[Y:.*]] = llvm.bitcast %[[X]] : bf16 to i16
// CHECK: llvm.store %[[Y]], %{{.*}} {alignment = 2 : i64} : i16, !llvm.ptr
// CHECK: %[[V:.*]] = llvm.load %{{.*}} : !llvm.ptr -> vector<16xi16>
// CHECK: llvm.bitcast %[[V]] : vector<16xi16> to vector<16xf16>
// CHECK: llvm.load %{{.*}} : !llvm.ptr -> f32
llvm.func @copy(%p: !llvm.ptr, %q: !llvm.ptr) -> f32 {
  %x = llvm.load %p {alignment = 2 : i64} : !llvm.ptr -> bf16
  %e = llvm.fpext %x : bf16 to f32
  llvm.store %x, %q {alignment = 2 : i64} : bf16, !llvm.ptr
  %v = llvm.load %p : !llvm.ptr -> vector<16xf16>
  llvm.store %v, %q : vector<16xf16>, !llvm.ptr
  %f = llvm.load %p : !llvm.ptr -> f32
  llvm.return %f : f32
}

// dg-expand-math{ldexp=1} (compile_cpu's choice on AVX-512 hosts): exp scales its
// polynomial by 2**n with one llvm.intr.ldexp (vscalefps) instead of two
// multiplications by exponents built with shifts, in scalar code (LLVM vectorizes
// the loop around it); vector code keeps the shifts (the op takes no vector exponent).
// RUN: fusegrad-opt %s -p 'dg-expand-math{ldexp=1}' | filecheck %s

// CHECK-LABEL: func.func @exp(
// CHECK-NOT: math.exp
// CHECK-NOT: arith.shli
// CHECK: %[[N:.*]] = arith.fptosi {{.*}} : f32 to i32
// CHECK: llvm.intr.ldexp({{.*}}, %[[N]]) : (f32, i32) -> f32
func.func @exp(%x: f32) -> f32 {
  %0 = math.exp %x : f32
  return %0 : f32
}

// CHECK-LABEL: func.func @vexp(
// CHECK-NOT: llvm.intr.ldexp
// CHECK: arith.shli
func.func @vexp(%x: vector<16xf32>) -> vector<16xf32> {
  %0 = math.exp %x : vector<16xf32>
  return %0 : vector<16xf32>
}

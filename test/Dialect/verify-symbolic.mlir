// Shape rules check symbolic sizes: provably different sizes are errors; conditions
// that only the sizes' values decide (a static slice bound inside a symbolic dim) are
// accepted, as the capture's guards ensure them.
// RUN: fusegrad-opt %s --split-input-file --verify-diagnostics

func.func @different_symbols(%a: tensor<?x4xf32, "s0">, %b: tensor<?x4xf32, "s1">) {
  // expected-error @+1 {{'dg.add' op operand #1 has shape [s1, 4] but operand #0 has [s0, 4]; broadcast explicitly with dg.broadcast_in_dim}}
  %0 = "dg.add"(%a, %b) : (tensor<?x4xf32, "s0">, tensor<?x4xf32, "s1">) -> tensor<?x4xf32, "s0">
  return
}

// -----

func.func @reshape_count(%x: tensor<?x4xf32, "s0">) {
  // expected-error @+1 {{'dg.reshape' op cannot reshape 4*s0 elements [s0, 4] into 4*s0 + 1 elements [4*s0 + 1]}}
  %0 = "dg.reshape"(%x) : (tensor<?x4xf32, "s0">) -> tensor<?xf32, "4*s0 + 1">
  return
}

// -----

func.func @matmul_inner(%a: tensor<?x?xf32, "s0, s1">, %b: tensor<?x8xf32, "s0">) {
  // expected-error @+1 {{'dg.matmul'}}
  %0 = "dg.matmul"(%a, %b) : (tensor<?x?xf32, "s0, s1">, tensor<?x8xf32, "s0">) -> tensor<?x8xf32, "s0">
  return
}

// -----

func.func @static_bound_in_symbolic_dim(%x: tensor<?x4xf32, "s0">) -> tensor<3x4xf32> {
  %0 = "dg.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 3, 4>, stride = array<i64: 1, 1>} : (tensor<?x4xf32, "s0">) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @bound_past_static_dim(%x: tensor<?x4xf32, "s0">) {
  // expected-error @+1 {{'dg.slice' op bounds [0, 5) out of range for dim 1 of size 4}}
  %0 = "dg.slice"(%x) {start = array<i64: 0, 0>, limit = array<i64: 3, 5>, stride = array<i64: 1, 1>} : (tensor<?x4xf32, "s0">) -> tensor<3x5xf32>
  return
}

// -----

func.func @unnamed_size(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{a dg tensor's `?` dims need their sizes as the type's encoding}}
  %0 = "dg.exp"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return
}

// RUN: pmapc opt %s --split-input-file --verify-diagnostics

// With no passes, `pmapc opt` still checks every pmapc op's schema after
// parsing, as mlir-opt verifies every op.

func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{unknown pmapc op 'pmapc.bogus'}}
  %0 = stablehlo.custom_call @pmapc.bogus(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{'pmapc.psum' is missing 'axes' in its backend_config}}
  %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {}} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

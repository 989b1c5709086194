// A malformed `pmapc.mesh` (hand-written flattened modules) is an error at the
// module's location naming 'pmapc.mesh'.

// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives)' --split-input-file --verify-diagnostics

// expected-error@+1 {{'pmapc.mesh'}}
module @names_and_sizes_of_different_lengths attributes {pmapc.mesh = {axis_names = ["i", "j"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// expected-error@+1 {{'pmapc.mesh'}}
module @axis_name_given_twice attributes {pmapc.mesh = {axis_names = ["i", "i"], axis_sizes = array<i64: 2, 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

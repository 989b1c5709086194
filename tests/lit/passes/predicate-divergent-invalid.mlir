// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps,predicate-divergent)' --split-input-file --verify-diagnostics

// A host callback in a branch whose index differs between the devices of a
// "model" group, around a psum over "model": every device would have to run
// the branch, and so the callback where it was not taken.

module @callback_in_a_divergent_branch {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    %i = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %0 = "stablehlo.case"(%i) ({
      // expected-error@+1 {{a host callback in a branch whose predicate differs between the devices of 'model', around a collective over 'model'}}
      stablehlo.custom_call @xla_ffi_python_cpu_callback(%z) {has_side_effect = true, mhlo.backend_config = {index = 0 : ui64}} : (tensor<8xf32>) -> ()
      %s = stablehlo.custom_call @pmapc.psum(%z) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
      stablehlo.return %s : tensor<8xf32>
    }, {
      stablehlo.return %z : tensor<8xf32>
    }) : (tensor<i32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module @malformed_note {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error@+1 {{'pmapc_predicated' needs 'kind' ("cond" or "while") and 'axes' (axis names) in its backend_config}}
    %0 = stablehlo.custom_call @pmapc_predicated(%x) {api_version = 4 : i32, backend_config = {kind = "loop"}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

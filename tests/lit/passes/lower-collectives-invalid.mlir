// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives)' --split-input-file --verify-diagnostics

// lower-collectives needs flattened input: no maps left, and every axis an
// axis of the module's `pmapc.mesh`.

module @map_still_present attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'pmapc.map' is still here; run flatten-maps before lower-collectives}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @axis_not_in_mesh attributes {pmapc.mesh = {axis_names = ["data"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{axis 'model' is not an axis of the mesh (axes: 'data'); lower-collectives takes a flattened module, its collectives over the axes of 'pmapc.mesh': run flatten-maps first}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// Before flatten-maps renames it, a shadowed inner "i" is not the mesh's "i_1".
module @one_axis_of_a_tuple_not_in_mesh attributes {pmapc.mesh = {axis_names = ["i", "i_1"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{axis 'j' is not an axis of the mesh (axes: 'i', 'i_1'); lower-collectives takes a flattened module, its collectives over the axes of 'pmapc.mesh': run flatten-maps first}}
    %0 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i", "j"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @module_without_mesh {
  func.func public @main() -> tensor<i32> {
    // expected-error@+1 {{axis 'i' is not an axis of the mesh (axes: none); lower-collectives takes a flattened module, its collectives over the axes of 'pmapc.mesh': run flatten-maps first}}
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["i"]}} : () -> tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

module @axis_named_twice attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum' names axis 'i' twice; name each axis once}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i", "i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @unknown_pmapc_target attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{unknown pmapc op 'pmapc.psum_all'}}
    %0 = stablehlo.custom_call @pmapc.psum_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

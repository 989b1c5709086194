// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps)' --split-input-file --verify-diagnostics

// Errors flatten-maps reports on its own, without verify-axes run before it:
// it needs @main, sibling maps whose sizes share a mesh, and every collective's
// axes bound.

module @unbound_axis {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{axis 'model' is not bound here; bound axes are 'data'}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// Inlined callees resolve their axes at the call's depth: here depth 0.
module @callee_collective_called_outside_maps {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = func.call @helper(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @helper(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{axis 'i' is not bound here: no enclosing map binds an axis}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

// Sibling maps may differ (each binds its own mesh axes), but sizes 4 and 6
// cut the devices in ways no one mesh refines.
module @sibling_map_sizes_share_no_layout {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    // expected-error@+1 {{map over 'j' (size 6) cannot share the devices of the maps beside it: its chain of maps splits them 6, the maps before it 4, and no mesh splits them both ways; make the sizes of sibling maps divide one another}}
    %1 = stablehlo.custom_call @pmapc.map(%arg1) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "j", axis_size = 6 : i64, in_axes = [0], out_axes = [0]}} : (tensor<6xf32>) -> tensor<6xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @map_calls_itself_through_a_call {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = func.call @helper(%arg0) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @helper(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> tensor<2xf32>
    // expected-error@+1 {{recursive call @body -> @helper -> @body; maps and calls must not call themselves}}
    %1 = stablehlo.custom_call @pmapc.map(%0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "j", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %arg0 : tensor<f32>
  }
}

// -----

// expected-error@+1 {{the module has no entry function '@main'}}
module @no_main {
  func.func public @entry(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    return %arg0 : tensor<2xf32>
  }
}

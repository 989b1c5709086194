// RUN: pmapc opt %s --pass-pipeline='builtin.module(verify-axes)' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps)' --split-input-file --verify-diagnostics

// Each chunk holds one mistake; verify-axes reports it at the op at fault.
// flatten-maps run alone reports the same: it checks what verify-axes checks
// unless verify-axes has just run.

// ---------------------------------------------------------------- axis names
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

// A near miss of a bound axis's name gets that name as a suggestion.
module @misspelled_axis {
  func.func public @main(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
  func.func private @outer(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @inner(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{axis 'modle' is not bound here; bound axes are 'data', 'model'; did you mean 'model'?}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["modle"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @collective_outside_any_map {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{axis 'i' is not bound here: no enclosing map binds an axis; use named-axis collectives inside a map body}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

// An inner map's axis is not bound in the outer body after the inner map.
module @inner_axis_used_in_outer_body {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @outer(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    // expected-error@+1 {{axis 'model' is not bound here; bound axes are 'data'}}
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @inner(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @axis_named_twice {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'pmax' names axis 'i' twice; name each axis once}}
    %0 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i", "i"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// Two inner maps in one outer body may differ, as in JAX 0.4, but their sizes
// must divide one another to share the outer body's devices.
module @nested_sibling_map_sizes_share_no_layout {
  func.func public @main(%arg0: tensor<2x4xf32>, %arg1: tensor<2x6xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0, 0], out_axes = [0]}} : (tensor<2x4xf32>, tensor<2x6xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @outer(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    // expected-error@+1 {{map over 'rows' (size 6) cannot share the devices of the maps beside it: its chain of maps splits them 2 x 6, the maps before it 2 x 4, and no mesh splits them both ways}}
    %1 = stablehlo.custom_call @pmapc.map(%arg1) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "rows", axis_size = 6 : i64, in_axes = [0], out_axes = [0]}} : (tensor<6xf32>) -> tensor<6xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @inner(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

// A sibling's axis is not bound in the other sibling's body, even where the
// two run on the same devices.
module @sibling_axis_is_not_bound {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "a", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.custom_call @pmapc.map(%arg1) {called_computations = [@uses_a], api_version = 4 : i32, backend_config = {axis_name = "b", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
  func.func private @uses_a(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{axis 'a' is not bound here; bound axes are 'b'}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["a"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// ---------------------------------------------------------------- maps
// -----

module @in_axes_count_mismatch {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{map over 'i' has 2 in_axes for 1 operands; give one per operand}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0, 0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @mapped_dimension_not_axis_size {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{operand #0 of the map over 'i': dimension 0 of the operand has size 3, but axis 'i' has size 2; map over a dimension of size 2}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<3xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @in_axes_out_of_range {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{operand #0 of the map over 'i': in_axes entry 1 is out of range for an operand of rank 1; map axis 'i' must name one of its dimensions 0..0 or be unit}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [1], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @out_axes_count_mismatch {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{map over 'i' has 0 out_axes for 1 results; give one per result}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = []}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @out_axes_out_of_range {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{result #0 of the map over 'i': out_axes entry 1 is out of range for a body result of rank 0; stack axis 'i' at a position 0..0}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [1]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

// out_axes = [1] stacks after the body's one dim: 3x2, not 2x3.
module @map_result_does_not_match_out_axes {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    // expected-error@+1 {{result #0 of the map over 'i': the body '@body' returns tensor<3xf32>, so the map returns tensor<3x2xf32>, not tensor<2x3xf32>}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [1]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @body_argument_type_mismatch {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{operand #0 of the map over 'i' is tensor<2x3xf32>, so its body '@body' must take tensor<3xf32>, got tensor<2xf32>}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<2xf32>) -> tensor<f32> {
    %0 = stablehlo.slice %arg0 [0:1] : (tensor<2xf32>) -> tensor<1xf32>
    %1 = stablehlo.reshape %0 : (tensor<1xf32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

module @body_argument_count_mismatch {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{map over 'i' has 2 body arguments for 1 operands; give one per operand}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>, %arg1: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @body_result_count_mismatch {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{map over 'i' has 2 body results for 1 results; give one per result}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
    return %arg0, %arg0 : tensor<f32>, tensor<f32>
  }
}

// ---------------------------------------------------------------- collective shapes
// -----

module @tiled_psum_scatter_not_divisible {
  func.func public @main(%arg0: tensor<4x6xf32>) -> tensor<4x1xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x6xf32>) -> tensor<4x1xf32>
    return %0 : tensor<4x1xf32>
  }
  func.func private @body(%arg0: tensor<6xf32>) -> tensor<1xf32> {
    // expected-error@+1 {{'psum_scatter' over 'i' (size 4) needs dimension 0 divisible by 4, got 6; pad it to a multiple of 4}}
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<6xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

module @untiled_psum_scatter_dimension_not_group_size {
  func.func public @main(%arg0: tensor<4x8xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @body(%arg0: tensor<8xf32>) -> tensor<f32> {
    // expected-error@+1 {{'psum_scatter' over 'i' (size 4) with tiled=false needs dimension 0 of size 4, got 8; pass tiled=true to split it into 4 blocks instead}}
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 0 : i64, tiled = false}} : (tensor<8xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// The group over ("i", "j") has 2 * 2 = 4 devices.
module @tiled_all_to_all_over_tuple_not_divisible {
  func.func public @main(%arg0: tensor<2x2x6xf32>) -> tensor<2x2x6xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x2x6xf32>) -> tensor<2x2x6xf32>
    return %0 : tensor<2x2x6xf32>
  }
  func.func private @outer(%arg0: tensor<2x6xf32>) -> tensor<2x6xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "j", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x6xf32>) -> tensor<2x6xf32>
    return %0 : tensor<2x6xf32>
  }
  func.func private @inner(%arg0: tensor<6xf32>) -> tensor<6xf32> {
    // expected-error@+1 {{'all_to_all' over ('i', 'j') (size 4) needs dimension 0 divisible by 4, got 6; pad it to a multiple of 4}}
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i", "j"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<6xf32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module @untiled_all_to_all_split_dimension_not_group_size {
  func.func public @main(%arg0: tensor<2x3x4xf32>) -> tensor<2x2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
    return %0 : tensor<2x2x4xf32>
  }
  func.func private @body(%arg0: tensor<3x4xf32>) -> tensor<2x4xf32> {
    // expected-error@+1 {{'all_to_all' over 'i' (size 2) with tiled=false needs dimension 0 of size 2, got 3}}
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = false}} : (tensor<3x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Tiled all_gather multiplies the dimension by the group size: 3 * 2 = 6.
module @tiled_all_gather_wrong_result_size {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'all_gather' over 'i' (size 2) of tensor<3xf32> returns tensor<6xf32>, but the op says tensor<4xf32>}}
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<3xf32>) -> tensor<4xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @tiled_all_gather_dimension_out_of_range {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'all_gather' over 'i' (size 2) has all_gather_dimension 1, out of range for an operand of rank 1; use a dimension in 0..0}}
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 1 : i64, tiled = true}} : (tensor<3xf32>) -> tensor<3x2xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

// Untiled, the new dimension may also go last (position 1 here), not further.
module @untiled_all_gather_dimension_out_of_range {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'all_gather' over 'i' (size 2) has all_gather_dimension 2, out of range for an operand of rank 1; use a dimension in 0..1}}
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 2 : i64, tiled = false}} : (tensor<3xf32>) -> tensor<3x2xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @psum_scatter_dimension_out_of_range {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'psum_scatter' over 'i' (size 2) has scatter_dimension 1, out of range for an operand of rank 1; use a dimension in 0..0}}
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 1 : i64, tiled = true}} : (tensor<4xf32>) -> tensor<2xf32>
    return %arg0 : tensor<4xf32>
  }
}

// -----

module @all_to_all_concat_axis_out_of_range {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'all_to_all' over 'i' (size 2) has concat_axis 1, out of range for an operand of rank 1; use a dimension in 0..0}}
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], split_axis = 0 : i64, concat_axis = 1 : i64, tiled = true}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module @ppermute_repeated_source {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'ppermute' over 'i' (size 4) sends from index 0 twice; each source may appear once}}
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[0, 1], [0, 2]]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @ppermute_repeated_target {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'ppermute' over 'i' (size 4) sends to index 3 twice; each target may appear once}}
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[0, 3], [1, 3]]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @ppermute_index_out_of_range {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'ppermute' over 'i' (size 4) has index 4 in its permutation, out of range; indices must be in 0..3}}
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[3, 4]]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @psum_wrong_result_type {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum' over 'i' (size 2) of tensor<3xf32> returns tensor<3xf32>, but the op says tensor<3xi32>}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xi32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @psum_result_count_mismatch {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'psum' needs one result per operand and at least one operand, got 2 operands and 1 results}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0, %arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @all_gather_of_two_operands {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'all_gather' takes exactly one operand, got 2}}
    %0:2 = stablehlo.custom_call @pmapc.all_gather(%arg0, %arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = false}} : (tensor<f32>, tensor<f32>) -> (tensor<2xf32>, tensor<2xf32>)
    return %arg0 : tensor<f32>
  }
}

// -----

module @axis_index_wrong_result_type {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'axis_index' takes no operand and returns tensor<i32>}}
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["i"]}} : () -> tensor<i64>
    return %arg0 : tensor<f32>
  }
}

// ---------------------------------------------------------------- the schema
// -----

module @unknown_pmapc_target {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{unknown pmapc op 'pmapc.foo'; expected one of 'pmapc.map', 'pmapc.psum', 'pmapc.pmax', 'pmapc.pmin', 'pmapc.all_gather', 'pmapc.psum_scatter', 'pmapc.all_to_all', 'pmapc.ragged_all_to_all', 'pmapc.ppermute', 'pmapc.axis_index'}}
    %0 = stablehlo.custom_call @pmapc.foo(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @collective_without_backend_config {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'pmapc.psum' needs a 'backend_config' dictionary}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @collective_missing_axes {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'pmapc.psum' is missing 'axes' in its backend_config}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @collective_with_empty_axes {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'axes' of 'pmapc.psum' must be a non-empty array of axis names, got []}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = []}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @all_gather_missing_tiled {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'pmapc.all_gather' is missing 'tiled' in its backend_config}}
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64}} : (tensor<f32>) -> tensor<2xf32>
    return %arg0 : tensor<f32>
  }
}

// -----

module @tiled_not_a_boolean {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'tiled' of 'pmapc.all_gather' must be a boolean, got 1 : i64}}
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = 1 : i64}} : (tensor<f32>) -> tensor<2xf32>
    return %arg0 : tensor<f32>
  }
}

// -----

module @dimension_not_an_integer {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'all_gather_dimension' of 'pmapc.all_gather' must be an integer, got "0"}}
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = "0", tiled = false}} : (tensor<f32>) -> tensor<2xf32>
    return %arg0 : tensor<f32>
  }
}

// -----

module @perm_not_pairs {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'perm' of 'pmapc.ppermute' must be an array of [source, target] pairs, got [0, 1]}}
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [0, 1]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @map_missing_axis_size {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'pmapc.map' is missing 'axis_size' in its backend_config}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @axis_name_not_a_string {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'axis_name' of 'pmapc.map' must be a string, got 7 : i64}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = 7 : i64, axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @axis_size_not_positive {
  func.func public @main(%arg0: tensor<0xf32>) -> tensor<0xf32> {
    // expected-error@+1 {{'axis_size' of axis 'i' must be positive, got 0}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 0 : i64, in_axes = [0], out_axes = [0]}} : (tensor<0xf32>) -> tensor<0xf32>
    return %0 : tensor<0xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @negative_in_axes_entry {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'in_axes' of 'pmapc.map' must be an array of integers or 'unit', got [-1]}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [-1], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// ---------------------------------------------------------------- the call graph
// -----

module @called_computations_names_missing_function {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'pmapc.map' calls '@nope', which is not a function in this module}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@nope], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

module @map_without_called_computations {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'pmapc.map' needs 'called_computations' naming exactly one function}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

module @map_calls_itself {
  func.func public @main(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
  func.func private @body(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<2xf32>) -> tensor<2x2xf32>
    // expected-error@+1 {{recursive call @body -> @body; maps and calls must not call themselves}}
    %1 = stablehlo.custom_call @pmapc.map(%0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "j", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %arg0 : tensor<2xf32>
  }
}

// -----

// expected-error@+1 {{the module has no entry function '@main'; name the function that takes the program's arguments 'main'}}
module @no_main {
  func.func public @entry(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    return %arg0 : tensor<2xf32>
  }
}

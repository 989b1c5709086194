// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives)' --split-input-file --verify-diagnostics

// lower-collectives checks index groups against the mesh too (a module can
// reach it without verify-axes): they must split the group over the axes.

// The group over ("data", "model") has 8 positions; these index groups name 4.
module @groups_cover_one_axis_of_a_tuple attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum' over ('data', 'model') (size 8, axis_index_groups [[0, 1], [2, 3]]): axis_index_groups must cover all indices exactly once (indices 4, 5, 6, 7 in no group); put each index 0..7 in one group}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @all_to_all_groups_of_two_sizes attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<6xf32>) -> tensor<6xf32> {
    // expected-error@+1 {{'all_to_all' over 'model' (size 4, axis_index_groups [[0, 1, 2], [3]]): axis_index_groups must all be the same size, got sizes 1, 3; split the indices into groups of one size}}
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true, axis_index_groups = [[0, 1, 2], [3]]}} : (tensor<6xf32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

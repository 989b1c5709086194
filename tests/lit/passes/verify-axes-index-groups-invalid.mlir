// RUN: pmapc opt %s --pass-pipeline='builtin.module(verify-axes)' --split-input-file --verify-diagnostics

// axis_index_groups that verify-axes refuses, by JAX 0.4's rules: the index
// groups hold each position 0..n-1 along the axes exactly once, and those of
// all_gather, psum_scatter and all_to_all all have one size (which sizes their
// results).

// The index groups must hold every position along the axes: 2 and 3 are in none.
module @psum_groups_miss_indices {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum' over 'i' (size 4, axis_index_groups [[0, 1]]): axis_index_groups must cover all indices exactly once (indices 2, 3 in no group); put each index 0..3 in one group}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], axis_index_groups = [[0, 1]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @pmax_group_index_out_of_range {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'pmax' over 'i' (size 4, axis_index_groups [[0, 1], [2, 4]]): axis_index_groups must cover all indices exactly once (index 4 out of range); put each index 0..3 in one group}}
    %0 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], axis_index_groups = [[0, 1], [2, 4]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @pmin_group_index_twice {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'pmin' over 'i' (size 4, axis_index_groups [[0, 1], [1, 2, 3]]): axis_index_groups must cover all indices exactly once (index 1 more than once); put each index 0..3 in one group}}
    %0 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], axis_index_groups = [[0, 1], [1, 2, 3]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @psum_empty_group {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum' over 'i' (size 4, axis_index_groups [[0, 1, 2, 3], []]): axis_index_groups must cover all indices exactly once (every group must hold at least one index); put each index 0..3 in one group}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], axis_index_groups = [[0, 1, 2, 3], []]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @psum_no_groups {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum' over 'i' (size 4, axis_index_groups []): axis_index_groups must cover all indices exactly once (every group must hold at least one index); put each index 0..3 in one group}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], axis_index_groups = []}} : (tensor<3xf32>) -> tensor<3xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

// Over a tuple the positions are row-major over the axes as listed: 0..7 here.
module @tuple_groups_cover_one_axis_only {
  func.func public @main(%arg0: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
    return %0 : tensor<2x4x3xf32>
  }
  func.func private @outer(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "j", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @inner(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum' over ('j', 'i') (size 8, axis_index_groups [[0, 1], [2, 3]]): axis_index_groups must cover all indices exactly once (indices 4, 5, 6, 7 in no group); put each index 0..7 in one group}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["j", "i"], axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// Only an all-reduce may have groups of different sizes.
module @all_gather_groups_of_two_sizes {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'all_gather' over 'i' (size 4, axis_index_groups [[0], [1, 2, 3]]): axis_index_groups must all be the same size, got sizes 1, 3; split the indices into groups of one size}}
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = true, axis_index_groups = [[0], [1, 2, 3]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @psum_scatter_groups_of_two_sizes {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum_scatter' over 'i' (size 4, axis_index_groups [[0, 1, 2], [3]]): axis_index_groups must all be the same size, got sizes 1, 3; split the indices into groups of one size}}
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 0 : i64, tiled = true, axis_index_groups = [[0, 1, 2], [3]]}} : (tensor<3xf32>) -> tensor<1xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @all_to_all_groups_of_two_sizes {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'all_to_all' over 'i' (size 4, axis_index_groups [[0, 1, 2], [3]]): axis_index_groups must all be the same size, got sizes 1, 3; split the indices into groups of one size}}
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true, axis_index_groups = [[0, 1, 2], [3]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

// With index groups of 2 the scattered dimension splits into 2 blocks, not 4.
module @tiled_psum_scatter_not_divisible_by_group {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum_scatter' over 'i' (size 4, axis_index_groups [[0, 1], [2, 3]]) needs dimension 0 divisible by 2, got 3}}
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 0 : i64, tiled = true, axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<3xf32>) -> tensor<1xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

// The gathered dimension is 3 * 2 (the index group), not 3 * 4 (the axis).
module @tiled_all_gather_sized_by_the_axis {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'all_gather' over 'i' (size 4) of tensor<3xf32> returns tensor<6xf32>, but the op says tensor<12xf32>}}
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = true, axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<3xf32>) -> tensor<12xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @index_groups_not_an_array_of_arrays {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'axis_index_groups' of 'pmapc.psum' must be an array of arrays of integers, got [0, 1, 2, 3]}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], axis_index_groups = [0, 1, 2, 3]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %arg0 : tensor<3xf32>
  }
}

// -----

// ppermute and axis_index take no index groups (as in JAX).
module @ppermute_takes_no_index_groups {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'pmapc.ppermute' does not take 'axis_index_groups' in its backend_config; its keys are 'axes', 'perm'}}
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[0, 1], [1, 0]], axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %arg0 : tensor<3xf32>
  }
}

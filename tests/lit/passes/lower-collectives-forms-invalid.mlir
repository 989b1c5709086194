// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives)' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(predicate-divergent)' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(fold-gather-slice)' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(sink-slices)' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(sink-gathers)' --split-input-file --verify-diagnostics

// A flattened module (what flatten-maps makes: `pmapc.mesh`, collectives over
// its axes), as the passes between flatten-maps and lower-collectives take it
// when run alone: each op is checked against the mesh on entry, as verify-axes
// checks it against the maps (issue 43's classes), so a mistake is a located
// error, never an exception inside the pass.

module @ppermute_past_the_axis attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'ppermute' over 'i' (size 2) has index 2 in its permutation, out of range; indices must be in 0..1}}
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[0, 2]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @ppermute_to_minus_one attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'ppermute' over 'i' (size 2) has index -1 in its permutation, out of range; indices must be in 0..1}}
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[0, -1]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @psum_without_operands attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum' needs one result per operand and at least one operand, got 0 operands and 1 results}}
    %0 = stablehlo.custom_call @pmapc.psum() {api_version = 4 : i32, backend_config = {axes = ["i"]}} : () -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @all_gather_without_operands attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<6xf32> {
    // expected-error@+1 {{'all_gather' needs one result per operand and at least one operand, got 0 operands and 1 results}}
    %0 = stablehlo.custom_call @pmapc.all_gather() {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = true}} : () -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module @all_to_all_without_operands attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'all_to_all' needs one result per operand and at least one operand, got 0 operands and 1 results}}
    %0 = stablehlo.custom_call @pmapc.all_to_all() {api_version = 4 : i32, backend_config = {axes = ["i"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : () -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module @psum_scatter_result_that_does_not_fit attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'psum_scatter' over 'i' (size 2) of tensor<4xf32> returns tensor<2xf32>, but the op says tensor<4xf32>}}
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module @psum_scatter_past_the_rank attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'psum_scatter' over 'i' (size 2) has scatter_dimension 3, out of range for an operand of rank 1; use a dimension in 0..0}}
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 3 : i64, tiled = true}} : (tensor<4xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

module @dynamic_all_gather_operand attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<?xf32>) -> tensor<8xf32> {
    // expected-error@+1 {{an operand of 'all_gather' over 'i' (size 2) has a dynamic shape [?]; maps and collectives take static shapes}}
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<?xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// XLA numbers devices with 32-bit ids: a mesh of more than 2^31 positions is
// refused where it is read, even when no collective would be sized by it.
// expected-error@+1 {{the mesh 'pmapc.mesh' (65536 x 65536) has 4294967296 positions, more than the 2147483648 devices XLA numbers (32-bit device ids); split the program over at most 2147483648 devices}}
module @mesh_over_too_many_positions attributes {pmapc.mesh = {axis_names = ["i", "j"], axis_sizes = array<i64: 65536, 65536>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    return %arg0 : tensor<3xf32>
  }
}

// -----

// Index groups over the largest mesh XLA numbers: the check costs the indices
// written, and the message cites a few of those missing.
module @index_groups_over_the_largest_axis attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2147483648>}} {
  func.func public @main(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'psum' over 'i' (size 2147483648, axis_index_groups [[2, 0]]): axis_index_groups must cover all indices exactly once (indices 1, 3, 4, 5 and 2147483642 more in no group); put each index 0..2147483647 in one group}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], axis_index_groups = [[2, 0]]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// A StableHLO collective in a flattened module names devices of its mesh.
module @device_outside_the_mesh attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'stablehlo.collective_permute' names device 5 in its source_target_pairs, outside the module's 2 devices (0..1); name devices of the mesh}}
    %0 = "stablehlo.collective_permute"(%arg0) {source_target_pairs = dense<[[0, 5]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @unknown_pmapc_op attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{unknown pmapc op 'pmapc.psum_all'}}
    %0 = stablehlo.custom_call @pmapc.psum_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// A flattened module is one program: `@main`, with a body, and a body in every
// function it holds (each runs on the devices).
module @main_only_declared attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  // expected-error@+1 {{'@main' is only declared; give it a body}}
  func.func private @main(%arg0: tensor<3xf32>) -> tensor<3xf32>
}

// -----

// expected-error@+1 {{the module has no entry function '@main'; name the function that takes the program's arguments 'main'}}
module @no_main attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @step(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    return %arg0 : tensor<3xf32>
  }
}

// -----

module @ragged_all_to_all_of_five_operands attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<2xi32>) -> tensor<6xf32> {
    // expected-error@+1 {{'ragged_all_to_all' takes 6 operands (operand, output, input_offsets, send_sizes, output_offsets, recv_sizes) and returns one result, got 5 operands and 1 results}}
    %0 = stablehlo.custom_call @pmapc.ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<4xf32>, tensor<6xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

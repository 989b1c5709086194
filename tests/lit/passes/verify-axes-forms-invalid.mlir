// RUN: pmapc opt %s --pass-pipeline='builtin.module(verify-axes)' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps{split-entry=false})' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(pmapc-to-stablehlo)' --split-input-file --verify-diagnostics

// What pmapc IR must hold for the passes to take it, checked where the ops are
// (issue 43's classes): run alone and through the default pipeline, each is a
// located error, never an exception inside a pass.

// ------------------------------------------------------------ static shapes
// Maps and collectives take static shapes: a dynamic dimension is refused at
// the op, before flatten-maps would slice or gather it.
module @dynamic_map_operand {
  func.func public @main(%arg0: tensor<4x?xf32>) -> tensor<4x?xf32> {
    // expected-error@+1 {{operand #0 of the map over 'i': the operand has a dynamic shape [4, ?]; maps and collectives take static shapes (as jax.pmap does): give it a size in every dimension}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x?xf32>) -> tensor<4x?xf32>
    return %0 : tensor<4x?xf32>
  }
  func.func private @body(%arg0: tensor<?xf32>) -> tensor<?xf32> {
    return %arg0 : tensor<?xf32>
  }
}

// -----

module @dynamic_unmapped_operand {
  func.func public @main(%arg0: tensor<?xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{operand #0 of the map over 'i': the operand has a dynamic shape [?]}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [unit], out_axes = [0]}} : (tensor<?xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @body(%arg0: tensor<?xf32>) -> tensor<f32> {
    %0 = stablehlo.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @dynamic_body_result {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4x?xf32> {
    // expected-error@+1 {{result #0 of the map over 'i': the body's result has a dynamic shape [?]}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4x?xf32>
    return %0 : tensor<4x?xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<?xf32> {
    %0 = stablehlo.reshape %arg0 : (tensor<f32>) -> tensor<1xf32>
    %1 = tensor.cast %0 : tensor<1xf32> to tensor<?xf32>
    return %1 : tensor<?xf32>
  }
}

// -----

module @dynamic_psum_scatter_operand {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>) -> tensor<2xf32> {
    %0 = tensor.cast %arg0 : tensor<4xf32> to tensor<?xf32>
    // expected-error@+1 {{an operand of 'psum_scatter' over 'i' (size 2) has a dynamic shape [?]; maps and collectives take static shapes}}
    %1 = stablehlo.custom_call @pmapc.psum_scatter(%0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<?xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
}

// -----

module @dynamic_all_gather_operand {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x8xf32>
    return %0 : tensor<2x8xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>) -> tensor<8xf32> {
    %0 = tensor.cast %arg0 : tensor<4xf32> to tensor<?xf32>
    // expected-error@+1 {{an operand of 'all_gather' over 'i' (size 2) has a dynamic shape [?]}}
    %1 = stablehlo.custom_call @pmapc.all_gather(%0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<?xf32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}

// -----

// ------------------------------------------------------------ mesh size
// XLA numbers devices with 32-bit ids: a mesh of more than 2^31 positions is
// refused at the map that makes it, before anything is sized by it.
module @map_over_too_many_positions {
  func.func public @main(%arg0: tensor<4294967296xf32>) -> tensor<4294967296xf32> {
    // expected-error@+1 {{map over 'i' has 4294967296 positions, more than the 2147483648 devices XLA numbers (32-bit device ids); split the program over at most 2147483648 devices}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4294967296 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4294967296xf32>) -> tensor<4294967296xf32>
    return %0 : tensor<4294967296xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

module @nest_over_too_many_positions {
  func.func public @main(%arg0: tensor<65536x65536xf32>) -> tensor<65536x65536xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 65536 : i64, in_axes = [0], out_axes = [0]}} : (tensor<65536x65536xf32>) -> tensor<65536x65536xf32>
    return %0 : tensor<65536x65536xf32>
  }
  func.func private @outer(%arg0: tensor<65536xf32>) -> tensor<65536xf32> {
    // expected-error@+1 {{the nest of maps 65536 x 65536 has 4294967296 positions, more than the 2147483648 devices XLA numbers}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "j", axis_size = 65536 : i64, in_axes = [0], out_axes = [0]}} : (tensor<65536xf32>) -> tensor<65536xf32>
    return %0 : tensor<65536xf32>
  }
  func.func private @inner(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

// 2^31 positions are within XLA's device ids: the map is taken, and the error
// here is the index groups', which cites a few of the indices missing and says
// how many more (the check costs the indices written, not the positions).
module @index_groups_over_the_largest_axis {
  func.func public @main(%arg0: tensor<2147483648xf32>) -> tensor<2147483648xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2147483648 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2147483648xf32>) -> tensor<2147483648xf32>
    return %0 : tensor<2147483648xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{'psum' over 'i' (size 2147483648, axis_index_groups [[0, 1], [5]]): axis_index_groups must cover all indices exactly once (indices 2, 3, 4, 6 and 2147483641 more in no group); put each index 0..2147483647 in one group}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], axis_index_groups = [[0, 1], [5]]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// ------------------------------------------------------------ the form
// pmapc IR names collectives by axis: a StableHLO collective names devices of
// a mesh that exists only after flatten-maps.
module @device_collective_in_pmapc_ir {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'stablehlo.all_reduce' names devices of a mesh, which pmapc IR has not before flatten-maps; name the collective by a map's axis instead ('@pmapc.<kind>', docs/ir.md)}}
    %0 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// A module with `pmapc.mesh` is flattened already: its collectives name mesh
// axes, which no map binds.
module @flattened_module attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'pmapc.psum' in a flattened module (it has 'pmapc.mesh'): verify-axes and flatten-maps take pmapc IR, before flatten-maps; run the passes after it}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// ------------------------------------------------------------ collectives
module @ppermute_past_the_axis {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'ppermute' over 'i' (size 2) has index 2 in its permutation, out of range; indices must be in 0..1}}
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[0, 2]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @ppermute_to_minus_one {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'ppermute' over 'i' (size 2) has index -1 in its permutation, out of range; indices must be in 0..1}}
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[0, -1]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @psum_without_operands {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'psum' needs one result per operand and at least one operand, got 0 operands and 1 results}}
    %0 = stablehlo.custom_call @pmapc.psum() {api_version = 4 : i32, backend_config = {axes = ["i"]}} : () -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @all_gather_without_operands {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x6xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x6xf32>
    return %0 : tensor<2x6xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<6xf32> {
    // expected-error@+1 {{'all_gather' needs one result per operand and at least one operand, got 0 operands and 1 results}}
    %0 = stablehlo.custom_call @pmapc.all_gather() {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = true}} : () -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module @all_to_all_without_operands {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'all_to_all' needs one result per operand and at least one operand, got 0 operands and 1 results}}
    %0 = stablehlo.custom_call @pmapc.all_to_all() {api_version = 4 : i32, backend_config = {axes = ["i"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : () -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module @psum_scatter_result_that_does_not_fit {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'psum_scatter' over 'i' (size 2) of tensor<4xf32> returns tensor<2xf32>, but the op says tensor<4xf32>}}
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module @psum_scatter_past_the_rank {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'psum_scatter' over 'i' (size 2) has scatter_dimension 3, out of range for an operand of rank 1; use a dimension in 0..0}}
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 3 : i64, tiled = true}} : (tensor<4xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

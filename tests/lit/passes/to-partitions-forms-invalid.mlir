// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-partitions)' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-replicas)' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(combine-all-reduces)' --split-input-file --verify-diagnostics
// RUN: pmapc opt %s --pass-pipeline='builtin.module(pmapc-to-stablehlo)' --split-input-file --verify-diagnostics

// A lowered module (what lower-collectives makes: StableHLO collectives over
// device positions) as the passes that read one take it, run alone and through
// the default pipeline: its collectives' groups, pairs and XLA's ragged op's
// backend_config are checked on entry (issue 43's classes), so a mistake is a
// located error, never an exception inside a pass or a program silently changed.
// (`pmapc plan` reads it the same way: tests/lit/tools/plan-invalid.mlir.)

module @ragged_without_backend_config attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<2xi32>) -> tensor<6xf32> {
    // expected-error@+1 {{'@ragged_all_to_all' needs a 'backend_config' dictionary with its 'replica_groups' (a matrix of device ids, as JAX writes it)}}
    %0 = stablehlo.custom_call @ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2, %arg2) {api_version = 4 : i32} : (tensor<4xf32>, tensor<6xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module @ragged_groups_of_another_kind attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<2xi32>) -> tensor<6xf32> {
    // expected-error@+1 {{'replica_groups' of 'stablehlo.custom_call' must be a matrix of device ids (dense<[[...]]> : tensor<...xi64>), got unit}}
    %0 = stablehlo.custom_call @ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {replica_groups = unit}} : (tensor<4xf32>, tensor<6xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module @ragged_group_outside_the_mesh attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<2xi32>) -> tensor<6xf32> {
    // expected-error@+1 {{'stablehlo.custom_call' names device 3 in its replica groups, outside the module's 2 devices (0..1); name devices of the mesh}}
    %0 = stablehlo.custom_call @ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {replica_groups = dense<[[0, 3]]> : tensor<1x2xi64>}} : (tensor<4xf32>, tensor<6xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module @ragged_with_five_operands attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<2xi32>) -> tensor<6xf32> {
    // expected-error@+1 {{'@ragged_all_to_all' takes 6 operands (operand, output, input_offsets, send_sizes, output_offsets, recv_sizes) and returns one result, got 5 operands and 1 results}}
    %0 = stablehlo.custom_call @ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}} : (tensor<4xf32>, tensor<6xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

// Pairs naming a device the mesh does not have (to-partitions and to-replicas
// took it as it was).
module @permute_outside_the_mesh attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'stablehlo.collective_permute' names device 5 in its source_target_pairs, outside the module's 2 devices (0..1); name devices of the mesh}}
    %0 = "stablehlo.collective_permute"(%arg0) {source_target_pairs = dense<[[0, 5]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @groups_outside_the_mesh attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'stablehlo.all_reduce' names device 2 in its replica_groups, outside the module's 2 devices (0..1); name devices of the mesh}}
    %0 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @dynamic_all_reduce attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<?xf32>) -> tensor<?xf32> {
    // expected-error@+1 {{'stablehlo.all_reduce' moves tensor<?xf32>: collectives take tensors of static shape; give it a size in every dimension}}
    %0 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<?xf32>) -> tensor<?xf32>
    return %0 : tensor<?xf32>
  }
}

// -----

// Groups written as mesh axes name the axes of a mesh with the module's devices.
module @named_groups_of_another_mesh attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  sdy.mesh @mesh = <["i"=4]>
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'stablehlo.all_reduce' names groups of a mesh of 4 devices, but the module runs on 2 devices; name axes of the module's mesh}}
    %0 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "i">]>, use_global_device_ids} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// expected-error@+1 {{the mesh 'pmapc.mesh' (4294967296) has 4294967296 positions, more than the 2147483648 devices XLA numbers}}
module @mesh_over_too_many_positions attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 4294967296>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    return %arg0 : tensor<3xf32>
  }
}

// -----

// Groups over mesh axes: MLIR's verifier cannot count their devices, so the checks it
// makes of device-id groups are made on entry.
module @all_to_all_pieces_and_named_groups attributes {pmapc.mesh = {axis_names = ["a", "b"], axis_sizes = array<i64: 2, 2>}} {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'stablehlo.all_to_all' splits into split_count = 1 pieces, but its replica groups over mesh axes have 4 devices each; make its shapes fit groups of that size}}
    %0 = "stablehlo.all_to_all"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, concat_dimension = 0 : i64, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "a">, #stablehlo.axis_ref<name = "b">]>, split_count = 1 : i64, split_dimension = 0 : i64, use_global_device_ids}> : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module @all_gather_blocks_and_named_groups attributes {pmapc.mesh = {axis_names = ["a", "b"], axis_sizes = array<i64: 2, 2>}} {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'stablehlo.all_gather' gathers tensor<4xf32> into tensor<4xf32> along all_gather_dim = 0, but its replica groups over mesh axes have 2 devices each; make its shapes fit groups of that size}}
    %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "b">]>, use_global_device_ids}> : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module @reduce_scatter_blocks_and_named_groups attributes {pmapc.mesh = {axis_names = ["a", "b"], axis_sizes = array<i64: 2, 2>}} {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<1xf32> {
    // expected-error@+1 {{'stablehlo.reduce_scatter' scatters tensor<4xf32> into tensor<1xf32> along scatter_dimension = 0, but its replica groups over mesh axes have 2 devices each; make its shapes fit groups of that size}}
    %0 = "stablehlo.reduce_scatter"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "b">]>, scatter_dimension = 0 : i64, use_global_device_ids}> ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

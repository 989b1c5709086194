// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-partitions)' --split-input-file --verify-diagnostics

// to-partitions needs a lowered program: no pmapc op left, and collectives
// whose groups name devices.

module @collective_still_named attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'pmapc.psum' is still here; run lower-collectives before to-partitions}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @axis_index_still_named attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main() -> tensor<i32> {
    // expected-error@+1 {{'pmapc.axis_index' is still here; run lower-collectives before to-partitions}}
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["i"]}} : () -> tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

module @map_still_present {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'pmapc.map' is still here; run flatten-maps and lower-collectives before to-partitions}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

// With a channel handle but no use_global_device_ids, an all_reduce's groups
// are replica ids of a replica-and-partition program, not devices.
module @channel_without_global_device_ids attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'stablehlo.all_reduce' has a channel_handle but no use_global_device_ids, so its replica_groups do not name devices; to-partitions takes collectives whose groups name devices}}
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// Groups written as mesh axes must name axes of their mesh, each once.

module @named_groups_over_an_unknown_axis attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  sdy.mesh @mesh = <["i"=2]>
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'stablehlo.all_reduce': replica groups over axes ['j']: 'j' is not an axis of mesh i=2; name axes of the mesh, each once}}
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "j">]>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// Mesh-axis replica groups whose axes are not axis references (a mutated module).
module @malformed_mesh_axis_groups attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  sdy.mesh @mesh = <["i"=2]> {stablehlo.mesh = {axes = [{name = "i", size = 2 : i64}]}}
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{replica groups' axes must be axis references (#stablehlo.axis_ref<...>), got [[0]]}}
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [[0]]>, use_global_device_ids}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %1 = stablehlo.add %arg1, %arg2 : tensor<f32>
      stablehlo.return %1 : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// Without a mesh, the devices the module declares.
module @groups_outside_the_declared_devices attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
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

// expected-error@+1 {{'mhlo.num_partitions' must be a device count (1..2147483648), got -1 : i32}}
module @declared_devices_not_a_count attributes {mhlo.num_partitions = -1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-replicas)' --split-input-file --verify-diagnostics

// to-replicas, like to-partitions, needs a lowered program: no pmapc op left,
// and collectives whose groups name devices.

module @collective_still_named attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'pmapc.psum' is still here; run lower-collectives before to-replicas}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module @axis_index_still_named attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main() -> tensor<i32> {
    // expected-error@+1 {{'pmapc.axis_index' is still here; run lower-collectives before to-replicas}}
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["i"]}} : () -> tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

module @map_still_present {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{'pmapc.map' is still here; run flatten-maps and lower-collectives before to-replicas}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}

// -----

// With a channel handle but no use_global_device_ids, an all_reduce's groups
// are replica ids of a replica-and-partition program, not devices: dropping
// the handle would change what the op does.
module @channel_without_global_device_ids attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    // expected-error@+1 {{'stablehlo.all_reduce' has a channel_handle but no use_global_device_ids, so its replica_groups do not name devices; to-replicas takes collectives whose groups name devices}}
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// XLA's ragged_all_to_all names partitions: replica form has none to name, and
// XLA's conversion of one without a channel crashes the process.
module @native_ragged_all_to_all attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<2xi32>) -> tensor<6xf32> {
    // expected-error@+1 {{XLA's ragged_all_to_all runs in partition form only (its groups name partitions; XLA crashes on one without a channel); use target=partitions, or lower it with ragged=expanded}}
    %0 = stablehlo.custom_call @ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}} : (tensor<4xf32>, tensor<6xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

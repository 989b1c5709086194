// RUN: pmapc opt %s --pass-pipeline='builtin.module(pmapc-lower)' --split-input-file | FileCheck %s --check-prefixes=CHECK,PARTITIONS,NAMED
// RUN: pmapc opt %s --pass-pipeline='builtin.module(pmapc-lower{replica-groups=dense})' --split-input-file | FileCheck %s --check-prefixes=CHECK,PARTITIONS,DENSE
// RUN: pmapc opt %s --pass-pipeline='builtin.module(pmapc-lower{target=replicas})' --split-input-file | FileCheck %s --check-prefixes=CHECK,REPLICAS,DENSE

// The passes every program needs (the pmapc-lower pipeline), end to end: from
// nested maps to StableHLO collectives with explicit replica groups, in
// partition form (the default target) or replica form. In partition form the
// groups name the mesh axes they are over, in the order the program names
// them (NAMED; to-partitions adds the mesh op); with replica-groups=dense, and
// in replica form, they are device positions in the mesh (DENSE).

// The example nest (examples/nested_2x4.mlir): inner collectives act within
// a data row, the outer psum across rows, the tiled gather over all devices.
// CHECK-LABEL: module @nested_2x4_example
// PARTITIONS-SAME: mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32
// REPLICAS-SAME: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32
// NAMED: sdy.mesh @mesh = <["data"=2, "model"=4]>
// DENSE-NOT: sdy.mesh
// CHECK: "stablehlo.all_reduce"
// PARTITIONS-SAME: channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
// REPLICAS-NOT: channel_handle
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]>
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4]]>
// CHECK: "stablehlo.all_gather"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">, #stablehlo.axis_ref<name = "model">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]>
// CHECK-SAME: -> tensor<64xf32>
// The inner map's output: gathered over 'model', then summed over 'data'.
// CHECK: %[[STACK:.*]] = "stablehlo.all_gather"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]>
// CHECK-SAME: -> tensor<4x8xf32>
// CHECK: "stablehlo.all_reduce"(%[[STACK]])
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]>
// CHECK-NOT: @pmapc.
module @nested_2x4_example {
  func.func public @main(%arg0: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
  func.func private @inner(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %1 = stablehlo.custom_call @pmapc.ppermute(%0) {api_version = 4 : i32, backend_config = {axes = ["model"], perm = [[0, 1], [1, 2], [2, 3], [3, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.all_gather(%1) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<64xf32>
    %3 = stablehlo.slice %2 [0:8] : (tensor<64xf32>) -> tensor<8xf32>
    return %3 : tensor<8xf32>
  }
}

// -----

// psum over ("z", "x") in a 2x2x2 nest: one group per 'y', 'z'-major. The
// result leaves split over all three levels: nothing is gathered.
// CHECK-LABEL: module @three_levels_with_tuple_in_non_nesting_order
// CHECK-SAME: pmapc.mesh = {axis_names = ["x", "y", "z"], axis_sizes = array<i64: 2, 2, 2>}
// NAMED: sdy.mesh @mesh = <["x"=2, "y"=2, "z"=2]>
// DENSE-NOT: sdy.mesh
// CHECK: "stablehlo.all_reduce"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "z">, #stablehlo.axis_ref<name = "x">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]>
// CHECK-NOT: "stablehlo.all_gather"
// CHECK-NOT: @pmapc.
module @three_levels_with_tuple_in_non_nesting_order {
  func.func public @main(%arg0: tensor<2x2x2xf32>) -> tensor<2x2x2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@level1], api_version = 4 : i32, backend_config = {axis_name = "x", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x2x2xf32>) -> tensor<2x2x2xf32>
    return %0 : tensor<2x2x2xf32>
  }
  func.func private @level1(%arg0: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@level2], api_version = 4 : i32, backend_config = {axis_name = "y", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
  func.func private @level2(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@level3], api_version = 4 : i32, backend_config = {axis_name = "z", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @level3(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z", "x"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// "i" in the inner body is the inner axis (groups of 4), in the outer body the
// outer one (groups of 2).
// CHECK-LABEL: module @shadowed_axis_groups
// NAMED-NEXT: sdy.mesh @mesh = <["i"=2, "i_1"=4]>
// DENSE-NOT: sdy.mesh
// CHECK: "stablehlo.all_reduce"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "i_1">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "i">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]>
// CHECK: stablehlo.maximum
// CHECK-NOT: @pmapc.
module @shadowed_axis_groups {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @outer(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.custom_call @pmapc.pmax(%0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<4xf32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
  func.func private @inner(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// axis_index(("model", "data")) on 4x2 = model_index * 4 + data_index,
// although 'data' is the outer map. The device's mesh position is its
// partition id in partition form, its replica id in replica form. Each device
// returns its own index (the result leaves split): no collective, no mesh op.
// CHECK-LABEL: module @axis_index_over_tuple_4x2
// CHECK-NOT: sdy.mesh
// PARTITIONS: %[[RAW:.*]] = stablehlo.partition_id : tensor<ui32>
// REPLICAS: %[[RAW:.*]] = stablehlo.replica_id : tensor<ui32>
// CHECK: %[[ID:.*]] = stablehlo.convert %[[RAW]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[FOUR:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[SCALED:.*]] = stablehlo.multiply %{{.*}}, %[[FOUR]]
// CHECK: %[[TWO:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[DATA:.*]] = stablehlo.divide %[[ID]], %[[TWO]]
// CHECK: %[[INDEX:.*]] = stablehlo.add %[[SCALED]], %[[DATA]]
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[INDEX]] : (tensor<i32>) -> tensor<1x1xi32>
// CHECK-NOT: "stablehlo.all_gather"
// CHECK: return %[[BLOCK]]
// CHECK-NOT: @pmapc.
module @axis_index_over_tuple_4x2 {
  func.func public @main(%arg0: tensor<4x2xf32>) -> tensor<4x2xi32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x2xf32>) -> tensor<4x2xi32>
    return %0 : tensor<4x2xi32>
  }
  func.func private @outer(%arg0: tensor<2xf32>) -> tensor<2xi32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xi32>
    return %0 : tensor<2xi32>
  }
  func.func private @inner(%arg0: tensor<f32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : () -> tensor<i32>
    return %0 : tensor<i32>
  }
}

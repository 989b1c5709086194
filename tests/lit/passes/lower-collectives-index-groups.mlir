// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives)' --split-input-file | FileCheck %s
// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives,combine-all-reduces)' --split-input-file | FileCheck %s --check-prefix=COMBINE

// axis_index_groups: each group over the axes splits into one replica group per
// index group, `[group[i] for i in index_group]`. Every expected group below
// is the one JAX 0.4.30's nested jax.pmap emits for the same call on a 2x4
// (data x model) or 8-device mesh.

// One axis: the positions along 'model' pair up within each 'data' row.
// CHECK-LABEL: module @psum_model_in_pairs
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>}>
// CHECK-NOT: @pmapc.
module @psum_model_in_pairs attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// One mesh axis of 8 in groups that are not runs of neighbours.
// CHECK-LABEL: module @psum_i_scattered_pairs
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[0, 5], [1, 2], [3, 4], [6, 7]]> : tensor<4x2xi64>}>
module @psum_i_scattered_pairs attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 8>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], axis_index_groups = [[0, 5], [1, 2], [3, 4], [6, 7]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// A tuple in nesting order: positions are data * 4 + model.
// CHECK-LABEL: module @psum_data_model_tuple
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[0, 1, 4, 5], [2, 3, 6, 7]]> : tensor<2x4xi64>}>
module @psum_data_model_tuple attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], axis_index_groups = [[0, 1, 4, 5], [2, 3, 6, 7]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// The same index groups over the tuple in the other order: positions are
// model * 2 + data, so the same indices name other devices.
// CHECK-LABEL: module @psum_model_data_tuple
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[0, 4, 2, 6], [1, 5, 3, 7]]> : tensor<2x4xi64>}>
module @psum_model_data_tuple attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], axis_index_groups = [[0, 1, 4, 5], [2, 3, 6, 7]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// An all-reduce may have groups of unequal sizes: the short ones are padded
// with -1, and the order within a group is the index group's.
// CHECK-LABEL: module @pmax_uneven_groups
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[0, -1, -1], [3, 1, 2], [4, -1, -1], [7, 5, 6]]> : tensor<4x3xi64>}>
// CHECK: stablehlo.maximum
module @pmax_uneven_groups attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], axis_index_groups = [[0], [3, 1, 2]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// Untiled all_gather: the gathered dimension is the index group's size (2), not
// the axis size (4).
// CHECK-LABEL: module @untiled_all_gather_in_groups
// CHECK: %[[UNIT:.*]] = stablehlo.reshape %{{.*}} : (tensor<8xf32>) -> tensor<1x8xf32>
// CHECK: "stablehlo.all_gather"(%[[UNIT]]) <{all_gather_dim = 0 : i64
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]>
// CHECK-SAME: (tensor<1x8xf32>) -> tensor<2x8xf32>
module @untiled_all_gather_in_groups attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<2x8xf32> {
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], all_gather_dimension = 0 : i64, tiled = false, axis_index_groups = [[0, 2], [1, 3]]}} : (tensor<8xf32>) -> tensor<2x8xf32>
    return %0 : tensor<2x8xf32>
  }
}

// -----

// Tiled all_gather over a tuple in non-nesting order, in two groups of 4.
// CHECK-LABEL: module @tiled_all_gather_model_data_in_groups
// CHECK: "stablehlo.all_gather"(%{{.*}}) <{all_gather_dim = 0 : i64
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]>
// CHECK-SAME: (tensor<8xf32>) -> tensor<32xf32>
module @tiled_all_gather_model_data_in_groups attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<32xf32> {
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], all_gather_dimension = 0 : i64, tiled = true, axis_index_groups = [[0, 1, 2, 3], [4, 5, 6, 7]]}} : (tensor<8xf32>) -> tensor<32xf32>
    return %0 : tensor<32xf32>
  }
}

// -----

// Tiled psum_scatter: dimension 0 is split into the group's 2 blocks.
// CHECK-LABEL: module @tiled_psum_scatter_in_groups
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>, scatter_dimension = 0 : i64}>
// CHECK: (tensor<8xf32>) -> tensor<4xf32>
module @tiled_psum_scatter_in_groups attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], scatter_dimension = 0 : i64, tiled = true, axis_index_groups = [[0, 2], [1, 3]]}} : (tensor<8xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// Untiled psum_scatter: the scattered dimension has the group's size, and the
// device at an index group's first position receives block 0.
// CHECK-LABEL: module @untiled_psum_scatter_in_groups
// CHECK: %[[BLOCK:.*]] = "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[3, 0], [1, 2], [7, 4], [5, 6]]> : tensor<4x2xi64>, scatter_dimension = 0 : i64}>
// CHECK: (tensor<2x4xf32>) -> tensor<1x4xf32>
// CHECK: stablehlo.reshape %[[BLOCK]] : (tensor<1x4xf32>) -> tensor<4xf32>
module @untiled_psum_scatter_in_groups attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], scatter_dimension = 0 : i64, tiled = false, axis_index_groups = [[3, 0], [1, 2]]}} : (tensor<2x4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// all_to_all over both axes in pairs: split_count is the group's size.
// CHECK-LABEL: module @all_to_all_data_model_in_pairs
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME: concat_dimension = 0 : i64
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 7], [1, 6], [2, 5], [3, 4]]> : tensor<4x2xi64>
// CHECK-SAME: split_count = 2 : i64, split_dimension = 0 : i64
module @all_to_all_data_model_in_pairs attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true, axis_index_groups = [[0, 7], [1, 6], [2, 5], [3, 4]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// Sums over one axis with and without index groups have different group sets:
// combine-all-reduces keeps them apart, and combines only the two sums that
// share their index groups.
// COMBINE-LABEL: module @sums_in_different_groups
// COMBINE: "stablehlo.all_reduce"(%{{.*}}, %{{.*}})
// COMBINE-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]>
// COMBINE: "stablehlo.all_reduce"(%{{[a-z0-9_]+}}) <{
// COMBINE-SAME{LITERAL}: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// COMBINE-NOT: "stablehlo.all_reduce"
// CHECK-LABEL: module @sums_in_different_groups
module @sums_in_different_groups attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<3xf32>) -> tensor<3xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<3xf32>) -> tensor<3xf32>
    %2 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
}

// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives{replica-groups=dense})' --split-input-file | FileCheck %s

// Replica groups of every collective kind on every mesh shape, as device ids
// (replica-groups=dense; lower-collectives.mlir shows them as mesh axes), over the inner
// axis, the outer axis, all axes and a tuple in non-nesting order. Devices are
// numbered row-major over the mesh (outer axis slowest); a group is ordered
// row-major over the axes in the order the collective names them, but for
// ppermute, which counts a group in mesh order as JAX does. Each chunk:
// axis_index (replica_id arithmetic), psum/pmax/pmin (all_reduce with add/
// maximum/minimum), tiled all_gather, psum_scatter and all_to_all, and a
// ppermute shifting each device to the next in its group.

// A 1-D mesh: one group of all 8 devices; axis_index is the replica id.
// CHECK-LABEL: module @over_i_on_8
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK-SAME: -> tensor<64xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: -> tensor<1xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK-SAME: split_count = 8 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]>
// CHECK: return %[[ID]]
// CHECK-NOT: @pmapc.
module @over_i_on_8 attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 8>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["i"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<64xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<1xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x2, the inner axis: consecutive devices.
// CHECK-LABEL: module @over_model_on_2x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[SIZE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM0:.*]] = stablehlo.remainder %[[ID]], %[[SIZE0]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>
// CHECK-SAME: -> tensor<16xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>
// CHECK: -> tensor<4xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>
// CHECK-SAME: split_count = 2 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 0], [2, 3], [3, 2]]>
// CHECK: return %[[REM0]]
// CHECK-NOT: @pmapc.
module @over_model_on_2x2 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<16xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<4xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], perm = [[0, 1], [1, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x2, the outer axis: devices one 'model' row apart.
// CHECK-LABEL: module @over_data_on_2x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[STRIDE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[DIV0:.*]] = stablehlo.divide %[[ID]], %[[STRIDE0]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>
// CHECK-SAME: -> tensor<16xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>
// CHECK: -> tensor<4xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>
// CHECK-SAME: split_count = 2 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 2], [2, 0], [1, 3], [3, 1]]>
// CHECK: return %[[DIV0]]
// CHECK-NOT: @pmapc.
module @over_data_on_2x2 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<16xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<4xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], perm = [[0, 1], [1, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x2, both axes in nesting order: all devices in id order.
// CHECK-LABEL: module @over_data_then_model_on_2x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[STRIDE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[DIV0:.*]] = stablehlo.divide %[[ID]], %[[STRIDE0]]
// CHECK: %[[WEIGHT0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[MUL0:.*]] = stablehlo.multiply %[[DIV0]], %[[WEIGHT0]]
// CHECK: %[[SIZE1:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM1:.*]] = stablehlo.remainder %[[ID]], %[[SIZE1]]
// CHECK: %[[SUM1:.*]] = stablehlo.add %[[MUL0]], %[[REM1]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK-SAME: -> tensor<32xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK: -> tensor<2xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK-SAME: split_count = 4 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]>
// CHECK: return %[[SUM1]]
// CHECK-NOT: @pmapc.
module @over_data_then_model_on_2x2 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<32xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<2xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], perm = [[0, 1], [1, 2], [2, 3], [3, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x2, both axes model-major: the group is ordered by 'model' first.
// CHECK-LABEL: module @over_model_then_data_on_2x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[SIZE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM0:.*]] = stablehlo.remainder %[[ID]], %[[SIZE0]]
// CHECK: %[[WEIGHT0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[MUL0:.*]] = stablehlo.multiply %[[REM0]], %[[WEIGHT0]]
// CHECK: %[[STRIDE1:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[DIV1:.*]] = stablehlo.divide %[[ID]], %[[STRIDE1]]
// CHECK: %[[SUM1:.*]] = stablehlo.add %[[MUL0]], %[[DIV1]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>
// CHECK-SAME: -> tensor<32xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>
// CHECK: -> tensor<2xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>
// CHECK-SAME: split_count = 4 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]>
// CHECK: return %[[SUM1]]
// CHECK-NOT: @pmapc.
module @over_model_then_data_on_2x2 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<32xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<2xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], perm = [[0, 1], [1, 2], [2, 3], [3, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x4, the inner axis: consecutive devices.
// CHECK-LABEL: module @over_model_on_2x4
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[SIZE0:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[REM0:.*]] = stablehlo.remainder %[[ID]], %[[SIZE0]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK-SAME: -> tensor<32xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK: -> tensor<2xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK-SAME: split_count = 4 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4]]>
// CHECK: return %[[REM0]]
// CHECK-NOT: @pmapc.
module @over_model_on_2x4 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<32xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<2xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], perm = [[0, 1], [1, 2], [2, 3], [3, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x4, the outer axis: devices one 'model' row apart.
// CHECK-LABEL: module @over_data_on_2x4
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[STRIDE0:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[DIV0:.*]] = stablehlo.divide %[[ID]], %[[STRIDE0]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK-SAME: -> tensor<16xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK: -> tensor<4xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK-SAME: split_count = 2 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 4], [4, 0], [1, 5], [5, 1], [2, 6], [6, 2], [3, 7], [7, 3]]>
// CHECK: return %[[DIV0]]
// CHECK-NOT: @pmapc.
module @over_data_on_2x4 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<16xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<4xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], perm = [[0, 1], [1, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x4, both axes in nesting order: all devices in id order.
// CHECK-LABEL: module @over_data_then_model_on_2x4
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[STRIDE0:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[DIV0:.*]] = stablehlo.divide %[[ID]], %[[STRIDE0]]
// CHECK: %[[WEIGHT0:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[MUL0:.*]] = stablehlo.multiply %[[DIV0]], %[[WEIGHT0]]
// CHECK: %[[SIZE1:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[REM1:.*]] = stablehlo.remainder %[[ID]], %[[SIZE1]]
// CHECK: %[[SUM1:.*]] = stablehlo.add %[[MUL0]], %[[REM1]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK-SAME: -> tensor<64xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: -> tensor<1xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK-SAME: split_count = 8 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]>
// CHECK: return %[[SUM1]]
// CHECK-NOT: @pmapc.
module @over_data_then_model_on_2x4 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<64xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<1xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], perm = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x4, both axes model-major: the group is ordered by 'model' first.
// CHECK-LABEL: module @over_model_then_data_on_2x4
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[SIZE0:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[REM0:.*]] = stablehlo.remainder %[[ID]], %[[SIZE0]]
// CHECK: %[[WEIGHT0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[MUL0:.*]] = stablehlo.multiply %[[REM0]], %[[WEIGHT0]]
// CHECK: %[[STRIDE1:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[DIV1:.*]] = stablehlo.divide %[[ID]], %[[STRIDE1]]
// CHECK: %[[SUM1:.*]] = stablehlo.add %[[MUL0]], %[[DIV1]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5, 2, 6, 3, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5, 2, 6, 3, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5, 2, 6, 3, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5, 2, 6, 3, 7]]> : tensor<1x8xi64>
// CHECK-SAME: -> tensor<64xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5, 2, 6, 3, 7]]> : tensor<1x8xi64>
// CHECK: -> tensor<1xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5, 2, 6, 3, 7]]> : tensor<1x8xi64>
// CHECK-SAME: split_count = 8 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]>
// CHECK: return %[[SUM1]]
// CHECK-NOT: @pmapc.
module @over_model_then_data_on_2x4 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<64xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<1xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], perm = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 4x2, the inner axis: consecutive devices.
// CHECK-LABEL: module @over_model_on_4x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[SIZE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM0:.*]] = stablehlo.remainder %[[ID]], %[[SIZE0]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK-SAME: -> tensor<16xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK: -> tensor<4xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK-SAME: split_count = 2 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 0], [2, 3], [3, 2], [4, 5], [5, 4], [6, 7], [7, 6]]>
// CHECK: return %[[REM0]]
// CHECK-NOT: @pmapc.
module @over_model_on_4x2 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 4, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<16xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<4xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], perm = [[0, 1], [1, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 4x2, the outer axis: devices one 'model' row apart.
// CHECK-LABEL: module @over_data_on_4x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[STRIDE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[DIV0:.*]] = stablehlo.divide %[[ID]], %[[STRIDE0]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>
// CHECK-SAME: -> tensor<32xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>
// CHECK: -> tensor<2xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>
// CHECK-SAME: split_count = 4 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 2], [2, 4], [4, 6], [6, 0], [1, 3], [3, 5], [5, 7], [7, 1]]>
// CHECK: return %[[DIV0]]
// CHECK-NOT: @pmapc.
module @over_data_on_4x2 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 4, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<32xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<2xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], perm = [[0, 1], [1, 2], [2, 3], [3, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 4x2, both axes in nesting order: all devices in id order.
// CHECK-LABEL: module @over_data_then_model_on_4x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[STRIDE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[DIV0:.*]] = stablehlo.divide %[[ID]], %[[STRIDE0]]
// CHECK: %[[WEIGHT0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[MUL0:.*]] = stablehlo.multiply %[[DIV0]], %[[WEIGHT0]]
// CHECK: %[[SIZE1:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM1:.*]] = stablehlo.remainder %[[ID]], %[[SIZE1]]
// CHECK: %[[SUM1:.*]] = stablehlo.add %[[MUL0]], %[[REM1]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK-SAME: -> tensor<64xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: -> tensor<1xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK-SAME: split_count = 8 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]>
// CHECK: return %[[SUM1]]
// CHECK-NOT: @pmapc.
module @over_data_then_model_on_4x2 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 4, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<64xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<1xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], perm = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 4x2, both axes model-major: the group is ordered by 'model' first.
// CHECK-LABEL: module @over_model_then_data_on_4x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[SIZE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM0:.*]] = stablehlo.remainder %[[ID]], %[[SIZE0]]
// CHECK: %[[WEIGHT0:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[MUL0:.*]] = stablehlo.multiply %[[REM0]], %[[WEIGHT0]]
// CHECK: %[[STRIDE1:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[DIV1:.*]] = stablehlo.divide %[[ID]], %[[STRIDE1]]
// CHECK: %[[SUM1:.*]] = stablehlo.add %[[MUL0]], %[[DIV1]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6, 1, 3, 5, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6, 1, 3, 5, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6, 1, 3, 5, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6, 1, 3, 5, 7]]> : tensor<1x8xi64>
// CHECK-SAME: -> tensor<64xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6, 1, 3, 5, 7]]> : tensor<1x8xi64>
// CHECK: -> tensor<1xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6, 1, 3, 5, 7]]> : tensor<1x8xi64>
// CHECK-SAME: split_count = 8 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]>
// CHECK: return %[[SUM1]]
// CHECK-NOT: @pmapc.
module @over_model_then_data_on_4x2 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 4, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<64xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<1xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], perm = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x2x2, the innermost axis.
// CHECK-LABEL: module @over_z_on_2x2x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[SIZE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM0:.*]] = stablehlo.remainder %[[ID]], %[[SIZE0]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK-SAME: -> tensor<16xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK: -> tensor<4xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
// CHECK-SAME: split_count = 2 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 0], [2, 3], [3, 2], [4, 5], [5, 4], [6, 7], [7, 6]]>
// CHECK: return %[[REM0]]
// CHECK-NOT: @pmapc.
module @over_z_on_2x2x2 attributes {pmapc.mesh = {axis_names = ["x", "y", "z"], axis_sizes = array<i64: 2, 2, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["z"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<16xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<4xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z"], perm = [[0, 1], [1, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x2x2, the middle axis: groups agree on 'x' and 'z'.
// CHECK-LABEL: module @over_y_on_2x2x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[STRIDE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[DIV0:.*]] = stablehlo.divide %[[ID]], %[[STRIDE0]]
// CHECK: %[[SIZE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM0:.*]] = stablehlo.remainder %[[DIV0]], %[[SIZE0]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>
// CHECK-SAME: -> tensor<16xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>
// CHECK: -> tensor<4xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>
// CHECK-SAME: split_count = 2 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 2], [2, 0], [1, 3], [3, 1], [4, 6], [6, 4], [5, 7], [7, 5]]>
// CHECK: return %[[REM0]]
// CHECK-NOT: @pmapc.
module @over_y_on_2x2x2 attributes {pmapc.mesh = {axis_names = ["x", "y", "z"], axis_sizes = array<i64: 2, 2, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["y"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["y"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["y"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["y"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["y"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<16xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["y"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<4xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["y"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["y"], perm = [[0, 1], [1, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x2x2, the outermost axis.
// CHECK-LABEL: module @over_x_on_2x2x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[STRIDE0:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[DIV0:.*]] = stablehlo.divide %[[ID]], %[[STRIDE0]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK-SAME: -> tensor<16xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK: -> tensor<4xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK-SAME: split_count = 2 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 4], [4, 0], [1, 5], [5, 1], [2, 6], [6, 2], [3, 7], [7, 3]]>
// CHECK: return %[[DIV0]]
// CHECK-NOT: @pmapc.
module @over_x_on_2x2x2 attributes {pmapc.mesh = {axis_names = ["x", "y", "z"], axis_sizes = array<i64: 2, 2, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["x"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<16xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<4xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x"], perm = [[0, 1], [1, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x2x2, all axes in nesting order.
// CHECK-LABEL: module @over_x_then_y_then_z_on_2x2x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[STRIDE0:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[DIV0:.*]] = stablehlo.divide %[[ID]], %[[STRIDE0]]
// CHECK: %[[WEIGHT0:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[MUL0:.*]] = stablehlo.multiply %[[DIV0]], %[[WEIGHT0]]
// CHECK: %[[STRIDE1:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[DIV1:.*]] = stablehlo.divide %[[ID]], %[[STRIDE1]]
// CHECK: %[[SIZE1:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM1:.*]] = stablehlo.remainder %[[DIV1]], %[[SIZE1]]
// CHECK: %[[WEIGHT1:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[MUL1:.*]] = stablehlo.multiply %[[REM1]], %[[WEIGHT1]]
// CHECK: %[[SUM1:.*]] = stablehlo.add %[[MUL0]], %[[MUL1]]
// CHECK: %[[SIZE2:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM2:.*]] = stablehlo.remainder %[[ID]], %[[SIZE2]]
// CHECK: %[[SUM2:.*]] = stablehlo.add %[[SUM1]], %[[REM2]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK-SAME: -> tensor<64xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: -> tensor<1xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK-SAME: split_count = 8 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]>
// CHECK: return %[[SUM2]]
// CHECK-NOT: @pmapc.
module @over_x_then_y_then_z_on_2x2x2 attributes {pmapc.mesh = {axis_names = ["x", "y", "z"], axis_sizes = array<i64: 2, 2, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["x", "y", "z"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x", "y", "z"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x", "y", "z"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x", "y", "z"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x", "y", "z"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<64xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x", "y", "z"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<1xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x", "y", "z"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["x", "y", "z"], perm = [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

// -----

// 2x2x2, ('z', 'x'): one group per 'y', ordered 'z'-major.
// CHECK-LABEL: module @over_z_then_x_on_2x2x2
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[SIZE0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[REM0:.*]] = stablehlo.remainder %[[ID]], %[[SIZE0]]
// CHECK: %[[WEIGHT0:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[MUL0:.*]] = stablehlo.multiply %[[REM0]], %[[WEIGHT0]]
// CHECK: %[[STRIDE1:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[DIV1:.*]] = stablehlo.divide %[[ID]], %[[STRIDE1]]
// CHECK: %[[SUM1:.*]] = stablehlo.add %[[MUL0]], %[[DIV1]]
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]> : tensor<2x4xi64>
// CHECK: stablehlo.add
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]> : tensor<2x4xi64>
// CHECK: stablehlo.maximum
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]> : tensor<2x4xi64>
// CHECK: stablehlo.minimum
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]> : tensor<2x4xi64>
// CHECK-SAME: -> tensor<32xf32>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]> : tensor<2x4xi64>
// CHECK: -> tensor<2xf32>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]> : tensor<2x4xi64>
// CHECK-SAME: split_count = 4 : i64
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 4], [4, 5], [5, 0], [2, 3], [3, 6], [6, 7], [7, 2]]>
// CHECK: return %[[SUM1]]
// CHECK-NOT: @pmapc.
module @over_z_then_x_on_2x2x2 attributes {pmapc.mesh = {axis_names = ["x", "y", "z"], axis_sizes = array<i64: 2, 2, 2>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["z", "x"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z", "x"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z", "x"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z", "x"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %4 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z", "x"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<32xf32>
    %5 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z", "x"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<2xf32>
    %6 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z", "x"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["z", "x"], perm = [[0, 1], [1, 2], [2, 3], [3, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<i32>
  }
}

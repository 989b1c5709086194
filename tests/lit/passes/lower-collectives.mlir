// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives)' --split-input-file | FileCheck %s

// lower-collectives on flattened modules (as flatten-maps leaves them, with a
// `pmapc.mesh`): what each kind lowers to, on a 2x4 data x model mesh. The
// replica groups of every kind on every mesh shape are in
// lower-collectives-meshes.mlir.

// psum: an all_reduce whose reducer adds two scalars of the element type.
// The output is target-neutral: no channel handle, no device counts (the
// target passes to-partitions and to-replicas add them).
// CHECK-LABEL: module @psum_f32_over_model
// CHECK-NOT: mhlo.num_
// CHECK: func.func public @main(%[[ARG:.*]]: tensor<3xf32>)
// CHECK: %[[SUM:.*]] = "stablehlo.all_reduce"(%[[ARG]])
// CHECK-SAME{LITERAL}: <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>}>
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<f32>, %[[RHS:.*]]: tensor<f32>):
// CHECK-NEXT: %[[ADD:.*]] = stablehlo.add %[[LHS]], %[[RHS]] : tensor<f32>
// CHECK-NEXT: stablehlo.return %[[ADD]] : tensor<f32>
// CHECK: (tensor<3xf32>) -> tensor<3xf32>
// CHECK: return %[[SUM]]
// CHECK-NOT: @pmapc.
module @psum_f32_over_model attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// A complex psum adds complex scalars.
// CHECK-LABEL: module @psum_complex_over_model
// CHECK: "stablehlo.all_reduce"
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<complex<f32>>, %[[RHS:.*]]: tensor<complex<f32>>):
// CHECK-NEXT: stablehlo.add %[[LHS]], %[[RHS]] : tensor<complex<f32>>
// CHECK: (tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>>
// CHECK-NOT: @pmapc.
module @psum_complex_over_model attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>>
    return %0 : tensor<3xcomplex<f32>>
  }
}

// -----

// CHECK-LABEL: module @pmax_i32_over_data
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">]>}>
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<i32>, %[[RHS:.*]]: tensor<i32>):
// CHECK-NEXT: stablehlo.maximum %[[LHS]], %[[RHS]] : tensor<i32>
// CHECK-NOT: @pmapc.
module @pmax_i32_over_data attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xi32>) -> tensor<3xi32> {
    %0 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<3xi32>) -> tensor<3xi32>
    return %0 : tensor<3xi32>
  }
}

// -----

// On booleans the reducers stay on i1 (minimum is "and").
// CHECK-LABEL: module @pmin_i1_over_data_and_model
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">, #stablehlo.axis_ref<name = "model">]>}>
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<i1>, %[[RHS:.*]]: tensor<i1>):
// CHECK-NEXT: stablehlo.minimum %[[LHS]], %[[RHS]] : tensor<i1>
// CHECK-NOT: @pmapc.
module @pmin_i1_over_data_and_model attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xi1>) -> tensor<3xi1> {
    %0 = stablehlo.custom_call @pmapc.pmin(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<3xi1>) -> tensor<3xi1>
    return %0 : tensor<3xi1>
  }
}

// -----

// A tuple in non-nesting order: one group, ordered model-major. psum of i1
// adds on i1, i.e. a logical or (JAX's psum of bools counts in int32: the
// conversion happens in jax.lax.psum, before the traced psum).
// CHECK-LABEL: module @psum_i1_over_model_then_data
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">, #stablehlo.axis_ref<name = "data">]>}>
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<i1>, %[[RHS:.*]]: tensor<i1>):
// CHECK-NEXT: stablehlo.add %[[LHS]], %[[RHS]] : tensor<i1>
// CHECK-NOT: @pmapc.
module @psum_i1_over_model_then_data attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xi1>) -> tensor<3xi1> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : (tensor<3xi1>) -> tensor<3xi1>
    return %0 : tensor<3xi1>
  }
}

// -----

// The remaining reducer and element type pairs: maximum on i1 ("or"),
// minimum on i32.
// CHECK-LABEL: module @pmax_i1_and_pmin_i32
// CHECK: "stablehlo.all_reduce"
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<i1>, %[[RHS:.*]]: tensor<i1>):
// CHECK-NEXT: stablehlo.maximum %[[LHS]], %[[RHS]] : tensor<i1>
// CHECK: "stablehlo.all_reduce"
// CHECK-NEXT: ^bb0(%[[LHS2:.*]]: tensor<i32>, %[[RHS2:.*]]: tensor<i32>):
// CHECK-NEXT: stablehlo.minimum %[[LHS2]], %[[RHS2]] : tensor<i32>
// CHECK-NOT: @pmapc.
module @pmax_i1_and_pmin_i32 attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xi1>, %arg1: tensor<3xi32>) -> (tensor<3xi1>, tensor<3xi32>) {
    %0 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<3xi1>) -> tensor<3xi1>
    %1 = stablehlo.custom_call @pmapc.pmin(%arg1) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<3xi32>) -> tensor<3xi32>
    return %0, %1 : tensor<3xi1>, tensor<3xi32>
  }
}

// -----

// CHECK-LABEL: module @variadic_psum_one_all_reduce_per_operand
// CHECK: func.func public @main(%[[X:.*]]: tensor<3xf32>, %[[Y:.*]]: tensor<2xi32>)
// CHECK: %[[SUMX:.*]] = "stablehlo.all_reduce"(%[[X]])
// CHECK: stablehlo.add %{{.*}}, %{{.*}} : tensor<f32>
// CHECK: %[[SUMY:.*]] = "stablehlo.all_reduce"(%[[Y]])
// CHECK: stablehlo.add %{{.*}}, %{{.*}} : tensor<i32>
// CHECK: return %[[SUMX]], %[[SUMY]]
// CHECK-NOT: @pmapc.
module @variadic_psum_one_all_reduce_per_operand attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>, %arg1: tensor<2xi32>) -> (tensor<3xf32>, tensor<2xi32>) {
    %0:2 = stablehlo.custom_call @pmapc.psum(%arg0, %arg1) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<3xf32>, tensor<2xi32>) -> (tensor<3xf32>, tensor<2xi32>)
    return %0#0, %0#1 : tensor<3xf32>, tensor<2xi32>
  }
}

// -----

// CHECK-LABEL: module @tiled_all_gather
// CHECK: "stablehlo.all_gather"(%{{.*}}) <{all_gather_dim = 1 : i64
// CHECK-SAME{LITERAL}: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// CHECK-SAME: (tensor<3x2xf32>) -> tensor<3x8xf32>
// CHECK-NOT: @pmapc.
module @tiled_all_gather attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3x2xf32>) -> tensor<3x8xf32> {
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], all_gather_dimension = 1 : i64, tiled = true}} : (tensor<3x2xf32>) -> tensor<3x8xf32>
    return %0 : tensor<3x8xf32>
  }
}

// -----

// Untiled: a unit dimension is inserted at all_gather_dimension and gathered.
// CHECK-LABEL: module @untiled_all_gather_inserts_the_gathered_dimension
// CHECK: %[[UNIT:.*]] = stablehlo.reshape %{{.*}} : (tensor<3xf32>) -> tensor<1x3xf32>
// CHECK: %[[STACK:.*]] = "stablehlo.all_gather"(%[[UNIT]]) <{all_gather_dim = 0 : i64
// CHECK-SAME{LITERAL}: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">]>
// CHECK-SAME: (tensor<1x3xf32>) -> tensor<2x3xf32>
// CHECK: return %[[STACK]]
// CHECK-NOT: @pmapc.
module @untiled_all_gather_inserts_the_gathered_dimension attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], all_gather_dimension = 0 : i64, tiled = false}} : (tensor<3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}

// -----

// CHECK-LABEL: module @tiled_psum_scatter
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>, scatter_dimension = 0 : i64}>
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<f32>, %[[RHS:.*]]: tensor<f32>):
// CHECK-NEXT: stablehlo.add %[[LHS]], %[[RHS]] : tensor<f32>
// CHECK: (tensor<8x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: @pmapc.
module @tiled_psum_scatter attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], scatter_dimension = 0 : i64, tiled = true}} : (tensor<8x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}

// -----

// Untiled: each device keeps a unit block, then the dimension is dropped.
// CHECK-LABEL: module @untiled_psum_scatter_drops_the_scattered_dimension
// CHECK: %[[BLOCK:.*]] = "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">]>, scatter_dimension = 1 : i64}>
// CHECK: stablehlo.add %{{.*}}, %{{.*}} : tensor<i32>
// CHECK: (tensor<3x2xi32>) -> tensor<3x1xi32>
// CHECK: %[[OUT:.*]] = stablehlo.reshape %[[BLOCK]] : (tensor<3x1xi32>) -> tensor<3xi32>
// CHECK: return %[[OUT]]
// CHECK-NOT: @pmapc.
module @untiled_psum_scatter_drops_the_scattered_dimension attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3x2xi32>) -> tensor<3xi32> {
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], scatter_dimension = 1 : i64, tiled = false}} : (tensor<3x2xi32>) -> tensor<3xi32>
    return %0 : tensor<3xi32>
  }
}

// -----

// CHECK-LABEL: module @tiled_all_to_all
// CHECK: "stablehlo.all_to_all"(%{{.*}}) <{concat_dimension = 1 : i64
// CHECK-SAME{LITERAL}: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// CHECK-SAME: split_count = 4 : i64, split_dimension = 0 : i64}>
// CHECK-SAME: (tensor<8x3xf32>) -> tensor<2x12xf32>
// CHECK-NOT: @pmapc.
module @tiled_all_to_all attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8x3xf32>) -> tensor<2x12xf32> {
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], split_axis = 0 : i64, concat_axis = 1 : i64, tiled = true}} : (tensor<8x3xf32>) -> tensor<2x12xf32>
    return %0 : tensor<2x12xf32>
  }
}

// -----

// Untiled, JAX's rule: split_axis (size 4) goes away and a dimension of size 4
// appears at concat_axis, counted after the removal: 4x3 -> 3x4. A unit
// dimension is inserted at the concat position, exchanged into, then dropped.
// CHECK-LABEL: module @untiled_all_to_all_split_before_concat
// CHECK: %[[UNIT:.*]] = stablehlo.reshape %{{.*}} : (tensor<4x3xf32>) -> tensor<4x3x1xf32>
// CHECK: %[[SWAP:.*]] = "stablehlo.all_to_all"(%[[UNIT]]) <{concat_dimension = 2 : i64
// CHECK-SAME: split_count = 4 : i64, split_dimension = 0 : i64}>
// CHECK-SAME: (tensor<4x3x1xf32>) -> tensor<1x3x4xf32>
// CHECK: %[[OUT:.*]] = stablehlo.reshape %[[SWAP]] : (tensor<1x3x4xf32>) -> tensor<3x4xf32>
// CHECK: return %[[OUT]]
// CHECK-NOT: @pmapc.
module @untiled_all_to_all_split_before_concat attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<3x4xf32> {
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], split_axis = 0 : i64, concat_axis = 1 : i64, tiled = false}} : (tensor<4x3xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }
}

// -----

// 3x4x5 with split_axis = 1, concat_axis = 0 -> 4x3x5.
// CHECK-LABEL: module @untiled_all_to_all_split_after_concat
// CHECK: %[[UNIT:.*]] = stablehlo.reshape %{{.*}} : (tensor<3x4x5xf32>) -> tensor<1x3x4x5xf32>
// CHECK: %[[SWAP:.*]] = "stablehlo.all_to_all"(%[[UNIT]]) <{concat_dimension = 0 : i64
// CHECK-SAME: split_count = 4 : i64, split_dimension = 2 : i64}>
// CHECK-SAME: (tensor<1x3x4x5xf32>) -> tensor<4x3x1x5xf32>
// CHECK: %[[OUT:.*]] = stablehlo.reshape %[[SWAP]] : (tensor<4x3x1x5xf32>) -> tensor<4x3x5xf32>
// CHECK: return %[[OUT]]
// CHECK-NOT: @pmapc.
module @untiled_all_to_all_split_after_concat attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3x4x5xf32>) -> tensor<4x3x5xf32> {
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], split_axis = 1 : i64, concat_axis = 0 : i64, tiled = false}} : (tensor<3x4x5xf32>) -> tensor<4x3x5xf32>
    return %0 : tensor<4x3x5xf32>
  }
}

// -----

// split_axis == concat_axis: the exchange keeps the shape, no reshapes.
// CHECK-LABEL: module @untiled_all_to_all_split_equals_concat
// CHECK-NOT: stablehlo.reshape
// CHECK: %[[SWAP:.*]] = "stablehlo.all_to_all"(%{{.*}}) <{concat_dimension = 0 : i64
// CHECK-SAME: split_count = 4 : i64, split_dimension = 0 : i64}>
// CHECK-SAME: (tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK-NOT: stablehlo.reshape
// CHECK: return %[[SWAP]]
// CHECK-NOT: @pmapc.
module @untiled_all_to_all_split_equals_concat attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], split_axis = 0 : i64, concat_axis = 0 : i64, tiled = false}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
}

// -----

// The permutation over group positions becomes device pairs for every group.
// CHECK-LABEL: module @ppermute_pairs_expanded_over_every_group
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: <{source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0], [4, 5], [5, 6], [6, 7], [7, 4]]> : tensor<8x2xi64>}>
// CHECK-NOT: @pmapc.
module @ppermute_pairs_expanded_over_every_group attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], perm = [[0, 1], [1, 2], [2, 3], [3, 0]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// CHECK-LABEL: module @ppermute_over_outer_axis
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: <{source_target_pairs = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>}>
// CHECK-NOT: @pmapc.
module @ppermute_over_outer_axis attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"], perm = [[0, 1]]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// No device has a source: every device receives zeros.
// CHECK-LABEL: module @ppermute_without_pairs_gives_zeros
// CHECK-NOT: stablehlo.collective_permute
// CHECK: %[[ZEROS:.*]] = stablehlo.constant dense<0> : tensor<3xi32>
// CHECK: return %[[ZEROS]]
// CHECK-NOT: @pmapc.
module @ppermute_without_pairs_gives_zeros attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xi32>) -> tensor<3xi32> {
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], perm = []}} : (tensor<3xi32>) -> tensor<3xi32>
    return %0 : tensor<3xi32>
  }
}

// -----

// axis_index from the replica id: index = (id / stride) % size, with the
// division left out for the innermost axis.
// CHECK-LABEL: module @axis_index_over_inner_axis
// CHECK: %[[RAW:.*]] = stablehlo.replica_id : tensor<ui32>
// CHECK: %[[ID:.*]] = stablehlo.convert %[[RAW]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[FOUR:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[INDEX:.*]] = stablehlo.remainder %[[ID]], %[[FOUR]] : tensor<i32>
// CHECK-NOT: stablehlo.divide
// CHECK: return %[[INDEX]]
// CHECK-NOT: @pmapc.
module @axis_index_over_inner_axis attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main() -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

// ... and the remainder left out for the outermost axis.
// CHECK-LABEL: module @axis_index_over_outer_axis
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[FOUR:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[INDEX:.*]] = stablehlo.divide %[[ID]], %[[FOUR]] : tensor<i32>
// CHECK-NOT: stablehlo.remainder
// CHECK: return %[[INDEX]]
// CHECK-NOT: @pmapc.
module @axis_index_over_outer_axis attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main() -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data"]}} : () -> tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

// Over ("model", "data"): index = model_index * 2 + data_index.
// CHECK-LABEL: module @axis_index_over_model_then_data
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[FOUR:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[MODEL:.*]] = stablehlo.remainder %[[ID]], %[[FOUR]]
// CHECK: %[[TWO:.*]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK: %[[SCALED:.*]] = stablehlo.multiply %[[MODEL]], %[[TWO]]
// CHECK: %[[FOUR2:.*]] = stablehlo.constant dense<4> : tensor<i32>
// CHECK: %[[DATA:.*]] = stablehlo.divide %[[ID]], %[[FOUR2]]
// CHECK: %[[INDEX:.*]] = stablehlo.add %[[SCALED]], %[[DATA]]
// CHECK: return %[[INDEX]]
// CHECK-NOT: @pmapc.
module @axis_index_over_model_then_data attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main() -> tensor<i32> {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model", "data"]}} : () -> tensor<i32>
    return %0 : tensor<i32>
  }
}

// -----

// Several axis_index ops share one replica_id; equal ones share the value.
// CHECK-LABEL: module @replica_id_read_once_per_function
// CHECK: stablehlo.replica_id
// CHECK-NOT: stablehlo.replica_id
// CHECK: %[[MODEL:.*]] = stablehlo.remainder
// CHECK-NOT: stablehlo.replica_id
// CHECK: %[[DATA:.*]] = stablehlo.divide
// CHECK-NOT: stablehlo.replica_id
// CHECK: return %{{.*}}, %[[MODEL]], %[[DATA]], %[[MODEL]]
// CHECK-NOT: @pmapc.
module @replica_id_read_once_per_function attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<i32>, tensor<i32>, tensor<i32>) {
    %x = stablehlo.negate %arg0 : tensor<3xf32>
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data"]}} : () -> tensor<i32>
    %2 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    return %x, %0, %1, %2 : tensor<3xf32>, tensor<i32>, tensor<i32>, tensor<i32>
  }
}

// -----

// Groups that are whole mesh axes are written as those axes, over one `sdy.mesh`
// op the pass adds for the module's mesh (never listed device by device: a
// collective costs the same on any mesh). An axis of size 1 changes no group and
// is left out; groups over axes of size 1 only are the mesh's first such axis.
// CHECK-LABEL: module @named_groups_over_one_mesh_op
// CHECK-COUNT-1: sdy.mesh @mesh = <["data"=2, "one"=1, "model"=4]>
// CHECK-NOT: sdy.mesh
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">, #stablehlo.axis_ref<name = "data">]>
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "one">]>
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
module @named_groups_over_one_mesh_op attributes {pmapc.mesh = {axis_names = ["data", "one", "model"], axis_sizes = array<i64: 2, 1, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<12xf32>) {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "one", "data"]}} : (tensor<3xf32>) -> tensor<3xf32>
    %1 = stablehlo.custom_call @pmapc.pmax(%arg0) {api_version = 4 : i32, backend_config = {axes = ["one"]}} : (tensor<3xf32>) -> tensor<3xf32>
    %2 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<3xf32>) -> tensor<12xf32>
    return %0, %1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<12xf32>
  }
}

// -----

// Without a mesh (no maps) there is nothing to lower.
// CHECK-LABEL: module @module_without_mesh_is_left_alone
// CHECK-NOT: mhlo.num_
// CHECK: return %arg0
module @module_without_mesh_is_left_alone  {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {

    return %arg0 : tensor<3xf32>
  }
}

// RUN: pmapc opt %s --pass-pipeline='builtin.module(verify-axes)' --split-input-file | FileCheck %s

// verify-axes changes nothing: each valid program comes back as it went in.
// Each chunk checks the op that a wrong rule would reject.

// CHECK-LABEL: module @collectives_over_inner_outer_and_both_axes
// CHECK: @pmapc.psum(%{{.*}}) {{.*}}axes = ["model"]
// CHECK: @pmapc.pmax(%{{.*}}) {{.*}}axes = ["data"]
// CHECK: @pmapc.pmin(%{{.*}}) {{.*}}axes = ["data", "model"]
module @collectives_over_inner_outer_and_both_axes {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @outer(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @inner(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<f32>) -> tensor<f32>
    %1 = stablehlo.custom_call @pmapc.pmax(%0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<f32>) -> tensor<f32>
    %2 = stablehlo.custom_call @pmapc.pmin(%1) {api_version = 4 : i32, backend_config = {axes = ["data", "model"]}} : (tensor<f32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

// The inner "i" (size 4) shadows the outer "i" (size 2): the gather has 4 rows.
// CHECK-LABEL: module @inner_map_shadows_outer_axis_name
// CHECK: @pmapc.all_gather(%{{.*}}) {{.*}}axes = ["i"]{{.*}} -> tensor<4xf32>
module @inner_map_shadows_outer_axis_name {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @outer(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @inner(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], all_gather_dimension = 0 : i64, tiled = false}} : (tensor<f32>) -> tensor<4xf32>
    %1 = stablehlo.slice %0 [0:1] : (tensor<4xf32>) -> tensor<1xf32>
    %2 = stablehlo.reshape %1 : (tensor<1xf32>) -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

// A tuple in non-nesting order groups all 2 * 4 devices.
// CHECK-LABEL: module @tiled_all_gather_over_tuple_in_non_nesting_order
// CHECK: @pmapc.all_gather(%{{.*}}) {{.*}}axes = ["model", "data"]{{.*}} -> tensor<24xf32>
module @tiled_all_gather_over_tuple_in_non_nesting_order {
  func.func public @main(%arg0: tensor<2x4x3xf32>) -> tensor<2x4x24xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x3xf32>) -> tensor<2x4x24xf32>
    return %0 : tensor<2x4x24xf32>
  }
  func.func private @outer(%arg0: tensor<4x3xf32>) -> tensor<4x24xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x24xf32>
    return %0 : tensor<4x24xf32>
  }
  func.func private @inner(%arg0: tensor<3xf32>) -> tensor<24xf32> {
    %0 = stablehlo.custom_call @pmapc.all_gather(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model", "data"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<3xf32>) -> tensor<24xf32>
    return %0 : tensor<24xf32>
  }
}

// -----

// CHECK-LABEL: module @unmapped_operand_and_result
// CHECK: @pmapc.map(%{{.*}}, %{{.*}}) {{.*}}in_axes = [0, unit], out_axes = [unit]
module @unmapped_operand_and_result {
  func.func public @main(%arg0: tensor<4x3xf32>, %arg1: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0, unit], out_axes = [unit]}} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<3xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}

// -----

// in_axes = [1] takes columns; out_axes = [2] stacks after the body's two dims.
// CHECK-LABEL: module @nonzero_in_axes_and_out_axes
// CHECK: @pmapc.map(%{{.*}}) {{.*}}in_axes = [1], out_axes = [2]{{.*}} -> tensor<3x5x4xf32>
module @nonzero_in_axes_and_out_axes {
  func.func public @main(%arg0: tensor<3x4x5xf32>) -> tensor<3x5x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [1], out_axes = [2]}} : (tensor<3x4x5xf32>) -> tensor<3x5x4xf32>
    return %0 : tensor<3x5x4xf32>
  }
  func.func private @body(%arg0: tensor<3x5xf32>) -> tensor<3x5xf32> {
    return %arg0 : tensor<3x5xf32>
  }
}

// -----

// Two maps at one depth bind the same axis: they are one mesh axis.
// CHECK-LABEL: module @sibling_maps_over_one_axis
// CHECK-COUNT-2: @pmapc.map(%{{.*}}) {{.*}}axis_name = "i", axis_size = 2
module @sibling_maps_over_one_axis {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    %1 = stablehlo.custom_call @pmapc.map(%0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// A function called from a map body runs at the body's depth: "i" is bound.
// CHECK-LABEL: module @collective_in_called_function
// CHECK: func.func private @helper
// CHECK: @pmapc.psum(%{{.*}}) {{.*}}axes = ["i"]
module @collective_in_called_function {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = func.call @helper(%arg0) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @helper(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// psum takes several operands and returns one result per operand.
// CHECK-LABEL: module @variadic_psum
// CHECK: @pmapc.psum(%{{.*}}, %{{.*}}) {{.*}} -> (tensor<f32>, tensor<3xi32>)
module @variadic_psum {
  func.func public @main(%arg0: tensor<2xf32>, %arg1: tensor<2x3xi32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0, 0], out_axes = [0]}} : (tensor<2xf32>, tensor<2x3xi32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>, %arg1: tensor<3xi32>) -> tensor<f32> {
    %0:2 = stablehlo.custom_call @pmapc.psum(%arg0, %arg1) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<f32>, tensor<3xi32>) -> (tensor<f32>, tensor<3xi32>)
    return %0#0 : tensor<f32>
  }
}

// -----

// Untiled: the scattered dim (size 4) is dropped; all_to_all moves it to
// concat_axis = 1, counted after removing split_axis.
// CHECK-LABEL: module @untiled_psum_scatter_and_all_to_all
// CHECK: @pmapc.psum_scatter(%{{.*}}) {{.*}} -> tensor<3xf32>
// CHECK: @pmapc.all_to_all(%{{.*}}) {{.*}} -> tensor<3x4xf32>
module @untiled_psum_scatter_and_all_to_all {
  func.func public @main(%arg0: tensor<4x4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<4x3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum_scatter(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], scatter_dimension = 0 : i64, tiled = false}} : (tensor<4x3xf32>) -> tensor<3xf32>
    %1 = stablehlo.custom_call @pmapc.all_to_all(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], split_axis = 0 : i64, concat_axis = 1 : i64, tiled = false}} : (tensor<4x3xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// A permutation may leave devices without a source (they receive zeros).
// CHECK-LABEL: module @partial_ppermute_and_axis_index
// CHECK: @pmapc.ppermute(%{{.*}}) {{.*}}perm = {{\[\[}}0, 1]]}
// CHECK: @pmapc.axis_index() {{.*}} : () -> tensor<i32>
module @partial_ppermute_and_axis_index {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.ppermute(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"], perm = [[0, 1]]}} : (tensor<f32>) -> tensor<f32>
    %1 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["i"]}} : () -> tensor<i32>
    return %0 : tensor<f32>
  }
}

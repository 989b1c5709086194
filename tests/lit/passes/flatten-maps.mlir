// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps)' --split-input-file | FileCheck %s
// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps{split-entry=false})' --split-input-file | FileCheck %s --check-prefix=NOSPLIT

// An argument used only as a mapped operand of @main's maps arrives split: each
// device gets its block. A result returned straight from a map leaves split,
// with no gather. With split-entry=false both stay whole.
// CHECK-LABEL: module @entry_argument_and_result_split_over_outer_axis
// CHECK-SAME: pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 4>}
// CHECK: func.func public @main(%[[ARG:.*]]: tensor<1x3xf32>
// CHECK-SAME{LITERAL}: {pmapc.split = [["i"], []]}) -> (tensor<1x3xf32> {pmapc.split = [["i"], []]})
// CHECK: %[[X:.*]] = stablehlo.reshape %[[ARG]] : (tensor<1x3xf32>) -> tensor<3xf32>
// CHECK: %[[Y:.*]] = stablehlo.negate %[[X]]
// CHECK-NOT: @pmapc.all_gather
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[Y]] : (tensor<3xf32>) -> tensor<1x3xf32>
// CHECK: return %[[BLOCK]]
// CHECK-NOT: @pmapc.map
// CHECK-NOT: func.func private @body

// NOSPLIT-LABEL: module @entry_argument_and_result_split_over_outer_axis
// NOSPLIT: func.func public @main(%[[ARG:.*]]: tensor<4x3xf32>
// NOSPLIT-SAME{LITERAL}: {pmapc.split = [[], []]}) -> (tensor<4x3xf32> {pmapc.split = [[], []]})
// NOSPLIT: %[[IDX:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["i"]
// NOSPLIT: %[[ROW:.*]] = stablehlo.dynamic_slice %[[ARG]], %[[IDX]], %{{.*}}, sizes = [1, 3]
// NOSPLIT: %[[X:.*]] = stablehlo.reshape %[[ROW]] : (tensor<1x3xf32>) -> tensor<3xf32>
// NOSPLIT: %[[Y:.*]] = stablehlo.negate %[[X]]
// NOSPLIT: %[[STACK:.*]] = stablehlo.custom_call @pmapc.all_gather(%[[Y]])
// NOSPLIT-SAME: all_gather_dimension = 0 : i64, axes = ["i"], tiled = false
// NOSPLIT: return %[[STACK]] : tensor<4x3xf32>
module @entry_argument_and_result_split_over_outer_axis {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}


// -----

// in_axes = [1] and out_axes = [1]: the split is on dimension 1.
// CHECK-LABEL: module @entry_split_on_nonzero_axes
// CHECK: func.func public @main(%[[ARG:.*]]: tensor<3x1xf32>
// CHECK-SAME{LITERAL}: {pmapc.split = [[], ["i"]]}) -> (tensor<3x1xf32> {pmapc.split = [[], ["i"]]})
// CHECK: %[[X:.*]] = stablehlo.reshape %[[ARG]] : (tensor<3x1xf32>) -> tensor<3xf32>
// CHECK: %[[Y:.*]] = stablehlo.negate %[[X]]
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[Y]] : (tensor<3xf32>) -> tensor<3x1xf32>
// CHECK: return %[[BLOCK]]

// NOSPLIT-LABEL: module @entry_split_on_nonzero_axes
// NOSPLIT: func.func public @main(%[[ARG:.*]]: tensor<3x4xf32>
// NOSPLIT: %[[IDX:.*]] = stablehlo.custom_call @pmapc.axis_index()
// NOSPLIT: %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<i32>
// NOSPLIT: stablehlo.dynamic_slice %[[ARG]], %[[ZERO]], %[[IDX]], sizes = [3, 1]
// NOSPLIT: @pmapc.all_gather({{.*}}all_gather_dimension = 1 : i64, axes = ["i"], tiled = false{{.*}} -> tensor<3x4xf32>
module @entry_split_on_nonzero_axes {
  func.func public @main(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [1], out_axes = [1]}} : (tensor<3x4xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}


// -----

// An argument also used outside a map stays whole; the map slices it.
// CHECK-LABEL: module @entry_argument_not_only_mapped_stays_whole
// CHECK: func.func public @main(%[[ARG:.*]]: tensor<4x3xf32>
// CHECK-SAME{LITERAL}: {pmapc.split = [[], []]}) -> (tensor<1x3xf32> {pmapc.split = [["i"], []]}, tensor<4x3xf32> {pmapc.split = [[], []]})
// CHECK: %[[IDX:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["i"]
// CHECK: stablehlo.dynamic_slice %[[ARG]], %[[IDX]], %{{.*}}, sizes = [1, 3]
// CHECK: return %{{.*}}, %[[ARG]] :
module @entry_argument_not_only_mapped_stays_whole {
  func.func public @main(%arg0: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0, %arg0 : tensor<4x3xf32>, tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}


// -----

// An inner map's mapped operand becomes the device's own row: axis_index over
// the inner axis, dynamic_slice, reshape (NOSPLIT). An entry argument that each
// level passes on whole to the next arrives split over every level, and a result
// each level returns straight from the next leaves split over every level: no
// slice and no gather.
// CHECK-LABEL: module @inner_mapped_operand_sliced_by_axis_index
// CHECK-SAME: pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}
// CHECK: func.func public @main(%[[ARG:.*]]: tensor<1x1x3xf32>
// CHECK-SAME{LITERAL}: {pmapc.split = [["data"], ["model"], []]}) -> (tensor<1x1x3xf32> {pmapc.split = [["data"], ["model"], []]})
// CHECK: %[[ROWS:.*]] = stablehlo.reshape %[[ARG]] : (tensor<1x1x3xf32>) -> tensor<1x3xf32>
// CHECK: %[[X:.*]] = stablehlo.reshape %[[ROWS]] : (tensor<1x3xf32>) -> tensor<3xf32>
// CHECK: %[[Y:.*]] = stablehlo.negate %[[X]]
// CHECK-NOT: @pmapc.all_gather
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[Y]] : (tensor<3xf32>) -> tensor<1x1x3xf32>
// CHECK: return %[[BLOCK]]

// NOSPLIT-LABEL: module @inner_mapped_operand_sliced_by_axis_index
// NOSPLIT: %[[ROWS:.*]] = stablehlo.reshape %{{.*}} : (tensor<1x4x3xf32>) -> tensor<4x3xf32>
// NOSPLIT: %[[IDX:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["model"]{{.*}} : () -> tensor<i32>
// NOSPLIT: %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<i32>
// NOSPLIT: %[[ROW:.*]] = stablehlo.dynamic_slice %[[ROWS]], %[[IDX]], %[[ZERO]], sizes = [1, 3]
// NOSPLIT: %[[X:.*]] = stablehlo.reshape %[[ROW]] : (tensor<1x3xf32>) -> tensor<3xf32>
// NOSPLIT: stablehlo.negate %[[X]]
module @inner_mapped_operand_sliced_by_axis_index {
  func.func public @main(%arg0: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
    return %0 : tensor<2x4x3xf32>
  }
  func.func private @outer(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @inner(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}


// -----

// A unit operand is replicated over the axis: the body uses it as it is.
// CHECK-LABEL: module @unmapped_operand_passes_through
// CHECK: func.func public @main(%{{.*}}: tensor<1x1x3xf32> {{.*}}, %[[BIAS:.*]]: tensor<3xf32>
// CHECK-SAME{LITERAL}: {pmapc.split = [[]]}
// CHECK-NOT: stablehlo.dynamic_slice %[[BIAS]]
// CHECK: %[[X:.*]] = stablehlo.reshape %{{.*}} : (tensor<1x3xf32>) -> tensor<3xf32>
// CHECK: stablehlo.add %[[X]], %[[BIAS]]
module @unmapped_operand_passes_through {
  func.func public @main(%arg0: tensor<2x4x3xf32>, %arg1: tensor<3xf32>) -> tensor<2x4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0, unit], out_axes = [0]}} : (tensor<2x4x3xf32>, tensor<3xf32>) -> tensor<2x4x3xf32>
    return %0 : tensor<2x4x3xf32>
  }
  func.func private @outer(%arg0: tensor<4x3xf32>, %arg1: tensor<3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0, unit], out_axes = [0]}} : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @inner(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}


// -----

// The inner map's stacked result is an untiled all_gather over the inner axis,
// not a psum of a zero-padded buffer (JAX 0.4's lowering).
// CHECK-LABEL: module @inner_result_becomes_untiled_all_gather
// CHECK: %[[Y:.*]] = stablehlo.negate
// CHECK-NOT: @pmapc.psum
// CHECK-NOT: stablehlo.dynamic_update_slice
// CHECK: %[[STACK:.*]] = stablehlo.custom_call @pmapc.all_gather(%[[Y]])
// CHECK-SAME: all_gather_dimension = 0 : i64, axes = ["model"], tiled = false
// CHECK-SAME: (tensor<3xf32>) -> tensor<4x3xf32>
// CHECK: stablehlo.custom_call @pmapc.psum(%[[STACK]]) {{.*}}axes = ["data"]
module @inner_result_becomes_untiled_all_gather {
  func.func public @main(%arg0: tensor<2x4x3xf32>) -> tensor<2x4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
    return %0 : tensor<2x4x3xf32>
  }
  func.func private @outer(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %1 : tensor<4x3xf32>
  }
  func.func private @inner(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}


// -----

// out_axes = [unit]: the result is the device's own value, not gathered.
// CHECK-LABEL: module @unmapped_result_is_the_device_value
// CHECK: %[[SUM:.*]] = stablehlo.custom_call @pmapc.psum(%{{.*}}) {{.*}}axes = ["model"]
// CHECK-NOT: @pmapc.all_gather
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[SUM]] : (tensor<f32>) -> tensor<1xf32>
// CHECK: return %[[BLOCK]]
module @unmapped_result_is_the_device_value {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @outer(%arg0: tensor<4xf32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [unit]}} : (tensor<4xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @inner(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}


// -----

// in_axes = [1] slices a column; out_axes = [1] gathers along dimension 1
// (NOSPLIT). At the entry the inner level splits the argument's and the result's
// dimension 2: the inner map's dimension 1 of the outer block.
// CHECK-LABEL: module @inner_nonzero_in_axes_and_out_axes
// CHECK: func.func public @main(%{{.*}}: tensor<1x3x1xf32>
// CHECK-SAME{LITERAL}: {pmapc.split = [["data"], [], ["model"]]}) -> (tensor<1x3x1xf32> {pmapc.split = [["data"], [], ["model"]]})
// CHECK-NOT: @pmapc.all_gather

// NOSPLIT-LABEL: module @inner_nonzero_in_axes_and_out_axes
// NOSPLIT: %[[IDX:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["model"]
// NOSPLIT: %[[ZERO:.*]] = stablehlo.constant dense<0> : tensor<i32>
// NOSPLIT: %[[COL:.*]] = stablehlo.dynamic_slice %{{.*}}, %[[ZERO]], %[[IDX]], sizes = [3, 1]
// NOSPLIT: %[[X:.*]] = stablehlo.reshape %[[COL]] : (tensor<3x1xf32>) -> tensor<3xf32>
// NOSPLIT: %[[Y:.*]] = stablehlo.negate %[[X]]
// NOSPLIT: stablehlo.custom_call @pmapc.all_gather(%[[Y]])
// NOSPLIT-SAME: all_gather_dimension = 1 : i64, axes = ["model"], tiled = false
// NOSPLIT-SAME: (tensor<3xf32>) -> tensor<3x4xf32>
module @inner_nonzero_in_axes_and_out_axes {
  func.func public @main(%arg0: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    return %0 : tensor<2x3x4xf32>
  }
  func.func private @outer(%arg0: tensor<3x4xf32>) -> tensor<3x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [1], out_axes = [1]}} : (tensor<3x4xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }
  func.func private @inner(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}


// -----

// Three levels give a three-axis mesh, outermost first; collectives keep
// their axis order; outputs are gathered innermost first (NOSPLIT). At the
// entry, the argument arrives split over all three levels and the result leaves
// so: each device holds one element.
// CHECK-LABEL: module @three_level_nesting_2x2x2
// CHECK-SAME: pmapc.mesh = {axis_names = ["x", "y", "z"], axis_sizes = array<i64: 2, 2, 2>}
// CHECK: func.func public @main(%{{.*}}: tensor<1x1x1xf32>
// CHECK-SAME{LITERAL}: {pmapc.split = [["x"], ["y"], ["z"]]}) -> (tensor<1x1x1xf32> {pmapc.split = [["x"], ["y"], ["z"]]})
// CHECK-NOT: @pmapc.axis_index
// CHECK: %[[SUM:.*]] = stablehlo.custom_call @pmapc.psum(%{{.*}}) {{.*}}axes = ["z", "x"]
// CHECK-NOT: @pmapc.all_gather
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[SUM]] : (tensor<f32>) -> tensor<1x1x1xf32>
// CHECK: return %[[BLOCK]]

// NOSPLIT-LABEL: module @three_level_nesting_2x2x2
// NOSPLIT: %[[X:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["x"]
// NOSPLIT: %[[Y:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["y"]
// NOSPLIT: stablehlo.dynamic_slice %{{.*}}, %[[Y]], %{{.*}}, sizes = [1, 2]
// NOSPLIT: %[[Z:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["z"]
// NOSPLIT: stablehlo.dynamic_slice %{{.*}}, %[[Z]], sizes = [1]
// NOSPLIT: %[[SUM:.*]] = stablehlo.custom_call @pmapc.psum(%{{.*}}) {{.*}}axes = ["z", "x"]
// NOSPLIT: %[[ROW:.*]] = stablehlo.custom_call @pmapc.all_gather(%[[SUM]]) {{.*}}axes = ["z"]{{.*}} -> tensor<2xf32>
// NOSPLIT: stablehlo.custom_call @pmapc.all_gather(%[[ROW]]) {{.*}}axes = ["y"]{{.*}} -> tensor<2x2xf32>
module @three_level_nesting_2x2x2 {
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

// The inner "i" shadows the outer one; the mesh names it "i_1" and the
// collectives of each body are renamed to the axis they meant.
// CHECK-LABEL: module @shadowed_axis_name_renamed
// CHECK-SAME: pmapc.mesh = {axis_names = ["i", "i_1"], axis_sizes = array<i64: 2, 4>}
// CHECK: %[[SUM:.*]] = stablehlo.custom_call @pmapc.psum(%{{.*}}) {{.*}}axes = ["i_1"]
// CHECK: %[[STACK:.*]] = stablehlo.custom_call @pmapc.all_gather(%[[SUM]]) {{.*}}axes = ["i_1"]
// CHECK: stablehlo.custom_call @pmapc.pmax(%[[STACK]]) {{.*}}axes = ["i"]}

// NOSPLIT-LABEL: module @shadowed_axis_name_renamed
// NOSPLIT: @pmapc.axis_index() {{.*}}axes = ["i_1"]
module @shadowed_axis_name_renamed {
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

// A callee holding a collective is inlined (its axes resolve at the call's
// depth); a callee without any stays a call.
// CHECK-LABEL: module @called_function_with_collective_inlined
// CHECK: func.func public @main
// CHECK-NOT: call @with_psum
// CHECK: %[[SUM:.*]] = stablehlo.custom_call @pmapc.psum(%{{.*}}) {{.*}}axes = ["i"]
// CHECK: call @without_collectives(%[[SUM]])
// CHECK: func.func private @without_collectives
// CHECK-NOT: @with_psum
module @called_function_with_collective_inlined {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = func.call @with_psum(%arg0) : (tensor<f32>) -> tensor<f32>
    %1 = func.call @without_collectives(%0) : (tensor<f32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
  func.func private @with_psum(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @without_collectives(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.negate %arg0 : tensor<f32>
    return %0 : tensor<f32>
  }
}


// -----

// One body under two maps is inlined at each (a copy first, its own ops last).
// CHECK-LABEL: module @one_body_under_two_maps
// CHECK: func.func public @main
// CHECK: %[[FIRST:.*]] = stablehlo.custom_call @pmapc.psum
// CHECK: stablehlo.custom_call @pmapc.all_gather(%[[FIRST]])
// CHECK: stablehlo.custom_call @pmapc.psum
// CHECK-NOT: func.func private @body
module @one_body_under_two_maps {
  func.func public @main(%arg0: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %1 = stablehlo.custom_call @pmapc.map(%0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// A map body that a func.call elsewhere also calls is inlined under the map
// and stays a function for the call.
// CHECK-LABEL: module @map_body_also_called
// CHECK: func.func public @main
// CHECK: stablehlo.negate
// CHECK: call @plain(
// CHECK: func.func private @plain
module @map_body_also_called {
  func.func public @main(%arg0: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>) {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@plain], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %1 = stablehlo.custom_call @pmapc.map(%0) {called_computations = [@user], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0, %1 : tensor<4x3xf32>, tensor<4x3xf32>
  }
  func.func private @plain(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.negate %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
  func.func private @user(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = func.call @plain(%arg0) : (tensor<3xf32>) -> tensor<3xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}

// -----

// A callee holding a collective, called twice, is inlined at both calls.
// CHECK-LABEL: module @callee_with_collective_called_twice
// CHECK: %[[ARG:.*]] = stablehlo.reshape %arg0
// CHECK: %[[S1:.*]] = stablehlo.custom_call @pmapc.psum(%[[ARG]])
// CHECK: %[[M1:.*]] = stablehlo.multiply %[[S1]], %[[ARG]]
// CHECK: %[[S2:.*]] = stablehlo.custom_call @pmapc.psum(%[[M1]])
// CHECK: stablehlo.multiply %[[S2]], %[[M1]]
// CHECK-NOT: func.func private
module @callee_with_collective_called_twice {
  func.func public @main(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = func.call @helper(%arg0) : (tensor<3xf32>) -> tensor<3xf32>
    %1 = func.call @helper(%0) : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
  func.func private @helper(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    %1 = stablehlo.multiply %0, %arg0 : tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}

// -----

// Two maps at one depth share one mesh axis; the second slices the first's
// gathered result again.
// CHECK-LABEL: module @sibling_maps_share_one_mesh_axis
// CHECK-SAME: pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}
// CHECK: %[[FIRST:.*]] = stablehlo.negate
// CHECK: %[[STACK:.*]] = stablehlo.custom_call @pmapc.all_gather(%[[FIRST]])
// CHECK: %[[IDX:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["i"]
// CHECK: stablehlo.dynamic_slice %[[STACK]], %[[IDX]], sizes = [1]
module @sibling_maps_share_one_mesh_axis {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    %1 = stablehlo.custom_call @pmapc.map(%0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.negate %arg0 : tensor<f32>
    return %0 : tensor<f32>
  }
}


// -----

// Sibling maps of different names and sizes, as JAX 0.4 ran them: under
// 'data' (2), 'a' (4) and 'b' (2) share 4 devices. The mesh refines both:
// 'b' binds the first size-2 axis, 'a' both size-2 axes (devices ordered as
// a = 2 * b + a), and each pair of devices that differ only along the last
// axis runs 'b's work twice. Collectives over a map's axis act over its axes.
// CHECK-LABEL: module @sibling_maps_of_different_sizes
// CHECK-SAME: pmapc.mesh = {axis_names = ["data", "b", "a"], axis_sizes = array<i64: 2, 2, 2>}
// At the entry each argument arrives split over its map's axes (replicated
// along 'a' for 'b'), and each result leaves so.
// CHECK: func.func public @main(
// CHECK-SAME{LITERAL}: %arg0: tensor<1x1xf32> {pmapc.split = [["data"], ["b", "a"]]}
// CHECK-SAME{LITERAL}: %arg1: tensor<1x1xf32> {pmapc.split = [["data"], ["b"]]}
// CHECK: @pmapc.psum({{.*}}axes = ["data", "b", "a"]
// CHECK: @pmapc.psum({{.*}}axes = ["b"]
// CHECK-NOT: @pmapc.all_gather

// NOSPLIT-LABEL: module @sibling_maps_of_different_sizes
// NOSPLIT: %[[IA:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["b", "a"]
// NOSPLIT: stablehlo.dynamic_slice {{.*}}, %[[IA]], sizes = [1]
// NOSPLIT: @pmapc.psum({{.*}}axes = ["data", "b", "a"]
// NOSPLIT: @pmapc.all_gather({{.*}}axes = ["b", "a"]{{.*}} -> tensor<4xf32>
// NOSPLIT: %[[IB:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["b"]
// NOSPLIT: stablehlo.dynamic_slice {{.*}}, %[[IB]], sizes = [1]
// NOSPLIT: @pmapc.psum({{.*}}axes = ["b"]
// NOSPLIT: @pmapc.all_gather({{.*}}axes = ["b"]{{.*}} -> tensor<2xf32>
module @sibling_maps_of_different_sizes {
  func.func public @main(%arg0: tensor<2x4xf32>, %arg1: tensor<2x2xf32>) -> (tensor<2x4xf32>, tensor<2x2xf32>) {
    %0:2 = stablehlo.custom_call @pmapc.map(%arg0, %arg1) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0, 0], out_axes = [0, 0]}} : (tensor<2x4xf32>, tensor<2x2xf32>) -> (tensor<2x4xf32>, tensor<2x2xf32>)
    return %0#0, %0#1 : tensor<2x4xf32>, tensor<2x2xf32>
  }
  func.func private @outer(%arg0: tensor<4xf32>, %arg1: tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@over_a], api_version = 4 : i32, backend_config = {axis_name = "a", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4xf32>) -> tensor<4xf32>
    %1 = stablehlo.custom_call @pmapc.map(%arg1) {called_computations = [@over_b], api_version = 4 : i32, backend_config = {axis_name = "b", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0, %1 : tensor<4xf32>, tensor<2xf32>
  }
  func.func private @over_a(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data", "a"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @over_b(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["b"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// A long body (more ops than the block around the map) takes the place of
// @main's block, which goes with its arguments (`splice`); a body that returns
// an unmapped operand, an argument of @main, returns the argument the new
// block adopted. (Took a freed argument before: a crash under jax.linearize.)
// CHECK-LABEL: module @long_body_returns_an_unmapped_entry_argument
// CHECK: func.func public @main(%[[X:.*]]: tensor<1x4xf32> {{.*}}, %[[Z:.*]]: tensor<1x4xf32>
// CHECK: %[[COS:.*]] = stablehlo.cosine
// CHECK: %[[PRODUCT:.*]] = stablehlo.multiply %{{.*}}, %[[Z]]
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[PRODUCT]] : (tensor<1x4xf32>) -> tensor<1x1x4xf32>
// CHECK: %[[COS_BLOCK:.*]] = stablehlo.reshape %[[COS]] : (tensor<4xf32>) -> tensor<1x4xf32>
// CHECK: %[[Z_BLOCK:.*]] = stablehlo.reshape %[[Z]] : (tensor<1x4xf32>) -> tensor<1x1x4xf32>
// CHECK: return %[[BLOCK]], %[[COS_BLOCK]], %[[Z_BLOCK]]
module @long_body_returns_an_unmapped_entry_argument {
  func.func public @main(%arg0: tensor<8x4xf32>, %arg1: tensor<1x4xf32>) -> (tensor<8x1x4xf32>, tensor<8x4xf32>, tensor<8x1x4xf32>) {
    %0:3 = stablehlo.custom_call @pmapc.map(%arg0, %arg1) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 8 : i64, in_axes = [0, unit], out_axes = [0, 0, 0]}} : (tensor<8x4xf32>, tensor<1x4xf32>) -> (tensor<8x1x4xf32>, tensor<8x4xf32>, tensor<8x1x4xf32>)
    return %0#0, %0#1, %0#2 : tensor<8x1x4xf32>, tensor<8x4xf32>, tensor<8x1x4xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>, %arg1: tensor<1x4xf32>) -> (tensor<1x4xf32>, tensor<4xf32>, tensor<1x4xf32>) {
    %0 = stablehlo.sine %arg0 : tensor<4xf32>
    %1 = stablehlo.cosine %arg0 : tensor<4xf32>
    %2 = stablehlo.broadcast_in_dim %0, dims = [1] : (tensor<4xf32>) -> tensor<1x4xf32>
    %3 = stablehlo.multiply %2, %arg1 : tensor<1x4xf32>
    return %3, %1, %arg1 : tensor<1x4xf32>, tensor<4xf32>, tensor<1x4xf32>
  }
}

// -----

// A program flattened before (a mesh, no map left) keeps its mesh, so that the
// whole pipeline may run on a lowered module again.
// CHECK-LABEL: module @flattened_before
// CHECK-SAME: pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
module @flattened_before attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// A nest folded onto fewer devices (pmapc.fold_onto): its outermost map's record
// of the fold goes into pmapc.mesh, for the plan and `pmapc run`.
// CHECK-LABEL: module @folded_nest
// CHECK-SAME: pmapc.mesh = {axis_names = ["data"], axis_sizes = array<i64: 2>, folded = {model = 4 : i64}}
// CHECK: func.func public @main(%{{.*}}: tensor<1x4xf32>
module @folded_nest {
  func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, folded = {model = 4 : i64}, in_axes = [0], out_axes = [0]}} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.negate %arg0 : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

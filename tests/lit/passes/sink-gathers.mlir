// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps,sink-gathers)' --split-input-file | FileCheck %s

// The inner map's output leaves the program: no all_gather, the result is
// returned split over "data" and "model".
// CHECK-LABEL: module @returned_split_over_both_axes
// CHECK: -> (tensor<1x1x8xf32> {pmapc.split = {{\[}}["data"], ["model"], []]})
// CHECK-NOT: pmapc.all_gather
// CHECK: %[[SUM:.*]] = stablehlo.custom_call @pmapc.psum
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[SUM]] : (tensor<8xf32>) -> tensor<1x1x8xf32>
// CHECK: return %[[BLOCK]]
module @returned_split_over_both_axes {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%z) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// Inner out_axes 1: the result's dimension 2 is split over "model".
// CHECK-LABEL: module @stacked_at_a_later_dimension
// CHECK: -> (tensor<1x8x1xf32> {pmapc.split = {{\[}}["data"], [], ["model"]]})
// CHECK-NOT: pmapc.all_gather
module @stacked_at_a_later_dimension {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x8x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
    return %0 : tensor<2x8x4xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<8x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [1]}} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// The outer body also uses the stacked value: the gather stays for that use,
// while the result is still returned split.
// CHECK-LABEL: module @gather_kept_for_other_users
// CHECK: -> (tensor<1x1x8xf32> {pmapc.split = {{\[}}["data"], ["model"], []]}, tensor<1x4x8xf32> {pmapc.split = {{\[}}["data"], [], []]})
// CHECK: %[[GATHERED:.*]] = stablehlo.custom_call @pmapc.all_gather
// CHECK: stablehlo.add %[[GATHERED]], %[[GATHERED]]
module @gather_kept_for_other_users {
  func.func public @main(%x: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
    %0:2 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0, 0]}} : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
    return %0#0, %0#1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.add %0, %0 : tensor<4x8xf32>
    return %0, %1 : tensor<4x8xf32>, tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// A transpose of the stack is not elementwise: the gather stays and the
// result stays replicated over "model".
// CHECK-LABEL: module @transposed_after_gather
// CHECK: -> (tensor<1x8x4xf32> {pmapc.split = {{\[}}["data"], [], []]})
// CHECK: pmapc.all_gather
module @transposed_after_gather {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x8x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
    return %0 : tensor<2x8x4xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<8x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// The outer body scales the stacked value by a broadcast scalar: the gather
// moves below the multiply (which then works on one block), and the result
// is returned split with no gather left.
// CHECK-LABEL: module @scaled_after_gather
// CHECK: -> (tensor<1x1x8xf32> {pmapc.split = {{\[}}["data"], ["model"], []]})
// CHECK-NOT: pmapc.all_gather
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} : tensor<8xf32>
// CHECK-NOT: pmapc.all_gather
module @scaled_after_gather {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %half = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %half, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %2 = stablehlo.multiply %0, %1 : tensor<4x8xf32>
    return %2 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// The scale is a scalar argument of @main (as `jax.jit` passes a map's float
// literals, lowering/structure.py): the same on every device, so the gather
// moves below the multiply as for a constant.
// CHECK-LABEL: module @scaled_by_an_argument
// CHECK: @main(%{{.*}}: tensor<f32> {pmapc.split = []}, %{{.*}}) -> (tensor<1x1x8xf32> {pmapc.split = {{\[}}["data"], ["model"], []]})
// CHECK-NOT: pmapc.all_gather
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} : tensor<8xf32>
// CHECK-NOT: pmapc.all_gather
module @scaled_by_an_argument {
  func.func public @main(%scale: tensor<f32>, %x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%scale, %x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [unit, 0], out_axes = [0]}} : (tensor<f32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%s: tensor<f32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %2 = stablehlo.multiply %0, %1 : tensor<4x8xf32>
    return %2 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// An elementwise op with attributes (compare's direction) keeps them when it
// moves below the gather.
// CHECK-LABEL: module @compared_after_gather
// CHECK: -> (tensor<1x1x8xi1> {pmapc.split = {{\[}}["data"], ["model"], []]})
// CHECK-NOT: pmapc.all_gather
// CHECK: stablehlo.compare  GT, %{{.*}}, %{{.*}},  FLOAT : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>
// CHECK-NOT: pmapc.all_gather
module @compared_after_gather {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xi1> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xi1>
    return %0 : tensor<2x4x8xi1>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xi1> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %half = stablehlo.constant dense<5.000000e-01> : tensor<4x8xf32>
    %1 = stablehlo.compare GT, %0, %half, FLOAT : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
    return %1 : tensor<4x8xi1>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// A non-uniform operand (the outer block itself) keeps the gather.
// CHECK-LABEL: module @added_to_a_varying_value
// CHECK: pmapc.all_gather
// CHECK: stablehlo.add %{{.*}}, %{{.*}} : tensor<4x8xf32>
module @added_to_a_varying_value {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.add %0, %y : tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// A psum over "data" of the stacked value: the gather moves below it (the
// psum then reduces one block, not the stack), and the result leaves split.
// CHECK-LABEL: module @summed_over_the_outer_axis_after_gather
// CHECK: -> (tensor<1x1x8xf32> {pmapc.split = {{\[}}["data"], ["model"], []]})
// CHECK: stablehlo.custom_call @pmapc.psum(%{{.*}}) {{.*}} : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NOT: pmapc.all_gather
module @summed_over_the_outer_axis_after_gather {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// Adding the device's own axis_index is not uniform over "model": the gather
// stays above the add.
// CHECK-LABEL: module @plus_axis_index_after_gather
// CHECK: pmapc.all_gather
// CHECK: stablehlo.add %{{.*}}, %{{.*}} : tensor<4x8xf32>
module @plus_axis_index_after_gather {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %i = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data"]}} : () -> tensor<i32>
    %f = stablehlo.convert %i : (tensor<i32>) -> tensor<f32>
    %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
    %1 = stablehlo.add %0, %b : tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// A psum in index groups keeps its groups when the gather moves below it.
// CHECK-LABEL: module @summed_in_index_groups_after_gather
// CHECK: stablehlo.custom_call @pmapc.psum(%{{[0-9a-z_]+}})
// CHECK-SAME{LITERAL}: axis_index_groups = [[0], [1]]
// CHECK-SAME: (tensor<8xf32>) -> tensor<8xf32>
module @summed_in_index_groups_after_gather {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["data"], axis_index_groups = [[0], [1]]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// A gather in index groups holds only its group's blocks, not the whole axis:
// it does not move below the multiply (a plain gather of the product would
// stack all 4 blocks).
// CHECK-LABEL: module @scaled_after_gather_in_index_groups
// CHECK: stablehlo.custom_call @pmapc.all_gather(%{{[0-9a-z_]+}})
// CHECK-SAME{LITERAL}: axis_index_groups = [[0, 1], [2, 3]]
// CHECK-SAME: (tensor<8xf32>) -> tensor<2x8xf32>
// CHECK: stablehlo.multiply %{{.*}}, %{{.*}} : tensor<2x8xf32>
module @scaled_after_gather_in_index_groups {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x2x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x2x8xf32>
    return %0 : tensor<2x4x2x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x2x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x2x8xf32>
    return %0 : tensor<4x2x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<2x8xf32> {
    %g = stablehlo.custom_call @pmapc.all_gather(%z) {api_version = 4 : i32, backend_config = {axes = ["model"], all_gather_dimension = 0 : i64, tiled = false, axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<8xf32>) -> tensor<2x8xf32>
    %half = stablehlo.constant dense<5.000000e-01> : tensor<2x8xf32>
    %m = stablehlo.multiply %g, %half : tensor<2x8xf32>
    return %m : tensor<2x8xf32>
  }
}

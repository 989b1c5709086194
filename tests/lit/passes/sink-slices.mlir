// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps,sink-slices)' --split-input-file | FileCheck %s

// An argument the inner map only slices is split over the inner axis too:
// each device receives a 1x1x8 block, and the slice becomes a reshape.
// CHECK-LABEL: module @split_over_both_axes
// CHECK: func.func public @main(%[[ARG:.*]]: tensor<1x1x8xf32> {pmapc.split = {{\[}}["data"], ["model"], []]})
// CHECK-NOT: stablehlo.dynamic_slice
// CHECK-NOT: pmapc.axis_index
// CHECK: stablehlo.reshape %[[ARG]]
module @split_over_both_axes {
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

// The inner map slices dimension 1 of the outer block: the argument's
// dimension 2 is split over "model".
// CHECK-LABEL: module @split_along_a_later_dimension
// CHECK: func.func public @main(%{{.*}}: tensor<1x3x1xf32> {pmapc.split = {{\[}}["data"], [], ["model"]]})
// CHECK-NOT: stablehlo.dynamic_slice
module @split_along_a_later_dimension {
  func.func public @main(%x: tensor<2x3x4xf32>) -> tensor<2x4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
    return %0 : tensor<2x4x3xf32>
  }
  func.func private @outer(%y: tensor<3x4xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [1], out_axes = [0]}} : (tensor<3x4xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
  func.func private @inner(%z: tensor<3xf32>) -> tensor<3xf32> {
    return %z : tensor<3xf32>
  }
}

// -----

// A replicated argument (in_axes unit on the outer map) that the inner map
// slices is split over "model" alone.
// CHECK-LABEL: module @replicated_argument_split_over_inner_axis
// CHECK: func.func public @main(%{{.*}}: tensor<1x8xf32> {pmapc.split = {{\[}}["model"], []]}
module @replicated_argument_split_over_inner_axis {
  func.func public @main(%w: tensor<4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%w) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [unit], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    return %z : tensor<8xf32>
  }
}

// -----

// Three levels: the argument ends up split over all three axes.
// CHECK-LABEL: module @three_levels
// CHECK: func.func public @main(%{{.*}}: tensor<1x1x1x5xf32> {pmapc.split = {{\[}}["a"], ["b"], ["c"], []]})
// CHECK-NOT: stablehlo.dynamic_slice
module @three_levels {
  func.func public @main(%x: tensor<2x2x2x5xf32>) -> tensor<2x2x2x5xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@l1], api_version = 4 : i32, backend_config = {axis_name = "a", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x2x2x5xf32>) -> tensor<2x2x2x5xf32>
    return %0 : tensor<2x2x2x5xf32>
  }
  func.func private @l1(%x: tensor<2x2x5xf32>) -> tensor<2x2x5xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@l2], api_version = 4 : i32, backend_config = {axis_name = "b", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x2x5xf32>) -> tensor<2x2x5xf32>
    return %0 : tensor<2x2x5xf32>
  }
  func.func private @l2(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@l3], api_version = 4 : i32, backend_config = {axis_name = "c", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x5xf32>) -> tensor<2x5xf32>
    return %0 : tensor<2x5xf32>
  }
  func.func private @l3(%x: tensor<5xf32>) -> tensor<5xf32> {
    return %x : tensor<5xf32>
  }
}

// -----

// The outer body also uses the whole block: the argument stays split over
// "data" only, and the inner map keeps its slice.
// CHECK-LABEL: module @whole_block_also_used
// CHECK: func.func public @main(%{{.*}}: tensor<1x4x8xf32> {pmapc.split = {{\[}}["data"], [], []]})
// CHECK: stablehlo.dynamic_slice
module @whole_block_also_used {
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

// A program without maps runs on one device: nothing to split.
// CHECK-LABEL: module @no_maps
// CHECK: func.func public @main(%{{.*}}: tensor<8xf32> {pmapc.split = {{\[\[}}]]})
module @no_maps {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

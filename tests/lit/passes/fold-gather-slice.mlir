// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps,fold-gather-slice)' --split-input-file | FileCheck %s

// Two inner maps over "model" in a row: the first one's output is gathered
// and the second slices its own block back out. The pair cancels. (The second
// one's output leaves the program split: flatten-maps gathers nothing there.)
// CHECK-LABEL: module @two_inner_maps_in_a_row
// CHECK: %[[FIRST:.*]] = stablehlo.custom_call @pmapc.psum
// CHECK-NOT: pmapc.all_gather
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[FIRST]] : (tensor<8xf32>) -> tensor<1x8xf32>
// CHECK: %[[OWN:.*]] = stablehlo.reshape %[[BLOCK]] : (tensor<1x8xf32>) -> tensor<8xf32>
// CHECK: stablehlo.multiply %[[OWN]], %[[OWN]]
// CHECK-NOT: pmapc.all_gather
module @two_inner_maps_in_a_row {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@first], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.custom_call @pmapc.map(%0) {called_computations = [@second], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
  func.func private @first(%z: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%z) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
  func.func private @second(%z: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.multiply %z, %z : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// Gathered at dimension 1 but sliced at dimension 0: no fold.
// CHECK-LABEL: module @different_dimensions
// CHECK: pmapc.all_gather
// CHECK: stablehlo.dynamic_slice
module @different_dimensions {
  func.func public @main(%x: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    return %0 : tensor<2x4x4xf32>
  }
  func.func private @outer(%y: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@id], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [1]}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %1 = stablehlo.custom_call @pmapc.map(%0) {called_computations = [@id], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    return %1 : tensor<4x4xf32>
  }
  func.func private @id(%z: tensor<4xf32>) -> tensor<4xf32> {
    return %z : tensor<4xf32>
  }
}

// -----

// A gather in index groups stacks only the device's group (2 blocks), so a
// slice at the device's index along "model" (0..3) does not take its own block
// back out: no fold.
// CHECK-LABEL: module @gathered_in_index_groups
// CHECK: pmapc.all_gather
// CHECK-SAME: axis_index_groups
// CHECK: stablehlo.dynamic_slice
module @gathered_in_index_groups {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    %g = stablehlo.custom_call @pmapc.all_gather(%z) {api_version = 4 : i32, backend_config = {axes = ["model"], all_gather_dimension = 0 : i64, tiled = false, axis_index_groups = [[0, 1], [2, 3]]}} : (tensor<8xf32>) -> tensor<2x8xf32>
    %i = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %s = stablehlo.dynamic_slice %g, %i, %c0, sizes = [1, 8] : (tensor<2x8xf32>, tensor<i32>, tensor<i32>) -> tensor<1x8xf32>
    %r = stablehlo.reshape %s : (tensor<1x8xf32>) -> tensor<8xf32>
    return %r : tensor<8xf32>
  }
}

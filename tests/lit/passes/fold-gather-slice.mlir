// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps,fold-gather-slice)' --split-input-file | FileCheck %s

// Two inner maps over "model" in a row: the first one's output is gathered
// and the second slices its own block back out. The pair cancels.
// CHECK-LABEL: module @two_inner_maps_in_a_row
// CHECK: %[[FIRST:.*]] = stablehlo.custom_call @pmapc.psum
// CHECK-NOT: pmapc.all_gather
// CHECK: %[[BLOCK:.*]] = stablehlo.reshape %[[FIRST]] : (tensor<8xf32>) -> tensor<1x8xf32>
// CHECK: %[[OWN:.*]] = stablehlo.reshape %[[BLOCK]] : (tensor<1x8xf32>) -> tensor<8xf32>
// CHECK: stablehlo.multiply %[[OWN]], %[[OWN]]
// CHECK: pmapc.all_gather
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

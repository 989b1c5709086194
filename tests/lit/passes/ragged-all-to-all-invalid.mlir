// RUN: pmapc opt %s --pass-pipeline='builtin.module(verify-axes)' --split-input-file --verify-diagnostics

// ragged_all_to_all's operands, checked where the op is (verify-axes). (to-replicas
// refuses its native form: to-replicas-invalid.mlir.)

module @slices_do_not_divide {
  func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x6xf32>, %arg2: tensor<4x3xi32>) -> tensor<4x6xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1, %arg2) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0, 0, 0], out_axes = [0]}} : (tensor<4x4xf32>, tensor<4x6xf32>, tensor<4x3xi32>) -> tensor<4x6xf32>
    return %0 : tensor<4x6xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<3xi32>) -> tensor<6xf32> {
    // expected-error@+1 {{'ragged_all_to_all' over 'i' (size 4) has 3 slices, not a multiple of the group's 4 devices; pass 4 x (slices per device) offsets and sizes}}
    %0 = stablehlo.custom_call @pmapc.ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<4xf32>, tensor<6xf32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module @float_offsets {
  func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x6xf32>, %arg2: tensor<4x4xf32>) -> tensor<4x6xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1, %arg2) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0, 0, 0], out_axes = [0]}} : (tensor<4x4xf32>, tensor<4x6xf32>, tensor<4x4xf32>) -> tensor<4x6xf32>
    return %0 : tensor<4x6xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<4xf32>) -> tensor<6xf32> {
    // expected-error@+1 {{'ragged_all_to_all' needs integer input_offsets, got tensor<4xf32>}}
    %0 = stablehlo.custom_call @pmapc.ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<4xf32>, tensor<6xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module @rows_of_two_shapes {
  func.func public @main(%arg0: tensor<4x4x2xf32>, %arg1: tensor<4x6x3xf32>, %arg2: tensor<4x4xi32>) -> tensor<4x6x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1, %arg2) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0, 0, 0], out_axes = [0]}} : (tensor<4x4x2xf32>, tensor<4x6x3xf32>, tensor<4x4xi32>) -> tensor<4x6x3xf32>
    return %0 : tensor<4x6x3xf32>
  }
  func.func private @body(%arg0: tensor<4x2xf32>, %arg1: tensor<6x3xf32>, %arg2: tensor<4xi32>) -> tensor<6x3xf32> {
    // expected-error@+1 {{'ragged_all_to_all' over 'i' (size 4) sends rows of operand [4, 2] into output [6, 3]: they need one rank (at least 1) and the same dimensions after the first; reshape them to [rows, ...] with the same row shape}}
    %0 = stablehlo.custom_call @pmapc.ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<4x2xf32>, tensor<6x3xf32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) -> tensor<6x3xf32>
    return %0 : tensor<6x3xf32>
  }
}

// -----

module @offsets_of_two_lengths {
  func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x6xf32>, %arg2: tensor<4x4xi32>, %arg3: tensor<4x8xi32>) -> tensor<4x6xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1, %arg2, %arg3) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0, 0, 0, 0], out_axes = [0]}} : (tensor<4x4xf32>, tensor<4x6xf32>, tensor<4x4xi32>, tensor<4x8xi32>) -> tensor<4x6xf32>
    return %0 : tensor<4x6xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<4xi32>, %arg3: tensor<8xi32>) -> tensor<6xf32> {
    // expected-error@+1 {{'ragged_all_to_all' over 'i' (size 4) needs offsets and sizes of one length, got input_offsets 4, send_sizes 8, output_offsets 4, recv_sizes 4}}
    %0 = stablehlo.custom_call @pmapc.ragged_all_to_all(%arg0, %arg1, %arg2, %arg3, %arg2, %arg2) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<4xf32>, tensor<6xf32>, tensor<4xi32>, tensor<8xi32>, tensor<4xi32>, tensor<4xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module @operand_and_output_of_two_types {
  func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x6xi32>, %arg2: tensor<4x4xi32>) -> tensor<4x6xi32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1, %arg2) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0, 0, 0], out_axes = [0]}} : (tensor<4x4xf32>, tensor<4x6xi32>, tensor<4x4xi32>) -> tensor<4x6xi32>
    return %0 : tensor<4x6xi32>
  }
  func.func private @body(%arg0: tensor<4xf32>, %arg1: tensor<6xi32>, %arg2: tensor<4xi32>) -> tensor<6xi32> {
    // expected-error@+1 {{'ragged_all_to_all' writes operand tensor<4xf32> into output tensor<6xi32>: give them one element type}}
    %0 = stablehlo.custom_call @pmapc.ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<4xf32>, tensor<6xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) -> tensor<6xi32>
    return %0 : tensor<6xi32>
  }
}

// -----

module @five_operands {
  func.func public @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4x6xf32>, %arg2: tensor<4x4xi32>) -> tensor<4x6xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1, %arg2) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 4 : i64, in_axes = [0, 0, 0], out_axes = [0]}} : (tensor<4x4xf32>, tensor<4x6xf32>, tensor<4x4xi32>) -> tensor<4x6xf32>
    return %0 : tensor<4x6xf32>
  }
  func.func private @body(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<4xi32>) -> tensor<6xf32> {
    // expected-error@+1 {{'ragged_all_to_all' takes 6 operands (operand, output, input_offsets, send_sizes, output_offsets, recv_sizes) and returns one result, got 5 operands and 1 results}}
    %0 = stablehlo.custom_call @pmapc.ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<4xf32>, tensor<6xf32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// RUN: not pmapc opt %s --pass-pipeline='builtin.module(verify-axes)' --split-input-file --verify-diagnostics 2>&1 | FileCheck %s

// --verify-diagnostics fails, naming the line, on an expectation that is not
// met and on an error that was not expected; a met expectation prints nothing.
// (No blank line follows a `// -----` here: see
// opt-split-input-file-blank-line.mlir.)

// CHECK-NOT: Traceback
// CHECK: opt-verify-diagnostics.mlir:[[# @LINE + 8]]: error: expected error "this is never reported" was not produced
// CHECK-NOT: 'data'
// CHECK: opt-verify-diagnostics.mlir:[[# @LINE + 20]]: error: unexpected error: axis 'model' is not bound here; bound axes are 'i'
// CHECK-NOT: error

module @expectation_not_met {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error@+1 {{this is never reported}}
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    return %arg0 : tensor<f32>
  }
}
// -----
module @error_not_expected {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
// -----
module @expectation_met {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @body(%arg0: tensor<f32>) -> tensor<f32> {
    // expected-error@+1 {{axis 'data' is not bound here}}
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

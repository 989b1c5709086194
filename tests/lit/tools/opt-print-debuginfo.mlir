// RUN: pmapc opt %s --pass-pipeline='builtin.module(verify-axes,flatten-maps)' --mlir-print-debuginfo --mlir-print-ir-after=verify-axes 2>&1 | FileCheck %s

// --mlir-print-debuginfo: locations in the output and in the IR dumps.

// CHECK: // -----// IR Dump After VerifyAxesPass: verify-axes //----- //
// CHECK: @pmapc.psum{{.*}} loc(#[[LOC:.*]])
// CHECK: #[[LOC]] = loc("train.py":12:3)
// CHECK: module attributes {pmapc.mesh
// CHECK: loc("train.py":12:3)

module {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32> loc("train.py":12:3)
    return %0 : tensor<3xf32>
  }
}

// RUN: not pmapc opt %s --pass-pipeline='builtin.module(canonicalize,verify-axes,flatten-maps)' --mlir-print-ir-after-failure 2>&1 | FileCheck %s

// --mlir-print-ir-after-failure: a pass of pmapc's that reports an error fails
// as an MLIR pass, and MLIR prints the IR it failed on; the diagnostic follows.

// CHECK-NOT: CanonicalizerPass
// CHECK: // -----// IR Dump After VerifyAxesPass Failed: verify-axes //----- //
// CHECK-NEXT: module @unbound {
// CHECK: error: axis 'j' is not bound here; bound axes are 'i'
// CHECK-NOT: FlattenMapsPass

module @unbound {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["j"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// With --split-input-file, blank lines after `// -----` keep the file's line
// numbers in diagnostics (as mlir-opt does).

// RUN: not pmapc opt %s --pass-pipeline='builtin.module(verify-axes)' --split-input-file 2>&1 | FileCheck %s

// CHECK: opt-split-input-file-blank-line.mlir:[[# @LINE + 12]]:10: error: axis 'j' is not bound here

module @first_chunk {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    return %arg0 : tensor<2xf32>
  }
}

// -----

module @unbound_axis_after_a_blank_line {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["j"]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

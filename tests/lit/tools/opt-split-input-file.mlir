// RUN: not pmapc opt %s --pass-pipeline='builtin.module(verify-axes)' --split-input-file 2> %t.err | FileCheck %s
// RUN: FileCheck %s --input-file=%t.err --check-prefix=ERR

// --split-input-file runs each `// -----` chunk on its own: an error in one
// chunk does not stop the next; the outputs of the chunks that pass are joined
// by `// -----`; errors keep the line numbers of the whole file. (No blank
// line follows a `// -----` here: see opt-split-input-file-blank-line.mlir.)

// CHECK: module @first_chunk
// CHECK-NEXT: func.func public @main
// CHECK: // -----
// CHECK-NEXT: module @third_chunk
// CHECK-NOT: second_chunk

// ERR: opt-split-input-file.mlir:[[# @LINE + 11]]:10: error: axis 'j' is not bound here: no enclosing map binds an axis
// ERR-NOT: error

module @first_chunk {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    return %arg0 : tensor<2xf32>
  }
}
// -----
module @second_chunk {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["j"]}} : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
// -----
module @third_chunk {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    return %arg0 : tensor<2xf32>
  }
}

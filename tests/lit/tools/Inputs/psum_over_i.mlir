module @psum_over_i {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "i", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
  func.func private @body(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["i"]}} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

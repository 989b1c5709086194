module {
  func.func public @main(%arg0: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
  func.func private @inner(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %1 = stablehlo.custom_call @pmapc.ppermute(%0) {api_version = 4 : i32, backend_config = {axes = ["model"], perm = [[0, 1], [1, 2], [2, 3], [3, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.all_gather(%1) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<64xf32>
    %3 = stablehlo.slice %2 [0:8] : (tensor<64xf32>) -> tensor<8xf32>
    return %3 : tensor<8xf32>
  }
}

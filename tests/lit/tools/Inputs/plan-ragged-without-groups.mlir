module attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<6xf32>, %arg2: tensor<2xi32>) -> tensor<6xf32> {
    %0 = stablehlo.custom_call @ragged_all_to_all(%arg0, %arg1, %arg2, %arg2, %arg2, %arg2) {api_version = 4 : i32, backend_config = {channel_id = 1 : i64}} : (tensor<4xf32>, tensor<6xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

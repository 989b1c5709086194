module attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = "stablehlo.collective_permute"(%arg0) {source_target_pairs = dense<[[0, 5]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// axis_index ops at the very top of a function, over different axes: the
// replica id is read once, each index computed once, before any use.

// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives)' | FileCheck %s

// CHECK-LABEL: module @axis_index_is_the_first_op
// CHECK: %[[ID:.*]] = stablehlo.convert %{{.*}} : (tensor<ui32>) -> tensor<i32>
// CHECK-DAG: %[[MODEL:.*]] = stablehlo.remainder %[[ID]], %{{.*}}
// CHECK-DAG: %[[DATA:.*]] = stablehlo.divide %[[ID]], %{{.*}}
// CHECK: return %[[MODEL]], %[[DATA]]
module @axis_index_is_the_first_op attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main() -> (tensor<i32>, tensor<i32>) {
    %0 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %1 = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["data"]}} : () -> tensor<i32>
    return %0, %1 : tensor<i32>, tensor<i32>
  }
}

// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives)' --mlir-print-debuginfo | FileCheck %s

// Every all_reduce, and the add and the return of its reducer, takes the
// location of the psum it replaces, also where psums of one type over one
// group set share the op lower-collectives builds once and copies.
// CHECK-LABEL: module @each_all_reduce_at_its_psum
// CHECK: "stablehlo.all_reduce"(%arg0)
// CHECK: stablehlo.add {{.*}} loc(#[[FIRST:loc[0-9]*]])
// CHECK-NEXT: stablehlo.return {{.*}} loc(#[[FIRST]])
// CHECK-NEXT: }) : {{.*}} loc(#[[FIRST]])
// CHECK: "stablehlo.all_reduce"(%0)
// CHECK: stablehlo.add {{.*}} loc(#[[SECOND:loc[0-9]*]])
// CHECK-NEXT: stablehlo.return {{.*}} loc(#[[SECOND]])
// CHECK-NEXT: }) : {{.*}} loc(#[[SECOND]])
// CHECK: "stablehlo.all_reduce"(%1)
// CHECK: stablehlo.add {{.*}} loc(#[[SECOND]])
// CHECK-NEXT: stablehlo.return {{.*}} loc(#[[SECOND]])
// CHECK-NEXT: }) : {{.*}} loc(#[[SECOND]])
// CHECK-DAG: #[[FIRST]] = loc("model.py":10:3)
// CHECK-DAG: #[[SECOND]] = loc("model.py":20:3)
module @each_all_reduce_at_its_psum attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<3xf32>) -> tensor<3xf32> loc("model.py":10:3)
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<3xf32>) -> tensor<3xf32> loc("model.py":20:3)
    %2 = stablehlo.custom_call @pmapc.psum(%1) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<3xf32>) -> tensor<3xf32> loc("model.py":20:3)
    return %2 : tensor<3xf32>
  }
}

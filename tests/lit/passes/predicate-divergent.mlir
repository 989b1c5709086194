// RUN: pmapc opt %s --pass-pipeline='builtin.module(flatten-maps,predicate-divergent)' --split-input-file | FileCheck %s

// The branch index comes from each device's own block, so the devices of one
// "model" group disagree, and both branches hold a collective over "model":
// every branch runs on every device, then each device selects its own.
// CHECK-LABEL: module @varying_cond
// CHECK-SAME: pmapc.predicated = [{axes = ["model"], col = {{[0-9]+}} : i64, file = "{{.*}}predicate-divergent.mlir", kind = "cond", line = {{[0-9]+}} : i64}]
// CHECK-NOT: stablehlo.case
// CHECK: %[[SUM:.*]] = stablehlo.custom_call @pmapc.psum
// CHECK: %[[MAX:.*]] = stablehlo.custom_call @pmapc.pmax
// CHECK: %[[FIRST:.*]] = stablehlo.compare EQ, %{{.*}}, %{{.*}} : (tensor<i32>, tensor<i32>) -> tensor<i1>
// CHECK: stablehlo.select %[[FIRST]], %[[SUM]], %[[MAX]] : tensor<i1>, tensor<8xf32>
module @varying_cond {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    %i = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %0 = "stablehlo.case"(%i) ({
      %s = stablehlo.custom_call @pmapc.psum(%z) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
      stablehlo.return %s : tensor<8xf32>
    }, {
      %m = stablehlo.custom_call @pmapc.pmax(%z) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
      stablehlo.return %m : tensor<8xf32>
    }) : (tensor<i32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// A uniform index (the psum agrees over "model") keeps its case, and so does a
// varying one around a collective over another axis ("data": the devices of a
// "data" group share their "model" index).
// CHECK-LABEL: module @uniform_cond
// CHECK-NOT: pmapc.predicated
// CHECK: stablehlo.case
// CHECK: stablehlo.case
module @uniform_cond {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    %i = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %all = stablehlo.custom_call @pmapc.psum(%i) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<i32>) -> tensor<i32>
    %0 = "stablehlo.case"(%all) ({
      %s = stablehlo.custom_call @pmapc.psum(%z) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
      stablehlo.return %s : tensor<8xf32>
    }, {
      stablehlo.return %z : tensor<8xf32>
    }) : (tensor<i32>) -> tensor<8xf32>
    %1 = "stablehlo.case"(%i) ({
      %s = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
      stablehlo.return %s : tensor<8xf32>
    }, {
      stablehlo.return %0 : tensor<8xf32>
    }) : (tensor<i32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}

// -----

// A loop whose trip count is the device's "model" index + 1, with a psum over
// "model" in its body: the condition becomes "any device of the group
// continues" (a pmax over "model"), and the body keeps a finished device's
// carries (its own condition, computed again, selects).
// CHECK-LABEL: module @varying_while
// CHECK-SAME: kind = "while"
// CHECK: stablehlo.while
// CHECK: %[[OWN:.*]] = stablehlo.compare LT
// CHECK: %[[ANY:.*]] = stablehlo.custom_call @pmapc.pmax(%[[OWN]]) {{.*}}axes = ["model"]{{.*}} : (tensor<i1>) -> tensor<i1>
// CHECK: stablehlo.return %[[ANY]]
// CHECK: %[[STILL:.*]] = stablehlo.compare LT
// CHECK: stablehlo.custom_call @pmapc.psum
// CHECK: stablehlo.select %[[STILL]]
// CHECK: stablehlo.select %[[STILL]]
module @varying_while {
  func.func public @main(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%x) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%y: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%y) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
  func.func private @inner(%z: tensor<8xf32>) -> tensor<8xf32> {
    %i = stablehlo.custom_call @pmapc.axis_index() {api_version = 4 : i32, backend_config = {axes = ["model"]}} : () -> tensor<i32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %bound = stablehlo.add %i, %one : tensor<i32>
    %0:2 = stablehlo.while(%k = %zero, %v = %z) : tensor<i32>, tensor<8xf32>
    cond {
      %c = stablehlo.compare LT, %k, %bound : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %s = stablehlo.custom_call @pmapc.psum(%v) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
      %next = stablehlo.add %k, %one : tensor<i32>
      stablehlo.return %next, %s : tensor<i32>, tensor<8xf32>
    }
    return %0#1 : tensor<8xf32>
  }
}

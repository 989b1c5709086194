// RUN: pmapc opt %s --pass-pipeline='builtin.module(combine-all-reduces)' --split-input-file | FileCheck %s

// Two gradient-style sums over the same groups, used only afterwards: one
// variadic all_reduce where the second stood.
// CHECK-LABEL: func.func @independent_sums_combine
// CHECK: %[[A:.*]] = stablehlo.multiply
// CHECK: %[[B:.*]] = stablehlo.add
// CHECK: %[[R:.*]]:2 = "stablehlo.all_reduce"(%[[A]], %[[B]])
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]>
// CHECK: stablehlo.add
// CHECK: (tensor<4xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>)
// CHECK-NOT: stablehlo.all_reduce
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @independent_sums_combine(%x: tensor<4xf32>, %y: tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  %a = stablehlo.multiply %x, %x : tensor<4xf32>
  %0 = "stablehlo.all_reduce"(%a) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %b = stablehlo.add %y, %y : tensor<2xf32>
  %1 = "stablehlo.all_reduce"(%b) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>} : (tensor<2xf32>) -> tensor<2xf32>
  return %0, %1 : tensor<4xf32>, tensor<2xf32>
}

// -----

// The second sum depends on the first: they stay apart.
// CHECK-LABEL: func.func @dependent_sums_stay
// CHECK: "stablehlo.all_reduce"(%{{.*}}) <{
// CHECK: "stablehlo.all_reduce"(%{{.*}}) <{
func.func @dependent_sums_stay(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.all_reduce"(%x) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  %2 = "stablehlo.all_reduce"(%1) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// Different groups, reducers or element types do not combine.
// CHECK-LABEL: func.func @different_keys_stay
// CHECK-COUNT-3: "stablehlo.all_reduce"(%{{[a-z0-9_]+}}) <{
func.func @different_keys_stay(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi32>) {
  %0 = "stablehlo.all_reduce"(%x) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.all_reduce"(%x) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.maximum %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stablehlo.all_reduce"(%i) ({
  ^bb0(%l: tensor<i32>, %r: tensor<i32>):
    %s = stablehlo.add %l, %r : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xi32>) -> tensor<4xi32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xi32>
}

// -----

// The first result is used before the second operand is computed: there is
// no place for a combined op, so they stay apart.
// CHECK-LABEL: func.func @no_room_stays
// CHECK: "stablehlo.all_reduce"(%{{.*}}) <{
// CHECK: stablehlo.negate
// CHECK: stablehlo.multiply
// CHECK: "stablehlo.all_reduce"(%{{.*}}) <{
func.func @no_room_stays(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "stablehlo.all_reduce"(%x) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %n = stablehlo.negate %0 : tensor<4xf32>
  %m = stablehlo.multiply %y, %y : tensor<4xf32>
  %1 = "stablehlo.all_reduce"(%m) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %n, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// The first result is used before the second all_reduce, but the second
// operand is ready earlier: both move up to where their operands are ready
// (a loss psum joining the gradient psums).
// CHECK-LABEL: func.func @combined_before_first_use
// CHECK: %[[R:.*]]:2 = "stablehlo.all_reduce"(%arg0, %arg1)
// CHECK: stablehlo.negate %[[R]]#0
// CHECK-NOT: stablehlo.all_reduce
func.func @combined_before_first_use(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "stablehlo.all_reduce"(%x) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %n = stablehlo.negate %0 : tensor<4xf32>
  %1 = "stablehlo.all_reduce"(%y) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %n, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// psum(psum(x)): the second operand is the first result; they stay apart.
// CHECK-LABEL: func.func @nested_sums_stay
// CHECK: %[[FIRST:.*]] = "stablehlo.all_reduce"(%arg0)
// CHECK: "stablehlo.all_reduce"(%[[FIRST]])
func.func @nested_sums_stay(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.all_reduce"(%x) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.all_reduce"(%0) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A pair of sums over the results of another pair: both pairs combine, the
// second one after the first's combined op (it once moved after an erased op).
// CHECK-LABEL: func.func @pair_over_combined_pair
// CHECK: %[[FIRST:.*]]:2 = "stablehlo.all_reduce"(%arg0, %arg1)
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3]]>
// CHECK: %[[SECOND:.*]]:2 = "stablehlo.all_reduce"(%[[FIRST]]#0, %[[FIRST]]#1)
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3]]>
// CHECK: return %[[SECOND]]#0, %[[SECOND]]#1
func.func @pair_over_combined_pair(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "stablehlo.all_reduce"(%x) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.all_reduce"(%y) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stablehlo.all_reduce"(%0) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "stablehlo.all_reduce"(%1) ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %s = stablehlo.add %l, %r : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %2, %3 : tensor<4xf32>, tensor<4xf32>
}

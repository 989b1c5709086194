// RUN: pmapc opt %s --pass-pipeline='builtin.module(fold-reshapes)' --split-input-file | FileCheck %s

// fold-reshapes alone: reshape chains fold, squeezes move down to their inverses,
// and nothing else changes (the named pipeline `simplify` adds MLIR's canonicalize
// and cse: simplify.mlir).

// A chain of reshapes becomes one; the first, now unused, is erased.
// CHECK-LABEL: func.func @reshape_chain_folds
// CHECK-NEXT: %[[R:.*]] = stablehlo.reshape %arg0 : (tensor<1x1x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain_folds(%x: tensor<1x1x8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.reshape %x : (tensor<1x1x8xf32>) -> tensor<1x8xf32>
  %1 = stablehlo.reshape %0 : (tensor<1x8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

// A reshape back to the source type disappears; equal constants stay two (no cse).
// CHECK-LABEL: func.func @round_trip_reshape_vanishes
// CHECK-NOT: stablehlo.reshape
// CHECK-COUNT-2: stablehlo.constant
// CHECK: return %arg0
func.func @round_trip_reshape_vanishes(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<f32>, tensor<f32>) {
  %0 = stablehlo.reshape %x : (tensor<8xf32>) -> tensor<1x8xf32>
  %1 = stablehlo.reshape %0 : (tensor<1x8xf32>) -> tensor<8xf32>
  %c0 = stablehlo.constant dense<1.0> : tensor<f32>
  %c1 = stablehlo.constant dense<1.0> : tensor<f32>
  return %1, %c0, %c1 : tensor<8xf32>, tensor<f32>, tensor<f32>
}

// -----

// A squeeze of a device's block moves below the elementwise ops and the all_reduce
// that use it (a broadcast scalar made again in the block's shape) and meets the
// reshape that gives the dimensions back: both go, and the program computes on
// the block, as a shard_map body does.
// CHECK-LABEL: func.func @squeeze_meets_its_inverse
// CHECK-NOT: stablehlo.reshape
// CHECK: %[[S:.*]] = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> tensor<1x1x8xf32>
// CHECK-NEXT: %[[M:.*]] = stablehlo.multiply %arg1, %[[S]] : tensor<1x1x8xf32>
// CHECK-NEXT: %[[R:.*]] = "stablehlo.all_reduce"(%[[M]])
// CHECK: }) : (tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x1x8xf32>
func.func @squeeze_meets_its_inverse(%c: tensor<f32>, %x: tensor<1x1x8xf32>) -> tensor<1x1x8xf32> {
  %0 = stablehlo.reshape %x : (tensor<1x1x8xf32>) -> tensor<8xf32>
  %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %2 = stablehlo.multiply %0, %1 : tensor<8xf32>
  %3 = "stablehlo.all_reduce"(%2) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<8xf32>) -> tensor<8xf32>
  %4 = stablehlo.reshape %3 : (tensor<8xf32>) -> tensor<1x1x8xf32>
  return %4 : tensor<1x1x8xf32>
}

// -----

// Two squeezes of blocks of one shape meet in an add, a splat constant is made
// again in the block's shape, a compare changes the element type: the squeeze
// passes them all, and a value returned squeezed is squeezed once, at the end.
// CHECK-LABEL: func.func @squeezes_pass_elementwise_ops
// CHECK-NEXT: %[[A:.*]] = stablehlo.add %arg0, %arg1 : tensor<1x4xf32>
// CHECK-NEXT: %[[C:.*]] = stablehlo.constant dense<2.000000e+00> : tensor<1x4xf32>
// CHECK-NEXT: %[[P:.*]] = stablehlo.compare GT, %[[A]], %[[C]] : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xi1>
// CHECK-NEXT: %[[Q:.*]] = stablehlo.reshape %[[P]] : (tensor<1x4xi1>) -> tensor<4xi1>
// CHECK-NEXT: return %[[Q]] : tensor<4xi1>
func.func @squeezes_pass_elementwise_ops(%x: tensor<1x4xf32>, %y: tensor<1x4xf32>) -> tensor<4xi1> {
  %0 = stablehlo.reshape %x : (tensor<1x4xf32>) -> tensor<4xf32>
  %1 = stablehlo.reshape %y : (tensor<1x4xf32>) -> tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  %c = stablehlo.constant dense<2.0> : tensor<4xf32>
  %3 = stablehlo.compare GT, %2, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %3 : tensor<4xi1>
}

// -----

// A squeeze stays above an op that reads dimensions (a reduce), and above an
// elementwise op whose other operand is neither filled nor a squeeze of a block
// of its shape.
// CHECK-LABEL: func.func @squeeze_stops_where_shapes_matter
// CHECK: %[[S:.*]] = stablehlo.reshape %arg0 : (tensor<1x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[A:.*]] = stablehlo.add %[[S]], %arg1 : tensor<8xf32>
// CHECK: %[[R:.*]] = stablehlo.reduce(%[[S]] init:
// CHECK: return %[[A]], %[[R]]
func.func @squeeze_stops_where_shapes_matter(%x: tensor<1x8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<f32>) {
  %0 = stablehlo.reshape %x : (tensor<1x8xf32>) -> tensor<8xf32>
  %1 = stablehlo.add %0, %y : tensor<8xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %2 = stablehlo.reduce(%0 init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
  return %1, %2 : tensor<8xf32>, tensor<f32>
}

// -----

// A squeeze of an op the first squeeze passes (a chain of squeezes) passes the
// ops below it too, on the first squeeze's block: every op computes on the block,
// and the reshape that gives the dimensions back goes.
// CHECK-LABEL: func.func @squeezes_of_lifted_values_pass_too
// CHECK-NOT: stablehlo.reshape
// CHECK: %[[M:.*]] = stablehlo.multiply %arg0, %{{.*}} : tensor<1x1x8xf32>
// CHECK: %[[R:.*]] = "stablehlo.all_reduce"(%[[M]])
// CHECK: }) : (tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x1x8xf32>
func.func @squeezes_of_lifted_values_pass_too(%x: tensor<1x1x8xf32>) -> tensor<1x1x8xf32> {
  %0 = stablehlo.reshape %x : (tensor<1x1x8xf32>) -> tensor<1x8xf32>
  %c = stablehlo.constant dense<3.0> : tensor<1x8xf32>
  %1 = stablehlo.multiply %0, %c : tensor<1x8xf32>
  %2 = stablehlo.reshape %1 : (tensor<1x8xf32>) -> tensor<8xf32>
  %3 = "stablehlo.all_reduce"(%2) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<8xf32>) -> tensor<8xf32>
  %4 = stablehlo.reshape %3 : (tensor<8xf32>) -> tensor<1x1x8xf32>
  return %4 : tensor<1x1x8xf32>
}

// -----

// A fill that an op the squeeze cannot pass uses too stays for it, and is made
// again in the block's shape for the op the squeeze passes; a value of the lifted
// ops that an op outside them uses is squeezed once, right after the op that makes
// it, for that op alone.
// CHECK-LABEL: func.func @shared_fills_and_values_squeezed_at_the_boundary
// CHECK: %[[C:.*]] = stablehlo.constant dense<2.000000e+00> : tensor<8xf32>
// CHECK-NEXT: %[[CB:.*]] = stablehlo.constant dense<2.000000e+00> : tensor<1x8xf32>
// CHECK: %[[A:.*]] = stablehlo.add %arg0, %[[CB]] : tensor<1x8xf32>
// CHECK-NEXT: %[[S:.*]] = stablehlo.reshape %[[A]] : (tensor<1x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[E:.*]] = stablehlo.exponential %[[A]] : tensor<1x8xf32>
// CHECK: %[[R:.*]] = stablehlo.reduce(%[[S]] init:
// CHECK: return %[[E]], %[[R]], %[[C]]
func.func @shared_fills_and_values_squeezed_at_the_boundary(%x: tensor<1x8xf32>) -> (tensor<1x8xf32>, tensor<f32>, tensor<8xf32>) {
  %0 = stablehlo.reshape %x : (tensor<1x8xf32>) -> tensor<8xf32>
  %c = stablehlo.constant dense<2.0> : tensor<8xf32>
  %1 = stablehlo.add %0, %c : tensor<8xf32>
  %2 = stablehlo.exponential %1 : tensor<8xf32>
  %3 = stablehlo.reshape %2 : (tensor<8xf32>) -> tensor<1x8xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %4 = stablehlo.reduce(%1 init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
  return %3, %4, %c : tensor<1x8xf32>, tensor<f32>, tensor<8xf32>
}

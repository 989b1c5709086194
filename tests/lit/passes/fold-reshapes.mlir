// RUN: pmapc opt %s --pass-pipeline='builtin.module(fold-reshapes)' --split-input-file | FileCheck %s

// fold-reshapes alone: reshape chains fold, and nothing else changes (the named
// pipeline `simplify` adds MLIR's canonicalize and cse: simplify.mlir).

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

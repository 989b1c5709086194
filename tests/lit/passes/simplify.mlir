// RUN: pmapc opt %s --pass-pipeline='builtin.module(simplify)' --split-input-file | FileCheck %s

// A chain of reshapes becomes one.
// CHECK-LABEL: func.func @reshape_chain_folds
// CHECK-NEXT: %[[R:.*]] = stablehlo.reshape %arg0 : (tensor<1x1x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_chain_folds(%x: tensor<1x1x8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.reshape %x : (tensor<1x1x8xf32>) -> tensor<1x8xf32>
  %1 = stablehlo.reshape %0 : (tensor<1x8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

// A reshape back to the source type disappears.
// CHECK-LABEL: func.func @round_trip_reshape_vanishes
// CHECK-NOT: stablehlo.reshape
// CHECK: return %arg0
func.func @round_trip_reshape_vanishes(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = stablehlo.reshape %x : (tensor<8xf32>) -> tensor<1x8xf32>
  %1 = stablehlo.reshape %0 : (tensor<1x8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

// Equal index arithmetic is computed once (cse).
// CHECK-LABEL: func.func @index_arithmetic_shared
// CHECK-COUNT-1: stablehlo.remainder
// CHECK-NOT: stablehlo.remainder
func.func @index_arithmetic_shared(%d: tensor<i32>) -> (tensor<i32>, tensor<i32>) {
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %0 = stablehlo.remainder %d, %c4 : tensor<i32>
  %c4b = stablehlo.constant dense<4> : tensor<i32>
  %1 = stablehlo.remainder %d, %c4b : tensor<i32>
  return %0, %1 : tensor<i32>, tensor<i32>
}

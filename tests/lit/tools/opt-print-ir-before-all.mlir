// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,flatten-maps,func.func(cse))' --mlir-print-ir-before-all -o /dev/null 2>&1 | FileCheck %s

// --mlir-print-ir-before-all: MLIR prints the IR before each pass (a nested
// pipeline's pass prints the op it runs on).

// CHECK: // -----// IR Dump Before VerifyAxesPass: verify-axes //----- //
// CHECK-NEXT: module @psum_over_i {
// CHECK: // -----// IR Dump Before FlattenMapsPass: flatten-maps //----- //
// CHECK-NEXT: module @psum_over_i {
// CHECK: @pmapc.map
// CHECK: // -----// IR Dump Before CSEPass: cse //----- //
// CHECK-NEXT: func.func public @main
// CHECK-NOT: IR Dump After

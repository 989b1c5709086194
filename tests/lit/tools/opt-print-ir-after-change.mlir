// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,flatten-maps,func.func(cse),lower-collectives)' --mlir-print-ir-after-change -o /dev/null 2>&1 | FileCheck %s

// --mlir-print-ir-after-change: MLIR prints the IR after the passes that
// changed it (verify-axes and cse change nothing here).

// CHECK-NOT: verify-axes
// CHECK: // -----// IR Dump After FlattenMapsPass: flatten-maps //----- //
// CHECK-NOT: CSEPass
// CHECK: // -----// IR Dump After LowerCollectivesPass: lower-collectives //----- //
// CHECK-NOT: IR Dump

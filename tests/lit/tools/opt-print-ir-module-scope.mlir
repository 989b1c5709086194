// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,flatten-maps,func.func(cse))' --mlir-print-ir-after-all --mlir-print-ir-module-scope -o /dev/null 2>&1 | FileCheck %s

// --mlir-print-ir-module-scope: every dump prints the whole module, and its
// header names the op the pass ran on.

// CHECK: // -----// IR Dump After FlattenMapsPass: flatten-maps ('builtin.module' operation: @psum_over_i) //----- //
// CHECK-NEXT: module @psum_over_i attributes {pmapc.mesh
// CHECK: // -----// IR Dump After CSEPass: cse ('func.func' operation: @main) //----- //
// CHECK-NEXT: module @psum_over_i attributes {pmapc.mesh

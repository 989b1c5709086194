// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,flatten-maps,cse,lower-collectives)' --mlir-print-ir-after=flatten-maps --mlir-print-ir-before=lower-collectives --mlir-print-ir-after=cse -o /dev/null 2>&1 | FileCheck %s

// --mlir-print-ir-before=PASS and --mlir-print-ir-after=PASS print around the
// passes named, pmapc's and MLIR's, and no others.

// CHECK-NOT: verify-axes
// CHECK: // -----// IR Dump After FlattenMapsPass: flatten-maps //----- //
// CHECK-NEXT: module @psum_over_i attributes {pmapc.mesh
// CHECK: @pmapc.psum
// CHECK: // -----// IR Dump After cse //----- //
// CHECK-NEXT: module @psum_over_i attributes {pmapc.mesh
// CHECK: // -----// IR Dump Before LowerCollectivesPass: lower-collectives //----- //
// CHECK-NEXT: module @psum_over_i attributes {pmapc.mesh
// CHECK: @pmapc.psum
// CHECK-NOT: IR Dump

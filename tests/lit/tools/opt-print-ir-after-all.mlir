// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,flatten-maps,lower-collectives,to-partitions)' --mlir-print-ir-after-all -o %t 2>&1 | FileCheck %s
// RUN: FileCheck %s --input-file=%t --check-prefix=OUT
// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,flatten-maps,lower-collectives,to-partitions)' --print-ir-after-all -o /dev/null 2>&1 | FileCheck %s

// --mlir-print-ir-after-all (and its older name --print-ir-after-all): MLIR's
// pass manager prints its dump header and the IR after each pass on stderr, in
// pipeline order; the final IR still goes to -o.

// CHECK: // -----// IR Dump After VerifyAxesPass: verify-axes //----- //
// CHECK-NEXT: module @psum_over_i {
// CHECK: @pmapc.map
// CHECK: // -----// IR Dump After FlattenMapsPass: flatten-maps //----- //
// CHECK-NEXT: module @psum_over_i attributes {pmapc.mesh
// CHECK-NOT: @pmapc.map
// CHECK: @pmapc.psum
// CHECK: // -----// IR Dump After LowerCollectivesPass: lower-collectives //----- //
// CHECK-NEXT: module @psum_over_i attributes {pmapc.mesh
// CHECK-NOT: @pmapc.psum
// CHECK: stablehlo.all_reduce
// CHECK: // -----// IR Dump After ToPartitionsPass: to-partitions //----- //
// CHECK-NEXT: module @psum_over_i attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32
// CHECK: stablehlo.all_reduce
// CHECK-NOT: IR Dump

// OUT: module @psum_over_i attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32
// OUT-NOT: IR Dump
// OUT: stablehlo.all_reduce

// RUN: pmapc opt - --pass-pipeline='builtin.module(verify-axes,flatten-maps)' < %S/Inputs/psum_over_i.mlir | FileCheck %s
// RUN: pmapc opt --pass-pipeline='builtin.module(verify-axes,flatten-maps)' < %S/Inputs/psum_over_i.mlir | FileCheck %s

// `-`, or no input file at all, reads the module from stdin.

// CHECK-LABEL: module @psum_over_i
// CHECK-SAME: pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}
// CHECK: @pmapc.psum

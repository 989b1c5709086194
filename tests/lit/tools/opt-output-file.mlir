// RUN: rm -f %t
// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes)' -o %t > %t.stdout
// RUN: FileCheck %s --input-file=%t
// RUN: FileCheck %s --input-file=%t.stdout --allow-empty --check-prefix=STDOUT

// -o writes the output module to a file and nothing to stdout.

// CHECK-LABEL: module @psum_over_i
// CHECK: @pmapc.map

// STDOUT-NOT: module

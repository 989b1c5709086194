// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,flatten-maps,func.func(cse))' --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s

// --mlir-pass-statistics: MLIR's pass statistics report (it lists the passes
// that keep statistics; pmapc's keep none, and CSE counts nothing here).

// CHECK: ===-------------------------------------------------------------------------===
// CHECK-NEXT: ... Pass statistics report ...
// CHECK-NEXT: ===-------------------------------------------------------------------------===

// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(pmapc-lower,canonicalize{max-iterations=3},func.func(cse))' --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s

// --dump-pass-pipeline: the pipeline MLIR's pass manager runs, named pipelines
// expanded and MLIR's options spelled out, before it runs.

// CHECK: Pass Manager with 7 passes:
// CHECK-NEXT: builtin.module(verify-axes,flatten-maps,predicate-divergent,lower-collectives,to-partitions,canonicalize{{{.*}}max-iterations=3{{.*}}},func.func(cse))

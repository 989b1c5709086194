// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pmapc-lower --mlir-timing -o %t 2>&1 | FileCheck %s
// RUN: FileCheck %s --input-file=%t --check-prefix=OUT

// --mlir-timing: MLIR's pass manager prints its execution time report on
// stderr, a row per pass in pipeline order (MLIR's passes and nested pipelines
// too). The IR still goes to -o.

// CHECK: ===-------------------------------------------------------------------------===
// CHECK-NEXT: ... Execution time report ...
// CHECK-NEXT: ===-------------------------------------------------------------------------===
// CHECK-NEXT: Total Execution Time: {{[0-9]+\.[0-9]+}} seconds
// CHECK-EMPTY:
// CHECK-NEXT: ----Wall Time----  ----Name----
// CHECK-NEXT: {{[0-9]+\.[0-9]+}} ({{ *[0-9]+\.[0-9]}}%)  VerifyAxesPass
// CHECK-NEXT: ({{.*}}%)  FlattenMapsPass
// CHECK-NEXT: ({{.*}}%)  PredicateDivergentPass
// CHECK-NEXT: ({{.*}}%)  LowerCollectivesPass
// CHECK-NEXT: ({{.*}}%)  ToPartitionsPass
// CHECK: (100.0%)  Total

// OUT: module @psum_over_i attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32
// OUT-NOT: Execution time report

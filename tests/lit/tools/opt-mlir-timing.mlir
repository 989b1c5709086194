// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pmapc-to-stablehlo --mlir-timing -o %t 2>&1 | FileCheck %s
// RUN: FileCheck %s --input-file=%t --check-prefix=OUT
// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pmapc-lower --verify-each=false --mlir-timing -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONCE

// --mlir-timing prints mlir-opt's execution time report on stderr: the wall time
// of parsing, of each pass in pipeline order, and of printing, with each one's
// share of the total. The IR still goes to -o.

// CHECK: ===-------------------------------------------------------------------------===
// CHECK-NEXT: ... Execution time report ...
// CHECK-NEXT: ===-------------------------------------------------------------------------===
// CHECK-NEXT: Total Execution Time: {{[0-9]+\.[0-9]+}} seconds
// CHECK-EMPTY:
// CHECK-NEXT: ----Wall Time----  ----Name----
// CHECK-NEXT: {{[0-9]+\.[0-9]+}} ({{ *[0-9]+\.[0-9]}}%)  Parser
// CHECK-NEXT: ({{.*}}%)  verify-axes
// CHECK-NEXT: ({{.*}}%)  flatten-maps
// CHECK-NEXT: ({{.*}}%)  fold-gather-slice
// CHECK-NEXT: ({{.*}}%)  sink-slices
// CHECK-NEXT: ({{.*}}%)  sink-gathers
// CHECK-NEXT: ({{.*}}%)  lower-collectives
// CHECK-NEXT: ({{.*}}%)  combine-all-reduces
// CHECK-NEXT: ({{.*}}%)  to-partitions
// CHECK-NEXT: ({{.*}}%)  simplify
// CHECK-NEXT: ({{.*}}%)  Output
// CHECK-NEXT: (100.0%)  Total

// OUT: module @psum_over_i attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32
// OUT-NOT: Execution time report

// With --verify-each=false the one verification of the result has its own row.
// ONCE: Parser
// ONCE-NEXT: verify-axes
// ONCE-NEXT: flatten-maps
// ONCE-NEXT: lower-collectives
// ONCE-NEXT: to-partitions
// ONCE-NEXT: verify
// ONCE-NEXT: Output
// ONCE-NEXT: Total

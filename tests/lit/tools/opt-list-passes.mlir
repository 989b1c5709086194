// RUN: pmapc opt --list-passes | FileCheck %s

// --list-passes names each pass with its docstring's first line, then the
// named pipelines. It needs no input.

// CHECK: Passes:
// CHECK: --verify-axes {{ *}}Check that maps and named-axis collectives are well formed and their axes bound.
// CHECK: --flatten-maps {{ *}}Inline nested maps into one SPMD program over the device mesh.
// CHECK: --lower-collectives {{ *}}Rewrite named-axis collectives into StableHLO collectives with replica groups.
// CHECK: Pipelines:
// CHECK: --pmapc-to-stablehlo {{ *}}verify-axes,flatten-maps,

// RUN: pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,flatten-maps,canonicalize{max-iterations=2},func.func(cse),lower-collectives,symbol-dce)' | FileCheck %s
// RUN: pmapc opt %S/../../../examples/nested_2x4.mlir --pass-pipeline='builtin.module(verify-axes,flatten-maps,canonicalize,cse)' | FileCheck %s --check-prefix=EXAMPLE
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,canonicalise)' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(canonicalize{bogus=1})' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(func.func(flatten-maps))' 2>&1 | FileCheck %s --check-prefix=NESTED

// pmapc's passes and MLIR's registered ones (with options, nested pipelines)
// run in one pipeline of MLIR's pass manager.

// CHECK: module @psum_over_i attributes {pmapc.mesh
// CHECK: stablehlo.all_reduce
// CHECK-NOT: @pmapc.psum

// EXAMPLE: module attributes {pmapc.mesh = {axis_names = ["data", "model"]
// EXAMPLE-NOT: @pmapc.map
// EXAMPLE: @pmapc.psum

// UNKNOWN: pmapc opt: error: unknown pass 'canonicalise' in pipeline 'builtin.module(verify-axes,canonicalise)' ('canonicalise' does not refer to a registered pass or pass pipeline); did you mean 'canonicalize'?; pmapc's passes: verify-axes,
// UNKNOWN-SAME: or a registered MLIR pass, e.g. canonicalize, cse, inline, symbol-dce, sdy-*

// OPTION: pmapc opt: error: MLIR's pass 'canonicalize' in pipeline 'builtin.module(canonicalize{bogus=1})': no such option bogus

// NESTED: pmapc opt: error: 'flatten-maps' is nested in 'func.func(...)' in pipeline 'builtin.module(func.func(flatten-maps))'; pmapc's passes run on the whole module: put it at the top level

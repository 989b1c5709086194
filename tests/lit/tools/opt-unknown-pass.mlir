// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes,no-such-pass)' 2>&1 | FileCheck %s
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(flatten-maps{no-such-option=1})' 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(flatten-maps{split-entry=maybe})' 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(verify-axes' 2>&1 | FileCheck %s --check-prefix=MALFORMED
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --verify-axes --pass-pipeline='builtin.module(verify-axes)' 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(pmapc-lower{tagret=replicas})' 2>&1 | FileCheck %s --check-prefix=PIPELINE-OPTION
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(pmapc-to-stablehlo{target=gpu})' 2>&1 | FileCheck %s --check-prefix=TARGET
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(pmapc-lower,to-partitions{first-channel=0})' 2>&1 | FileCheck %s --check-prefix=CHANNEL
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(pmapc-lower,to-partitions{replica-groups=sparse})' 2>&1 | FileCheck %s --check-prefix=GROUPS
// RUN: not pmapc opt %S/Inputs/psum_over_i.mlir --pass-pipeline='builtin.module(pmapc-to-stablehlo{replica-groups=sparse})' 2>&1 | FileCheck %s --check-prefix=PIPELINE-GROUPS

// A bad pipeline is reported in one line before any input is read, with what
// is known; no module is printed and no Python traceback shown.

// CHECK-NOT: Traceback
// CHECK: pmapc opt: error: unknown pass 'no-such-pass' in pipeline 'builtin.module(verify-axes,no-such-pass)' ('no-such-pass' does not refer to a registered pass or pass pipeline); pmapc's passes: verify-axes, flatten-maps,
// CHECK-NOT: module
// CHECK-NOT: Traceback

// OPTION-NOT: Traceback
// OPTION: pmapc opt: error: pass 'flatten-maps' has no option 'no-such-option'; its options are: split-entry
// OPTION-NOT: Traceback

// VALUE: pmapc opt: error: option 'split-entry' of pass 'flatten-maps' takes true or false, got 'maybe'

// MALFORMED: pmapc opt: error: malformed pass pipeline 'builtin.module(verify-axes'

// BOTH: pmapc opt: error: give either --pass-pipeline or pass flags, not both

// PIPELINE-OPTION: pmapc opt: error: pipeline 'pmapc-lower' has no option 'tagret'; its options are: target, replica-groups

// TARGET: pmapc opt: error: option 'target' of pipeline 'pmapc-to-stablehlo' takes partitions or replicas, got 'gpu'

// CHANNEL: pmapc opt: error: option 'first-channel' of pass 'to-partitions' must be at least 1, got 0

// GROUPS: pmapc opt: error: option 'replica-groups' of pass 'to-partitions' takes named or dense, got 'sparse'

// PIPELINE-GROUPS: pmapc opt: error: option 'replica-groups' of pipeline 'pmapc-to-stablehlo' takes named or dense, got 'sparse'

// `pmapc plan` reports a module it cannot read as `pmapc opt` does: one
// located error at the op (or the module) at fault, exit status 1.

// RUN: not pmapc plan %S/Inputs/plan-permute-outside-the-mesh.mlir 2>&1 | FileCheck %s --check-prefix=PAIRS
// PAIRS: plan-permute-outside-the-mesh.mlir:3:10: error: 'stablehlo.collective_permute' names device 5 in its source_target_pairs, outside the module's 2 devices (0..1); name devices of the mesh

// RUN: not pmapc plan %S/Inputs/plan-ragged-without-groups.mlir 2>&1 | FileCheck %s --check-prefix=RAGGED
// RAGGED: plan-ragged-without-groups.mlir:3:10: error: '@ragged_all_to_all' needs a 'backend_config' dictionary with its 'replica_groups'

// RUN: not pmapc plan %S/Inputs/plan-ragged-groups-unit.mlir 2>&1 | FileCheck %s --check-prefix=UNIT
// UNIT: plan-ragged-groups-unit.mlir:3:10: error: 'replica_groups' of 'stablehlo.custom_call' must be a matrix of device ids

// pmapc IR goes through the default pipeline first: its errors are located too.
// RUN: not pmapc plan %S/Inputs/plan-dynamic-map.mlir 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// DYNAMIC: plan-dynamic-map.mlir:3:10: error: operand #0 of the map over 'i': the operand has a dynamic shape [4, ?]

// RUN: not pmapc plan %S/Inputs/plan-mesh-over-2-31.mlir 2>&1 | FileCheck %s --check-prefix=MESH
// MESH: plan-mesh-over-2-31.mlir:1:1: error: the mesh 'pmapc.mesh' (65536 x 65536) has 4294967296 positions, more than the 2147483648 devices XLA numbers

// RUN: pmapc opt %s --pass-pipeline='builtin.module(verify-axes,flatten-maps,lower-collectives{ragged=expanded})' | FileCheck %s --check-prefix=EXPANDED
// RUN: pmapc opt %s --pass-pipeline='builtin.module(verify-axes,flatten-maps,lower-collectives{ragged=native})' | FileCheck %s --check-prefix=NATIVE
// RUN: pmapc opt %s --pass-pipeline='builtin.module(pmapc-lower{ragged=native})' | FileCheck %s --check-prefix=PARTITIONS
// RUN: pmapc opt %s --pass-pipeline='builtin.module(verify-axes,flatten-maps)' | FileCheck %s --check-prefix=FLAT

// A ragged_all_to_all over 'model' in a 2x4 nest: one slice to each of the 4 model
// devices (K = 4), from an operand of 4 rows into an output of 6.

// flatten-maps keeps the named op, its axes resolved to the mesh's.
// FLAT: func.func public @main
// FLAT: stablehlo.custom_call @pmapc.ragged_all_to_all(
// FLAT-SAME: backend_config = {axes = ["model"]}
// FLAT-SAME: (tensor<4x2xf32>, tensor<6x2xf32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) -> tensor<6x2xf32>

// expanded: every slice as the operand's 4 rows from its offset, stacked [4, 4, 2]
// and exchanged in one all_to_all (marked with the rows a ragged exchange moves),
// the output offsets in another, then a masked write of each received slice.
// EXPANDED-NOT: @pmapc.ragged_all_to_all
// EXPANDED: %[[PADDED:.*]] = stablehlo.concatenate
// EXPANDED-SAME: -> tensor<8x2xf32>
// EXPANDED-COUNT-4: stablehlo.dynamic_slice %[[PADDED]]
// EXPANDED: %[[SLICES:.*]] = stablehlo.concatenate {{.*}} -> tensor<4x4x2xf32>
// EXPANDED: "stablehlo.all_to_all"(%[[SLICES]])
// EXPANDED-SAME: concat_dimension = 0 : i64
// EXPANDED-SAME{LITERAL}: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// EXPANDED-SAME: split_count = 4 : i64
// EXPANDED-SAME: pmapc.ragged_rows = 4 : i64
// EXPANDED-NOT: stablehlo.convert
// EXPANDED: "stablehlo.all_to_all"
// EXPANDED-SAME: (tensor<4xi32>) -> tensor<4xi32>
// EXPANDED-COUNT-4: stablehlo.dynamic_update_slice
// EXPANDED: stablehlo.slice {{.*}} [0:6, 0:2] : (tensor<10x2xf32>) -> tensor<6x2xf32>

// native: XLA's custom call, JAX's form, its replica groups in its backend_config.
// NATIVE-NOT: @pmapc.ragged_all_to_all
// NATIVE: stablehlo.custom_call @ragged_all_to_all(
// NATIVE-SAME: api_version = 4 : i32
// NATIVE-SAME{LITERAL}: backend_config = {replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}
// NATIVE-SAME: (tensor<4x2xf32>, tensor<6x2xf32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) -> tensor<6x2xf32>
// NATIVE-NOT: channel_id

// In partition form (pmapc-lower's default target) it gets a channel id.
// PARTITIONS: stablehlo.custom_call @ragged_all_to_all
// PARTITIONS-SAME: backend_config = {channel_id = 1 : i64, replica_groups =
module @ragged {
  func.func public @main(%arg0: tensor<2x4x4x2xf32>, %arg1: tensor<2x4x6x2xf32>, %arg2: tensor<2x4x4xi32>, %arg3: tensor<2x4x4xi32>, %arg4: tensor<2x4x4xi32>, %arg5: tensor<2x4x4xi32>) -> tensor<2x4x6x2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0, 0, 0, 0, 0, 0], out_axes = [0]}} : (tensor<2x4x4x2xf32>, tensor<2x4x6x2xf32>, tensor<2x4x4xi32>, tensor<2x4x4xi32>, tensor<2x4x4xi32>, tensor<2x4x4xi32>) -> tensor<2x4x6x2xf32>
    return %0 : tensor<2x4x6x2xf32>
  }
  func.func private @outer(%arg0: tensor<4x4x2xf32>, %arg1: tensor<4x6x2xf32>, %arg2: tensor<4x4xi32>, %arg3: tensor<4x4xi32>, %arg4: tensor<4x4xi32>, %arg5: tensor<4x4xi32>) -> tensor<4x6x2xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5) {called_computations = [@body], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0, 0, 0, 0, 0, 0], out_axes = [0]}} : (tensor<4x4x2xf32>, tensor<4x6x2xf32>, tensor<4x4xi32>, tensor<4x4xi32>, tensor<4x4xi32>, tensor<4x4xi32>) -> tensor<4x6x2xf32>
    return %0 : tensor<4x6x2xf32>
  }
  func.func private @body(%arg0: tensor<4x2xf32>, %arg1: tensor<6x2xf32>, %arg2: tensor<4xi32>, %arg3: tensor<4xi32>, %arg4: tensor<4xi32>, %arg5: tensor<4xi32>) -> tensor<6x2xf32> {
    %0 = stablehlo.custom_call @pmapc.ragged_all_to_all(%arg0, %arg1, %arg2, %arg3, %arg4, %arg5) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<4x2xf32>, tensor<6x2xf32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) -> tensor<6x2xf32>
    return %0 : tensor<6x2xf32>
  }
}

// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-partitions)' --split-input-file | FileCheck %s
// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-partitions{first-channel=10})' --split-input-file | FileCheck %s --check-prefix=FIRST10
// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-partitions)' --split-input-file -o %t.once
// RUN: pmapc opt %t.once --pass-pipeline='builtin.module(to-partitions)' --split-input-file -o %t.twice
// RUN: diff %t.once %t.twice

// to-partitions on lowered programs (as lower-collectives leaves them): the
// device's mesh position becomes its partition id, every collective gets its
// own channel handle, and the groups stay the devices' mesh positions. The
// last three RUN lines check that the pass is idempotent.

// Every kind on a 2x4 mesh: handles 1, 2, ... in op order (10, 11, ... with
// first-channel=10); use_global_device_ids where the op has it.
// CHECK-LABEL: module @every_collective_gets_its_own_channel
// CHECK-SAME: mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32
// CHECK: %[[RAW:.*]] = stablehlo.partition_id : tensor<ui32>
// CHECK-NEXT: stablehlo.convert %[[RAW]] : (tensor<ui32>) -> tensor<i32>
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK-SAME: use_global_device_ids
// CHECK: "stablehlo.all_gather"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK-SAME: use_global_device_ids
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK-SAME: use_global_device_ids
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// CHECK-NOT: use_global_device_ids
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 4], [4, 0], [1, 5], [5, 1], [2, 6], [6, 2], [3, 7], [7, 3]]>
// CHECK-NOT: use_global_device_ids
// CHECK-NOT: stablehlo.replica_id
// FIRST10-LABEL: module @every_collective_gets_its_own_channel
// FIRST10: "stablehlo.all_reduce"
// FIRST10-SAME: channel_handle = #stablehlo.channel_handle<handle = 10, type = 1>
// FIRST10: "stablehlo.collective_permute"
// FIRST10-SAME: channel_handle = #stablehlo.channel_handle<handle = 14, type = 1>
module @every_collective_gets_its_own_channel attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> (tensor<i32>, tensor<8xf32>, tensor<32xf32>, tensor<2xf32>, tensor<8xf32>, tensor<8xf32>) {
    %0 = stablehlo.replica_id : tensor<ui32>
    %1 = stablehlo.convert %0 : (tensor<ui32>) -> tensor<i32>
    %c = stablehlo.constant dense<4> : tensor<i32>
    %2 = stablehlo.remainder %1, %c : tensor<i32>
    %3 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %8 = stablehlo.add %arg1, %arg2 : tensor<f32>
      stablehlo.return %8 : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<8xf32>
    %4 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> : (tensor<8xf32>) -> tensor<32xf32>
    %5 = "stablehlo.reduce_scatter"(%arg0) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, scatter_dimension = 0 : i64}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %8 = stablehlo.add %arg1, %arg2 : tensor<f32>
      stablehlo.return %8 : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<2xf32>
    %6 = "stablehlo.all_to_all"(%arg0) <{concat_dimension = 0 : i64, replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<8xf32>) -> tensor<8xf32>
    %7 = "stablehlo.collective_permute"(%arg0) <{source_target_pairs = dense<[[0, 4], [4, 0], [1, 5], [5, 1], [2, 6], [6, 2], [3, 7], [7, 3]]> : tensor<8x2xi64>}> : (tensor<8xf32>) -> tensor<8xf32>
    return %2, %3, %4, %5, %6, %7 : tensor<i32>, tensor<8xf32>, tensor<32xf32>, tensor<2xf32>, tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// A variadic all_reduce (from combine-all-reduces) becomes one all_reduce per
// operand, each with the reducer and its own handle: XLA's SPMD partitioner
// takes only single-operand all-reduces in a manual region (XLA combines them
// again after partitioning). Handles count on across functions, in module
// order; every function's replica_id becomes a partition_id.
// CHECK-LABEL: module @handles_count_across_functions
// CHECK: func.func public @main(%[[X:.*]]: tensor<3xf32>, %[[Y:.*]]: tensor<2x2xf32>)
// CHECK: stablehlo.partition_id
// CHECK: %[[SUM_X:.*]] = "stablehlo.all_reduce"(%[[X]])
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
// CHECK-SAME: use_global_device_ids
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<f32>, %[[RHS:.*]]: tensor<f32>):
// CHECK-NEXT: stablehlo.maximum %[[LHS]], %[[RHS]] : tensor<f32>
// CHECK: (tensor<3xf32>) -> tensor<3xf32>
// CHECK: %[[SUM_Y:.*]] = "stablehlo.all_reduce"(%[[Y]])
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
// CHECK-SAME: use_global_device_ids
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<f32>, %[[RHS:.*]]: tensor<f32>):
// CHECK-NEXT: stablehlo.maximum %[[LHS]], %[[RHS]] : tensor<f32>
// CHECK: (tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK: return %[[SUM_X]], %[[SUM_Y]]
// CHECK: func.func private @helper
// CHECK: stablehlo.partition_id
// CHECK: "stablehlo.all_gather"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>
// CHECK-NOT: stablehlo.replica_id
module @handles_count_across_functions attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>, %arg1: tensor<2x2xf32>) -> (tensor<3xf32>, tensor<2x2xf32>, tensor<ui32>, tensor<2xui32>) {
    %id = stablehlo.replica_id : tensor<ui32>
    %0:2 = "stablehlo.all_reduce"(%arg0, %arg1) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>, tensor<2x2xf32>) -> (tensor<3xf32>, tensor<2x2xf32>)
    %1 = func.call @helper() : () -> tensor<2xui32>
    return %0#0, %0#1, %id, %1 : tensor<3xf32>, tensor<2x2xf32>, tensor<ui32>, tensor<2xui32>
  }
  func.func private @helper() -> tensor<2xui32> {
    %id = stablehlo.replica_id : tensor<ui32>
    %0 = stablehlo.reshape %id : (tensor<ui32>) -> tensor<1xui32>
    %1 = "stablehlo.all_gather"(%0) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<1xui32>) -> tensor<2xui32>
    return %1 : tensor<2xui32>
  }
}

// -----

// A program already in partition form keeps its shape; handles are numbered
// afresh in op order.
// CHECK-LABEL: module @partition_form_is_renumbered_only
// CHECK-SAME: mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32
// CHECK: stablehlo.partition_id
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
// CHECK-SAME: use_global_device_ids
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>
module @partition_form_is_renumbered_only attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32, pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<ui32>) {
    %id = stablehlo.partition_id : tensor<ui32>
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 7, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    %1 = "stablehlo.collective_permute"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<3xf32>) -> tensor<3xf32>
    return %0, %1, %id : tensor<3xf32>, tensor<3xf32>, tensor<ui32>
  }
}

// -----

// The device counts come from the mesh; without one (no maps), from what the
// module declares, else one device.
// CHECK-LABEL: module @mesh_without_collectives
// CHECK-SAME: mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32
module @mesh_without_collectives attributes {pmapc.mesh = {axis_names = ["i", "j"], axis_sizes = array<i64: 2, 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    return %arg0 : tensor<3xf32>
  }
}

// -----

// CHECK-LABEL: module @replica_form_without_mesh
// CHECK-SAME: mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32
module @replica_form_without_mesh attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    return %arg0 : tensor<3xf32>
  }
}

// -----

// CHECK-LABEL: module @no_mesh_one_device
// CHECK-SAME: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32
module @no_mesh_one_device {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    return %arg0 : tensor<3xf32>
  }
}

// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-partitions)' --split-input-file | FileCheck %s --check-prefixes=CHECK,NAMED
// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-partitions{replica-groups=dense})' --split-input-file | FileCheck %s --check-prefixes=CHECK,DENSE
// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-partitions{first-channel=10})' --split-input-file | FileCheck %s --check-prefix=FIRST10
// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-partitions)' --split-input-file -o %t.once
// RUN: pmapc opt %t.once --pass-pipeline='builtin.module(to-partitions)' --split-input-file -o %t.twice
// RUN: diff %t.once %t.twice
// RUN: pmapc opt %t.once --pass-pipeline='builtin.module(to-partitions{replica-groups=dense})' --split-input-file | FileCheck %s --check-prefixes=CHECK,EXPANDED

// to-partitions on lowered programs (as lower-collectives leaves them): the
// device's mesh position becomes its partition id and every collective gets
// its own channel handle. Replica groups that are whole mesh axes are written
// as those axes, in their order, over an `sdy.mesh` op of the module's mesh
// (NAMED, the default); with replica-groups=dense they stay the devices' mesh
// positions (DENSE). The RUN lines after the first three check that the pass
// is idempotent, and that named groups written as device ids again are the
// dense groups (EXPANDED; the mesh op stays, as other ops may name it).

// Every kind on a 2x4 mesh: handles 1, 2, ... in op order (10, 11, ... with
// first-channel=10); use_global_device_ids where the op has it.
// CHECK-LABEL: module @every_collective_gets_its_own_channel
// CHECK-SAME: mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32
// NAMED-NEXT: sdy.mesh @mesh = <["data"=2, "model"=4]> {stablehlo.mesh = {axes = [{name = "data", size = 2 : i64}, {name = "model", size = 4 : i64}]}}
// DENSE-NOT: sdy.mesh
// CHECK: %[[RAW:.*]] = stablehlo.partition_id : tensor<ui32>
// CHECK-NEXT: stablehlo.convert %[[RAW]] : (tensor<ui32>) -> tensor<i32>
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK-SAME: use_global_device_ids
// CHECK: "stablehlo.all_gather"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK-SAME: use_global_device_ids
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK-SAME: use_global_device_ids
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
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
// NAMED-NEXT: sdy.mesh @mesh = <["i"=2]>
// CHECK: func.func public @main(%[[X:.*]]: tensor<3xf32>, %[[Y:.*]]: tensor<2x2xf32>)
// CHECK: stablehlo.partition_id
// CHECK: %[[SUM_X:.*]] = "stablehlo.all_reduce"(%[[X]])
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "i">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
// CHECK-SAME: use_global_device_ids
// CHECK-NEXT: ^bb0(%[[LHS:.*]]: tensor<f32>, %[[RHS:.*]]: tensor<f32>):
// CHECK-NEXT: stablehlo.maximum %[[LHS]], %[[RHS]] : tensor<f32>
// CHECK: (tensor<3xf32>) -> tensor<3xf32>
// CHECK: %[[SUM_Y:.*]] = "stablehlo.all_reduce"(%[[Y]])
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "i">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
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

// -----

// A tuple of axes keeps its order (an all_gather's result is stacked in it),
// as JAX writes it; groups over every axis of a 2x2x2 mesh and over two axes
// that are not neighbours are named too.
// CHECK-LABEL: module @axis_order_is_kept
// NAMED-NEXT: sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
// CHECK: "stablehlo.all_gather"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "c">, #stablehlo.axis_ref<name = "a">, #stablehlo.axis_ref<name = "b">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6, 1, 3, 5, 7]]> : tensor<1x8xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 2, 4, 6, 1, 3, 5, 7]]> : tensor<1x8xi64>
// CHECK: "stablehlo.all_gather"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "a">, #stablehlo.axis_ref<name = "b">, #stablehlo.axis_ref<name = "c">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
// CHECK: "stablehlo.all_reduce"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "a">, #stablehlo.axis_ref<name = "c">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 4, 5], [2, 3, 6, 7]]> : tensor<2x4xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1, 4, 5], [2, 3, 6, 7]]> : tensor<2x4xi64>
// CHECK: "stablehlo.all_to_all"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "c">, #stablehlo.axis_ref<name = "a">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]> : tensor<2x4xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]> : tensor<2x4xi64>
module @axis_order_is_kept attributes {pmapc.mesh = {axis_names = ["a", "b", "c"], axis_sizes = array<i64: 2, 2, 2>}} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<32xf32>, tensor<32xf32>, tensor<4xf32>, tensor<4xf32>) {
    %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 2, 4, 6, 1, 3, 5, 7]]> : tensor<1x8xi64>}> : (tensor<4xf32>) -> tensor<32xf32>
    %1 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}> : (tensor<4xf32>) -> tensor<32xf32>
    %2 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1, 4, 5], [2, 3, 6, 7]]> : tensor<2x4xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %3 = "stablehlo.all_to_all"(%arg0) <{concat_dimension = 0 : i64, replica_groups = dense<[[0, 4, 1, 5], [2, 6, 3, 7]]> : tensor<2x4xi64>, split_count = 4 : i64, split_dimension = 0 : i64}> : (tensor<4xf32>) -> tensor<4xf32>
    return %0, %1, %2, %3 : tensor<32xf32>, tensor<32xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// Groups that are not whole mesh axes (axis_index_groups split the group over
// "model" in two) stay dense, as JAX keeps them; so do a collective_permute's
// pairs. With no group to name, no mesh is added.
// CHECK-LABEL: module @index_groups_stay_dense
// CHECK-NOT: sdy.mesh
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>
module @index_groups_stay_dense attributes {pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// Sibling maps of sizes 4 and 2 refine the mesh (pmapc/layout.py): the size-4
// map binds "model" and "model_1", so its collectives name both.
// CHECK-LABEL: module @refined_mesh_axes
// NAMED-NEXT: sdy.mesh @mesh = <["data"=2, "model"=2, "model_1"=2]>
// CHECK: "stablehlo.all_reduce"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">, #stablehlo.axis_ref<name = "model_1">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// CHECK: "stablehlo.all_reduce"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>
module @refined_mesh_axes attributes {pmapc.mesh = {axis_names = ["data", "model", "model_1"], axis_sizes = array<i64: 2, 2, 2>}} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %0, %1 : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// The mesh op takes the first free name; a mesh op the module already has for
// the same mesh (devices in mesh order) is named instead of a new one.
// CHECK-LABEL: module @mesh_symbol_taken
// NAMED-NEXT: sdy.mesh @mesh_1 = <["i"=2]>
// CHECK: "stablehlo.all_reduce"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh_1, axes = [#stablehlo.axis_ref<name = "i">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
module @mesh_symbol_taken attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
  func.func private @mesh() {
    return
  }
}

// -----

// CHECK-LABEL: module @mesh_op_reused
// CHECK-NEXT: sdy.mesh @grid = <["i"=2]>
// CHECK-NOT: sdy.mesh
// CHECK: "stablehlo.all_reduce"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @grid, axes = [#stablehlo.axis_ref<name = "i">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>
module @mesh_op_reused attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  sdy.mesh @grid = <["i"=2]>
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// Groups already written as mesh axes stay so, or become device ids with
// replica-groups=dense; a mesh written inline reads the same.
// CHECK-LABEL: module @named_input
// CHECK: "stablehlo.all_gather"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @m, axes = [#stablehlo.axis_ref<name = "y">, #stablehlo.axis_ref<name = "x">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>
// CHECK: "stablehlo.all_reduce"
// NAMED-SAME: replica_groups = #stablehlo.replica_group_mesh_axes<mesh = #stablehlo.mesh<axes=[<name = "x", size = 2>, <name = "y", size = 2>]>, axes = [#stablehlo.axis_ref<name = "x">]>
// DENSE-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>
// EXPANDED-SAME{LITERAL}: replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>
module @named_input attributes {pmapc.mesh = {axis_names = ["x", "y"], axis_sizes = array<i64: 2, 2>}} {
  sdy.mesh @m = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<16xf32>, tensor<4xf32>) {
    %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @m, axes = [#stablehlo.axis_ref<name = "y">, #stablehlo.axis_ref<name = "x">]>}> : (tensor<4xf32>) -> tensor<16xf32>
    %1 = "stablehlo.all_reduce"(%arg0) <{replica_groups = #stablehlo.replica_group_mesh_axes<mesh = #stablehlo.mesh<axes = [#stablehlo.mesh_axis<name = "x", size = 2>, #stablehlo.mesh_axis<name = "y", size = 2>]>, axes = [#stablehlo.axis_ref<name = "x">]>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    return %0, %1 : tensor<16xf32>, tensor<4xf32>
  }
}

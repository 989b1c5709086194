// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-replicas)' --split-input-file | FileCheck %s
// RUN: pmapc opt %s --pass-pipeline='builtin.module(to-replicas)' --split-input-file -o %t.once
// RUN: pmapc opt %t.once --pass-pipeline='builtin.module(to-replicas)' --split-input-file -o %t.twice
// RUN: diff %t.once %t.twice
// RUN: pmapc opt %t.once --pass-pipeline='builtin.module(to-partitions{replica-groups=dense},to-replicas)' --split-input-file -o %t.round-trip
// RUN: diff %t.once %t.round-trip
// RUN: pmapc opt %t.once --pass-pipeline='builtin.module(to-partitions,to-replicas)' --split-input-file | FileCheck %s

// to-replicas on lowered programs: one replica per mesh device. A program in
// partition form is converted back (with one replica, partition ids are the
// replica ids): partition_id becomes replica_id, channel handles and
// use_global_device_ids go, groups and pairs stay, but groups written as mesh
// axes (which XLA reads in partition form only) become device ids. The RUN
// lines after the first check that the pass is idempotent and undoes
// to-partitions (with named groups, but for the mesh op it leaves).

// CHECK-LABEL: module @partition_form_back_to_replicas
// CHECK-SAME: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32
// CHECK: %[[RAW:.*]] = stablehlo.replica_id : tensor<ui32>
// CHECK-NEXT: stablehlo.convert %[[RAW]] : (tensor<ui32>) -> tensor<i32>
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}>
// CHECK: "stablehlo.all_gather"
// CHECK-SAME{LITERAL}: <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}>
// CHECK: "stablehlo.reduce_scatter"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, scatter_dimension = 0 : i64}>
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME{LITERAL}: <{concat_dimension = 0 : i64, replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}>
// CHECK: "stablehlo.collective_permute"
// CHECK-SAME{LITERAL}: <{source_target_pairs = dense<[[0, 4], [4, 0], [1, 5], [5, 1], [2, 6], [6, 2], [3, 7], [7, 3]]> : tensor<8x2xi64>}>
// CHECK-NOT: stablehlo.partition_id
module @partition_form_back_to_replicas attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}} {
  func.func public @main(%arg0: tensor<8xf32>) -> (tensor<i32>, tensor<8xf32>, tensor<32xf32>, tensor<2xf32>, tensor<8xf32>, tensor<8xf32>) {
    %0 = stablehlo.partition_id : tensor<ui32>
    %1 = stablehlo.convert %0 : (tensor<ui32>) -> tensor<i32>
    %c = stablehlo.constant dense<4> : tensor<i32>
    %2 = stablehlo.remainder %1, %c : tensor<i32>
    %3 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %8 = stablehlo.add %arg1, %arg2 : tensor<f32>
      stablehlo.return %8 : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<8xf32>
    %4 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> : (tensor<8xf32>) -> tensor<32xf32>
    %5 = "stablehlo.reduce_scatter"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, scatter_dimension = 0 : i64, use_global_device_ids}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %8 = stablehlo.add %arg1, %arg2 : tensor<f32>
      stablehlo.return %8 : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<2xf32>
    %6 = "stablehlo.all_to_all"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>, concat_dimension = 0 : i64, replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<8xf32>) -> tensor<8xf32>
    %7 = "stablehlo.collective_permute"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>, source_target_pairs = dense<[[0, 4], [4, 0], [1, 5], [5, 1], [2, 6], [6, 2], [3, 7], [7, 3]]> : tensor<8x2xi64>}> : (tensor<8xf32>) -> tensor<8xf32>
    return %2, %3, %4, %5, %6, %7 : tensor<i32>, tensor<8xf32>, tensor<32xf32>, tensor<2xf32>, tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// lower-collectives' target-neutral output only gains the device counts.
// CHECK-LABEL: module @lowered_program_gets_replica_counts
// CHECK-SAME: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32
// CHECK: stablehlo.replica_id
// CHECK: "stablehlo.all_reduce"
// CHECK-SAME{LITERAL}: <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}>
module @lowered_program_gets_replica_counts attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 2>}} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<ui32>) {
    %id = stablehlo.replica_id : tensor<ui32>
    %0 = "stablehlo.all_reduce"(%arg0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    return %0, %id : tensor<3xf32>, tensor<ui32>
  }
}

// -----

// Without a mesh (no maps), the devices the module declares, else one.
// CHECK-LABEL: module @partition_form_without_mesh
// CHECK-SAME: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32
module @partition_form_without_mesh attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
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

// REQUIRES: targets
// RUN: pmapc plan %s --topology tpu:v5e:2x4 | FileCheck %s
// RUN: pmapc plan %s --topology gpu:h100:1x2x8 | FileCheck %s --check-prefix=GPU
// RUN: not pmapc plan %s --topology tpu:v5e:16x16 2>&1 | FileCheck %s --check-prefix=SLICE

// `--topology` compiles the module with XLA:TPU (a v5e 2x4 slice: 8 chips on 2 hosts)
// or XLA:GPU (2 hosts x 8 H100s, the mesh on the first 8) on this CPU machine, and
// shows what that compiler runs for each collective pmapc emits: on TPU, XLA's
// combiner merges the two psums over 'data' as XLA:CPU's does.
// CHECK:      mesh data=2xmodel=4 (8 devices); bytes per device per execution
// CHECK:      1  all_reduce  model  2 x 4   1        48 B  48 B      48 B     {{.*}}  X1 all-reduce{{$}}
// CHECK-NEXT: 2  all_reduce  data   4 x 2   1        32 B  32 B      32 B     {{.*}}  X2 all-reduce, combined with 3{{$}}
// CHECK-NEXT: 3  all_reduce  data   4 x 2   1        32 B  32 B      32 B     {{.*}}  X2 all-reduce, combined with 2{{$}}
// CHECK:      what XLA runs (the HLO it compiled and scheduled):
// CHECK:      per run: pmapc emits 3 collectives, sent 112 B; XLA runs 2, sent 112 B per device

// XLA:GPU goes further: the psum over 'model' whose result is then summed over
// 'data' becomes one all-reduce over both axes (XLA's own, in no row of pmapc's),
// so a device sends 88 B where pmapc's program says 112 B.
// GPU:      what XLA runs (the HLO it compiled and scheduled):
// GPU-DAG:  all-reduce{{(-start)?}} {{ +}}data,model  1 x 8   1        56 B  %{{[^ ]+}}  - (XLA's own)
// GPU-DAG:  all-reduce{{(-start)?}} {{ +}}data        4 x 2   1        32 B  %{{[^ ]+}}  2
// GPU:      per run: pmapc emits 3 collectives, sent 112 B; XLA runs 2, sent 88 B per device

// XLA:TPU compiles for a whole v5e slice only: 8 of its 256 chips are refused.
// SLICE: pmapc plan: error: XLA:TPU refused to compile the nest for 8 of the topology's 256 devices: {{.*}}; compile for the whole topology (a nest of 256 positions) or name a topology of 8 devices
// PMAPC-ONLY:     per run: 3 collectives, sent 112 B, received 112 B, minimum 112 B per device
// PMAPC-ONLY-NOT: XLA
module {
  func.func public @main(%arg0: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
    %0:2 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0, 0]}} : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
    return %0#0, %0#1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  }
  func.func private @outer(%arg0: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    %0:2 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0, 0]}} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    return %0#0, %0#1 : tensor<4x8xf32>, tensor<4x8xf32>
  }
  func.func private @inner(%arg0: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %1 = stablehlo.multiply %arg0, %arg0 : tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %3 = stablehlo.custom_call @pmapc.psum(%1) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<8xf32>) -> tensor<8xf32>
    return %2, %3 : tensor<8xf32>, tensor<8xf32>
  }
}

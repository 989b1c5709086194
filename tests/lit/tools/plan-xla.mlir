// RUN: pmapc plan %s --xla | FileCheck %s
// RUN: pmapc opt %s --pass-pipeline='builtin.module(pmapc-to-stablehlo{target=replicas})' | pmapc plan - --xla | FileCheck %s --check-prefix=REPLICAS
// RUN: pmapc plan %s | FileCheck %s --check-prefix=PMAPC-ONLY

// `--xla` compiles the module for its 2x4 mesh (8 virtual CPU devices) and
// shows, next to each collective pmapc emits, the one XLA runs for it. The
// partition form splits the variadic psum over 'data' that combine-all-reduces
// made of rows 2 and 3; XLA's combiner makes it one again (8 f32 = 32 B each).
// CHECK:      mesh data=2xmodel=4 (8 devices); bytes per device per execution
// CHECK-NEXT: #  op          axes   groups  per run  sent  received  minimum  source  XLA runs
// CHECK-NEXT: 1  all_reduce  model  2 x 4   1        48 B  48 B      48 B     {{.*}}plan-xla.mlir:{{[0-9]+}}  X1 all-reduce{{$}}
// CHECK-NEXT: 2  all_reduce  data   4 x 2   1        32 B  32 B      32 B     {{.*}}plan-xla.mlir:{{[0-9]+}}  X2 all-reduce, combined with 3{{$}}
// CHECK-NEXT: 3  all_reduce  data   4 x 2   1        32 B  32 B      32 B     {{.*}}plan-xla.mlir:{{[0-9]+}}  X2 all-reduce, combined with 2{{$}}
// CHECK-NEXT: per run: 3 collectives, sent 112 B, received 112 B, minimum 112 B per device
// CHECK-EMPTY:
// CHECK-NEXT: what XLA runs (the HLO it compiled and scheduled):
// CHECK-NEXT: X   op          axes   groups  per run  sent  HLO  runs
// CHECK-NEXT: X1  all-reduce  model  2 x 4   1        48 B  %{{[^ ]+}}  1{{$}}
// CHECK-NEXT: X2  all-reduce  data   4 x 2   1        64 B  %{{[^ ]+}}  2, 3 (combined)
// CHECK-NEXT: per run: pmapc emits 3 collectives, sent 112 B; XLA runs 2, sent 112 B per device

// In the replica form pmapc emits the variadic psum as one collective, and XLA
// runs it as it is.
// REPLICAS:      1  all_reduce  model  2 x 4  1  48 B  48 B  48 B  {{.*}}  X1 all-reduce{{$}}
// REPLICAS-NEXT: 2  all_reduce  data   4 x 2  1  64 B  64 B  64 B  {{.*}}  X2 all-reduce{{$}}
// REPLICAS:      per run: pmapc emits 2 collectives, sent 112 B; XLA runs 2, sent 112 B per device

// Without `--xla`, the plan is pmapc's alone.
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

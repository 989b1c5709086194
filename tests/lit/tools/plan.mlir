// RUN: pmapc plan %s --picture --svg %t.svg | FileCheck %s
// RUN: FileCheck %s --check-prefix=SVG < %t.svg
// RUN: pmapc opt %s --pass-pipeline='builtin.module(pmapc-to-stablehlo{target=replicas})' | pmapc plan - | FileCheck %s --check-prefix=LOWERED
// RUN: not pmapc plan %S/Inputs/does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=MISSING

// The plan of a 2x4 program: one row per collective after the passes, with
// the mesh axes of its groups, the bytes per device, and the line it came
// from; then the totals. 8 f32 = 32 B per device.
// CHECK:      mesh data=2xmodel=4 (8 devices); bytes per device per execution
// CHECK-NEXT: #  op                  axes        groups   per run  sent   received  minimum  source
// CHECK-NEXT: 1  all_reduce          model       2 x 4    1        48 B   48 B      48 B     {{.*}}plan.mlir:[[# @LINE + 32]]
// CHECK-NEXT: 2  collective_permute  model       8 pairs  1        32 B   32 B      32 B     {{.*}}plan.mlir:[[# @LINE + 32]]
// CHECK-NEXT: 3  all_gather          data,model  1 x 8    1        224 B  224 B     224 B    {{.*}}plan.mlir:[[# @LINE + 32]]
// CHECK-NEXT: 4  all_reduce          data        4 x 2    1        32 B   32 B      32 B     {{.*}}plan.mlir:[[# @LINE + 25]]
// CHECK-NEXT: per run: 4 collectives, sent 336 B, received 336 B, minimum 336 B per device
// CHECK-EMPTY:
// CHECK-NEXT: 1 all_reduce over model
// CHECK-NEXT:     A   A   A   A
// CHECK-NEXT:     B   B   B   B
// CHECK-EMPTY:
// CHECK-NEXT: 2 collective_permute over model
// CHECK-NEXT:    >1  >2  >3  >0
// CHECK-NEXT:    >5  >6  >7  >4

// SVG: <svg xmlns="http://www.w3.org/2000/svg"
// SVG-COUNT-32: <rect class="device"
// SVG-NOT: <rect class="device"

// LOWERED: per run: 4 collectives, sent 336 B, received 336 B, minimum 336 B per device

// MISSING: pmapc plan: error: could not open input file '{{.*}}does-not-exist.mlir': no such file
module {
  func.func public @main(%arg0: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@outer], api_version = 4 : i32, backend_config = {axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]}} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
  func.func private @outer(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.custom_call @pmapc.map(%arg0) {called_computations = [@inner], api_version = 4 : i32, backend_config = {axis_name = "model", axis_size = 4 : i64, in_axes = [0], out_axes = [0]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.custom_call @pmapc.psum(%0) {api_version = 4 : i32, backend_config = {axes = ["data"]}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
  func.func private @inner(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, backend_config = {axes = ["model"]}} : (tensor<8xf32>) -> tensor<8xf32>
    %1 = stablehlo.custom_call @pmapc.ppermute(%0) {api_version = 4 : i32, backend_config = {axes = ["model"], perm = [[0, 1], [1, 2], [2, 3], [3, 0]]}} : (tensor<8xf32>) -> tensor<8xf32>
    %2 = stablehlo.custom_call @pmapc.all_gather(%1) {api_version = 4 : i32, backend_config = {axes = ["data", "model"], all_gather_dimension = 0 : i64, tiled = true}} : (tensor<8xf32>) -> tensor<64xf32>
    %3 = stablehlo.slice %2 [0:8] : (tensor<64xf32>) -> tensor<8xf32>
    return %3 : tensor<8xf32>
  }
}

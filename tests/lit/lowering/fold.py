# RUN: %PYTHON %s | FileCheck %s

# A nest folded onto fewer devices (pmapc.fold_onto): the outermost map records
# the fold, each inner map is a map over its device factor whose body takes the
# device's block of positions, and each collective is a local computation over
# the block and, where its group spans devices, a collective over the devices.
# The 2x4 nest onto 2 devices folds all of 'model' onto each device; onto 4,
# two of its positions.

import os
import sys

import pmapc

pmapc.use_host_devices(8)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from show import show  # noqa: E402


def nested(body):
    return pmapc.pmap(pmapc.pmap(body, axis_name="model"), axis_name="data")


def folded(name, count, body):
    with pmapc.fold_onto(jax.devices()[:count]):
        show(f"{name} onto {count}", nested(body), X)


X = np.zeros((2, 4, 8), np.float32)
RING = [(i, (i + 1) % 4) for i in range(4)]

folded("psum", 2, lambda x: lax.psum(x, ("data", "model")))
# CHECK-LABEL: TEST: psum onto 2
# CHECK:         @pmapc.map(%arg0) {{.*}}axis_name = "data", axis_size = 2 : i64, folded = {model = 4 : i64}
# CHECK:       func.func private @{{.*}}(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32>
# CHECK-NOT:     @pmapc.map
# CHECK:         stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [0] : (tensor<4x8xf32>
# CHECK:         @pmapc.psum({{.*}}) {{.*}}axes = ["data"]}

folded("psum", 4, lambda x: lax.psum(x, ("data", "model")))
# CHECK-LABEL: TEST: psum onto 4
# CHECK:         @pmapc.map(%arg0) {{.*}}folded = {model = 2 : i64}
# CHECK:         @pmapc.map({{.*}}axis_name = "model", axis_size = 2 : i64
# CHECK-SAME:      (tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
# CHECK:       func.func private @{{.*}}(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32>
# CHECK:         stablehlo.reduce(%arg0 {{.*}} across dimensions = [0] : (tensor<2x8xf32>
# CHECK:         @pmapc.psum({{.*}}) {{.*}}axes = ["data", "model"]}

folded("pmax_pmin", 4, lambda x: (lax.pmax(x, "model"), lax.pmin(x, ("model", "data"))))
# CHECK-LABEL: TEST: pmax_pmin onto 4
# CHECK:       func.func private @{{.*}}(%arg0: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
# CHECK:         stablehlo.reduce(%arg0 {{.*}}) applies stablehlo.maximum across dimensions = [0]
# CHECK:         @pmapc.pmax({{.*}}axes = ["model"]}
# CHECK:         stablehlo.reduce(%arg0 {{.*}}) applies stablehlo.minimum across dimensions = [0]
# CHECK:         @pmapc.pmin({{.*}}axes = ["model", "data"]}

folded("grouped_psum", 2, lambda x: lax.psum(x, "model", axis_index_groups=[[0, 2], [1, 3]]))
# Groups within the block: each position sums its group's rows, no collective.
# CHECK-LABEL: TEST: grouped_psum onto 2
# CHECK:       func.func private @{{.*}}(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32>
# CHECK-NOT:     @pmapc.
# CHECK:         stablehlo.slice %{{.*}} [0:1, 0:8]
# CHECK:         stablehlo.slice %{{.*}} [2:3, 0:8]
# CHECK:         stablehlo.reduce({{.*}}) applies stablehlo.add across dimensions = [0] : (tensor<2x8xf32>
# CHECK:         stablehlo.slice %{{.*}} [1:2, 0:8]
# CHECK:         stablehlo.slice %{{.*}} [3:4, 0:8]

folded("all_gather", 2, lambda x: lax.all_gather(x, "model"))
# A gather within the block moves nothing.
# CHECK-LABEL: TEST: all_gather onto 2
# CHECK:       func.func private @{{.*}}(%arg0: tensor<4x8xf32>) -> tensor<4x4x8xf32>
# CHECK-NOT:     @pmapc.all_gather
# CHECK:       }

folded("all_gather", 4, lambda x: lax.all_gather(x, "model"))
# CHECK-LABEL: TEST: all_gather onto 4
# CHECK:       func.func private @{{.*}}(%arg0: tensor<2x8xf32>) -> tensor<2x4x8xf32>
# CHECK:         @pmapc.all_gather(%arg0) {{.*}}axes = ["model"]{{.*}} -> tensor<2x2x8xf32>

folded("ppermute", 2, lambda x: lax.ppermute(x, "model", RING))
# A ring within the block is a rotation of its rows.
# CHECK-LABEL: TEST: ppermute onto 2
# CHECK:       func.func private @{{.*}}(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32>
# CHECK-NOT:     @pmapc.
# CHECK:         stablehlo.slice %{{.*}} [3:4, 0:8]
# CHECK:         stablehlo.slice %{{.*}} [0:1, 0:8]
# CHECK:         stablehlo.slice %{{.*}} [1:2, 0:8]
# CHECK:         stablehlo.slice %{{.*}} [2:3, 0:8]

folded("ppermute", 4, lambda x: lax.ppermute(x, "model", RING))
# Across blocks: a block's second row goes to the next device's first, a ppermute
# of the devices; its first row moves within the block.
# CHECK-LABEL: TEST: ppermute onto 4
# CHECK:       func.func private @{{.*}}(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32>
# CHECK-NOT:     @pmapc.all_gather
# CHECK:         stablehlo.slice %arg0 [1:2, 0:8]
# CHECK:         @pmapc.ppermute({{.*}}axes = ["model"], perm = {{\[\[}}0, 1], [1, 0]]}
# CHECK:         stablehlo.slice %arg0 [0:1, 0:8]
# CHECK:         stablehlo.concatenate

folded("psum_scatter", 2, lambda x: lax.psum_scatter(x, "model", tiled=True))
# CHECK-LABEL: TEST: psum_scatter onto 2
# CHECK:       func.func private @{{.*}}(%arg0: tensor<4x8xf32>) -> tensor<4x2xf32>
# CHECK-NOT:     @pmapc.
# CHECK:         stablehlo.slice %{{.*}} [0:2]
# CHECK:         stablehlo.slice %{{.*}} [2:4]
# CHECK:         stablehlo.slice %{{.*}} [4:6]
# CHECK:         stablehlo.slice %{{.*}} [6:8]

folded("psum_scatter", 4, lambda x: lax.psum_scatter(x, "model", tiled=True))
# The block's rows summed, then a reduce-scatter of the devices that leaves each the
# chunks of its two positions.
# CHECK-LABEL: TEST: psum_scatter onto 4
# CHECK:       func.func private @{{.*}}(%arg0: tensor<2x8xf32>) -> tensor<2x2xf32>
# CHECK:         stablehlo.reduce(%arg0 {{.*}} across dimensions = [0] : (tensor<2x8xf32>
# CHECK:         @pmapc.psum_scatter({{.*}}axes = ["model"]{{.*}} : (tensor<8xf32>) -> tensor<4xf32>

folded("all_to_all", 2, lambda x: lax.all_to_all(x, "model", 0, 0, tiled=True))
# CHECK-LABEL: TEST: all_to_all onto 2
# CHECK:       func.func private @{{.*}}(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32>
# CHECK-NOT:     @pmapc.
# CHECK:       }

folded("all_to_all", 4, lambda x: lax.all_to_all(x, "model", 0, 0, tiled=True))
# The chunks for each device's two positions travel in one all_to_all of the devices.
# CHECK-LABEL: TEST: all_to_all onto 4
# CHECK:       func.func private @{{.*}}(%arg0: tensor<2x8xf32>) -> tensor<2x8xf32>
# CHECK-NOT:     @pmapc.all_gather
# CHECK:         @pmapc.all_to_all({{.*}}axes = ["model"], concat_axis = 0 : i64, split_axis = 2 : i64

folded("axis_index", 4, lambda x: x + lax.axis_index("model"))
# The position along 'model': the device's index times 2 plus the position in its block.
# CHECK-LABEL: TEST: axis_index onto 4
# CHECK:         %[[DEVICE:.*]] = stablehlo.custom_call @pmapc.axis_index() {{.*}}axes = ["model"]
# CHECK:         %[[LOCAL:.*]] = stablehlo.iota dim = 0 : tensor<2xi32>
# CHECK:         stablehlo.multiply %[[DEVICE]], %{{.*}} : tensor<i32>

# RUN: %PYTHON %s | FileCheck %s

# JAX's axis_index_groups become the collective's `axis_index_groups`
# parameter; the group size JAX derives from them sizes the results.

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))

import numpy as np
from jax import lax
from show import show

import pmapc


def nested(body):
    inner = pmapc.pmap(body, axis_name="model")
    return pmapc.pmap(inner, axis_name="data")


X = np.zeros((2, 4, 8), np.float32)
PAIRS = [[0, 1], [2, 3]]

show(
    "psum_pmax_pmin",
    nested(
        lambda x: (
            lax.psum(x, "model", axis_index_groups=PAIRS),
            lax.pmax(x, ("data", "model"), axis_index_groups=[[0, 1, 4, 5], [2, 3, 6, 7]]),
            lax.pmin(x, ("model", "data"), axis_index_groups=[[7, 0], [1, 2, 3, 4, 5, 6]]),
        )
    ),
    X,
)
# CHECK-LABEL: TEST: psum_pmax_pmin
# CHECK:       stablehlo.custom_call @pmapc.psum(%arg0)
# CHECK-SAME{LITERAL}: backend_config = {axes = ["model"], axis_index_groups = [[0, 1], [2, 3]]}
# CHECK:       stablehlo.custom_call @pmapc.pmax(%arg0)
# CHECK-SAME:      backend_config = {axes = ["data", "model"],
# CHECK-SAME{LITERAL}: axis_index_groups = [[0, 1, 4, 5], [2, 3, 6, 7]]}
# CHECK:       stablehlo.custom_call @pmapc.pmin(%arg0)
# CHECK-SAME:      backend_config = {axes = ["model", "data"],
# CHECK-SAME{LITERAL}: axis_index_groups = [[7, 0], [1, 2, 3, 4, 5, 6]]}

show("pmean", nested(lambda x: lax.pmean(x, "model", axis_index_groups=PAIRS)), X)
# pmean divides by the size of the first index group (JAX's psum(1, ...)), 2.
# CHECK-LABEL: TEST: pmean
# CHECK:         %[[SUM:.*]] = stablehlo.custom_call @pmapc.psum(%arg0)
# CHECK-SAME{LITERAL}: axis_index_groups = [[0, 1], [2, 3]]
# CHECK:         stablehlo.constant dense<2.000000e+00>
# CHECK:         stablehlo.divide %[[SUM]]

show(
    "gather_scatter_all_to_all",
    nested(
        lambda x: (
            lax.all_gather(x, "model", axis_index_groups=PAIRS),
            lax.psum_scatter(x, "model", axis_index_groups=PAIRS, tiled=True),
            lax.all_to_all(x, "model", 0, 0, axis_index_groups=PAIRS, tiled=True),
        )
    ),
    X,
)
# CHECK-LABEL: TEST: gather_scatter_all_to_all
# CHECK:         stablehlo.custom_call @pmapc.all_gather(%arg0)
# CHECK-SAME:      all_gather_dimension = 0 : i64, axes = ["model"],
# CHECK-SAME{LITERAL}: axis_index_groups = [[0, 1], [2, 3]], tiled = false
# CHECK-SAME:      (tensor<8xf32>) -> tensor<2x8xf32>
# CHECK:         stablehlo.custom_call @pmapc.psum_scatter(%arg0)
# CHECK-SAME{LITERAL}: axes = ["model"], axis_index_groups = [[0, 1], [2, 3]],
# CHECK-SAME:      scatter_dimension = 0 : i64, tiled = true
# CHECK-SAME:      (tensor<8xf32>) -> tensor<4xf32>
# CHECK:         stablehlo.custom_call @pmapc.all_to_all(%arg0)
# CHECK-SAME{LITERAL}: axes = ["model"], axis_index_groups = [[0, 1], [2, 3]], concat_axis = 0 : i64
# CHECK-SAME:      (tensor<8xf32>) -> tensor<8xf32>

show(
    "lowered_groups",
    nested(
        lambda x: lax.psum(x, ("model", "data"), axis_index_groups=[[0, 1, 4, 5], [2, 3, 6, 7]])
    ),
    X,
    stage="lower-collectives",
)
# The replica groups JAX 0.4.30 emits for the same program.
# CHECK-LABEL: TEST: lowered_groups
# CHECK:         "stablehlo.all_reduce"
# CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 4, 2, 6], [1, 5, 3, 7]]>

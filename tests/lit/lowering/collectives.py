# RUN: %PYTHON %s | FileCheck %s

# Every JAX collective in a body becomes its named @pmapc.<kind> op, with
# JAX's parameters; axes stay names, in the order the user wrote them.

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

show(
    "psum_pmax_pmin",
    nested(lambda x: (lax.psum(x, "model"), lax.pmax(x, "data"), lax.pmin(x, ("model", "data")))),
    X,
)
# CHECK-LABEL: TEST: psum_pmax_pmin
# CHECK:       func.func private @{{.*}}(%arg0: tensor<8xf32>)
# CHECK:         stablehlo.custom_call @pmapc.psum(%arg0){{.*}}backend_config = {axes = ["model"]}
# CHECK:         stablehlo.custom_call @pmapc.pmax(%arg0){{.*}}backend_config = {axes = ["data"]}
# CHECK:         stablehlo.custom_call @pmapc.pmin(%arg0)
# CHECK-SAME:      backend_config = {axes = ["model", "data"]}

show("pmean", nested(lambda x: lax.pmean(x, ("data", "model"))), X)
# pmean is a psum over both axes, divided by the group size.
# CHECK-LABEL: TEST: pmean
# CHECK:         %[[SUM:.*]] = stablehlo.custom_call @pmapc.psum(%arg0)
# CHECK-SAME:      axes = ["data", "model"]
# CHECK:         stablehlo.divide %[[SUM]]

show(
    "gather_scatter",
    nested(
        lambda x: (
            lax.all_gather(x, "model", axis=0, tiled=True),
            lax.psum_scatter(x, "model", tiled=True),
        )
    ),
    X,
)
# CHECK-LABEL: TEST: gather_scatter
# CHECK:         stablehlo.custom_call @pmapc.all_gather(%arg0)
# CHECK-SAME:      all_gather_dimension = 0 : i64, axes = ["model"], tiled = true
# CHECK-SAME:      -> tensor<32xf32>
# CHECK:         stablehlo.custom_call @pmapc.psum_scatter(%arg0)
# CHECK-SAME:      axes = ["model"], scatter_dimension = 0 : i64, tiled = true
# CHECK-SAME:      -> tensor<2xf32>

show(
    "all_to_all_ppermute_axis_index",
    nested(
        lambda x: (
            lax.all_to_all(x.reshape(4, 2), "model", 0, 1),
            lax.ppermute(x, "data", [(0, 1), (1, 0)]),
            lax.axis_index(("model", "data")),
        )
    ),
    X,
)
# CHECK-LABEL: TEST: all_to_all_ppermute_axis_index
# Untiled all_to_all: JAX adds a unit dimension and exchanges in place.
# CHECK:         stablehlo.custom_call @pmapc.all_to_all(
# CHECK-SAME:      axes = ["model"], concat_axis = 2 : i64, split_axis = 0 : i64, tiled = true
# CHECK-SAME:      (tensor<4x2x1xf32>) -> tensor<1x2x4xf32>
# CHECK:         stablehlo.custom_call @pmapc.ppermute(%arg0)
# CHECK-SAME:      axes = ["data"], perm = {{\[\[}}0, 1], [1, 0]]
# JAX writes the index over a tuple from the index over each axis, in order.
# CHECK:         %[[DATA:.*]] = stablehlo.custom_call @pmapc.axis_index(){{.*}}axes = ["data"]
# CHECK:         stablehlo.custom_call @pmapc.axis_index(){{.*}}axes = ["model"]

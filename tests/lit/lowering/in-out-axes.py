# RUN: %PYTHON %s | FileCheck %s

# in_axes and out_axes: normalized to non-negative dimensions, `unit` for
# None, one entry per flattened pytree leaf; static arguments are baked in.

import os
import sys
from functools import partial

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))

import numpy as np
from jax import lax
from show import show

import pmapc


@partial(pmapc.pmap, axis_name="data", in_axes=(1, None), out_axes=-1)
def moved(x, w):
    return x * w


show("in_axes_out_axes", moved, np.zeros((3, 2), np.float32), np.zeros((3,), np.float32))
# CHECK-LABEL: TEST: in_axes_out_axes
# CHECK:       func.func public @main(%arg0: tensor<3x2xf32>, %arg1: tensor<3xf32>)
# CHECK-SAME:      -> (tensor<3x2xf32> {{.*}})
# CHECK:         stablehlo.custom_call @pmapc.map(%arg0, %arg1)
# CHECK-SAME:      in_axes = [1, unit], out_axes = [1]


@partial(pmapc.pmap, axis_name="data", in_axes=({"a": 0, "b": None},))
def tree(params):
    inner = pmapc.pmap(
        lambda a, b: (lax.psum(a, "model"), a + b),
        axis_name="model",
        in_axes=(0, None),
        out_axes=(None, 0),
    )
    return inner(params["a"], params["b"])


show(
    "pytrees_and_unmapped_outputs",
    tree,
    {"a": np.zeros((2, 4), np.float32), "b": np.zeros((), np.float32)},
)
# CHECK-LABEL: TEST: pytrees_and_unmapped_outputs
# CHECK:         stablehlo.custom_call @pmapc.map(%arg0, %arg1)
# CHECK-SAME:      axis_name = "data"{{.*}}in_axes = [0, unit], out_axes = [0, 0]
# CHECK:       func.func private @tree(
# CHECK:         stablehlo.custom_call @pmapc.map(
# CHECK-SAME:      axis_name = "model"{{.*}}in_axes = [0, unit], out_axes = [unit, 0]
# CHECK-SAME:      -> (tensor<f32>, tensor<4xf32>)


@partial(pmapc.pmap, axis_name="data", static_broadcasted_argnums=1)
def scaled(x, factor):
    return x * factor


show("static_argument", scaled, np.zeros((2, 3), np.float32), 7.0)
# CHECK-LABEL: TEST: static_argument
# CHECK:       func.func public @main(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32> {{.*}})
# CHECK:       func.func private @scaled(%arg0: tensor<3xf32>)
# CHECK:         stablehlo.constant dense<7.000000e+00>

# RUN: %PYTHON %s | FileCheck %s

# The tracer keeps maps named: each pmapc.pmap call is a @pmapc.map calling
# its body, nested at any depth; values of an outer body used inside an inner
# one become unmapped operands.

import os
import sys
from functools import partial

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))

import jax.numpy as jnp
import numpy as np
from show import show

import pmapc


@partial(pmapc.pmap, axis_name="data")
def two_levels(x):
    return pmapc.pmap(lambda y: y * 2, axis_name="model")(x)


show("two_levels", two_levels, np.zeros((2, 4, 3), np.float32))
# CHECK-LABEL: TEST: two_levels
# CHECK:       func.func public @main(%arg0: tensor<2x4x3xf32>) -> (tensor<2x4x3xf32> {{.*}})
# CHECK:         stablehlo.custom_call @pmapc.map(%arg0)
# CHECK-SAME:      axis_name = "data", axis_size = 2 : i64, in_axes = [0], out_axes = [0]
# CHECK-SAME:      called_computations = [@two_levels]
# CHECK:       func.func private @two_levels(%arg0: tensor<4x3xf32>) -> tensor<4x3xf32>
# CHECK:         stablehlo.custom_call @pmapc.map(%arg0)
# CHECK-SAME:      axis_name = "model", axis_size = 4 : i64
# CHECK:       func.func private @{{.*}}(%arg0: tensor<3xf32>) -> tensor<3xf32>
# CHECK:         stablehlo.multiply


@partial(pmapc.pmap, axis_name="a")
def three_levels(x):
    @partial(pmapc.pmap, axis_name="b")
    def middle(y):
        return pmapc.pmap(lambda z: z + jnp.sum(y), axis_name="c")(y)

    return middle(x)


show("three_levels_with_closure", three_levels, np.zeros((2, 2, 2, 5), np.float32))
# CHECK-LABEL: TEST: three_levels_with_closure
# CHECK:       stablehlo.custom_call @pmapc.map(%arg0){{.*}}axis_name = "a", axis_size = 2
# CHECK:       func.func private @three_levels(
# CHECK:         stablehlo.custom_call @pmapc.map(%arg0){{.*}}axis_name = "b", axis_size = 2
# CHECK:       func.func private @middle(%arg0: tensor<2x5xf32>)
# The closed-over outer value `y` is an unmapped (unit) operand of the inner
# map; the sum of it is computed in the inner body.
# CHECK:         stablehlo.custom_call @pmapc.map(%arg0, %arg0)
# CHECK-SAME:      axis_name = "c", axis_size = 2 : i64, in_axes = [unit, 0]
# CHECK:       func.func private @{{.*}}(%arg0: tensor<2x5xf32>, %arg1: tensor<5xf32>)
# CHECK:         stablehlo.reduce(%arg0

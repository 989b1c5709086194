# RUN: %PYTHON %s | FileCheck %s

# Element types through the tracer: a psum of bools counts in int32 (JAX's
# rule), pmax of bools stays bool, bf16 and int32 stay as they are, and a
# Python constant returned from a map settles to int32/float32.

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))

import jax.numpy as jnp
import numpy as np
from jax import lax
from show import show

import pmapc


def nested(body):
    return pmapc.pmap(pmapc.pmap(body, axis_name="model"), axis_name="data")


show(
    "bools",
    nested(lambda b: (lax.psum(b, "model"), lax.pmax(b, "data"))),
    np.zeros((2, 4, 3), np.bool_),
)
# CHECK-LABEL: TEST: bools
# CHECK:         %[[COUNT:.*]] = stablehlo.convert %arg0 : (tensor<3xi1>) -> tensor<3xi32>
# CHECK:         stablehlo.custom_call @pmapc.psum(%[[COUNT]]){{.*}} -> tensor<3xi32>
# CHECK:         stablehlo.custom_call @pmapc.pmax(%arg0){{.*}} -> tensor<3xi1>

show(
    "bf16_and_int32",
    nested(lambda x, i: (lax.pmean(x, "data"), lax.psum(i, "model"))),
    np.zeros((2, 4, 3), jnp.bfloat16),
    np.zeros((2, 4), np.int32),
)
# CHECK-LABEL: TEST: bf16_and_int32
# CHECK:       func.func public @main(%arg0: tensor<2x4x3xbf16>, %arg1: tensor<2x4xi32>)
# CHECK:         stablehlo.custom_call @pmapc.psum(%arg0){{.*}} -> tensor<3xbf16>
# CHECK:         stablehlo.custom_call @pmapc.psum(%arg1){{.*}} -> tensor<i32>

show("python_constants", nested(lambda x: (x * 2.0, 7)), np.zeros((2, 4), np.float32))
# CHECK-LABEL: TEST: python_constants
# CHECK:       func.func public @main(%arg0: tensor<2x4xf32>)
# CHECK-SAME:      -> (tensor<2x4xf32> {jax.result_info = "result[0]"},
# CHECK-SAME:          tensor<2x4xi32> {jax.result_info = "result[1]"})

show(
    "complex64", nested(lambda z: lax.psum(z, ("data", "model"))), np.zeros((2, 4, 3), np.complex64)
)
# CHECK-LABEL: TEST: complex64
# CHECK:       func.func public @main(%arg0: tensor<2x4x3xcomplex<f32>>)
# CHECK:         stablehlo.custom_call @pmapc.psum(%arg0){{.*}}axes = ["data", "model"]
# CHECK-SAME:      (tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>>

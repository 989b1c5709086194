# RUN: %PYTHON %s | FileCheck %s

# Maps are a JAX primitive, so transformations around them and inside bodies
# trace to maps of transformed bodies: control flow stays StableHLO, jit
# becomes a call, grad a map of the JVP and a map of its transpose.

import os
import sys
from functools import partial

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from show import show

import pmapc

X = np.zeros((2, 4, 3), np.float32)


@partial(pmapc.pmap, axis_name="data")
def control_flow(x):
    def body(i, carry):
        return lax.cond(i % 2 == 0, lambda c: lax.psum(c, "data"), lambda c: c * 2, carry)

    return lax.fori_loop(0, 3, body, x)


show("control_flow", control_flow, X)
# CHECK-LABEL: TEST: control_flow
# CHECK:       func.func private @control_flow(
# CHECK:         stablehlo.while
# CHECK:           stablehlo.case
# CHECK:             stablehlo.custom_call @pmapc.psum({{.*}}axes = ["data"]


@partial(pmapc.pmap, axis_name="data")
def inner_under_jit(x):
    return jax.jit(pmapc.pmap(lambda y: lax.psum(y, "model"), axis_name="model"))(x)


show("inner_map_under_jit", inner_under_jit, X)
# CHECK-LABEL: TEST: inner_map_under_jit
# CHECK:       func.func private @inner_under_jit(
# CHECK:         call @[[JITTED:.*]](%arg0)
# CHECK:       func.func private @[[JITTED]](
# CHECK:         stablehlo.custom_call @pmapc.map({{.*}}axis_name = "model"


def loss(x):
    return jnp.sum(pmapc.pmap(lambda y: jnp.sin(lax.psum(y, "i")), axis_name="i")(x))


show("grad_around_the_map", jax.grad(loss), np.zeros((8, 3), np.float32))
# The forward map also returns the residual it saves (stacked at 0); the
# backward map transposes psum to psum.
# CHECK-LABEL: TEST: grad_around_the_map
# CHECK:       func.func public @main(%arg0: tensor<8x3xf32>) -> (tensor<8x3xf32> {{.*}})
# CHECK:         stablehlo.custom_call @pmapc.map(%arg0)
# CHECK-SAME:      axis_name = "i"{{.*}}out_axes = [0, 0]
# CHECK:         stablehlo.custom_call @pmapc.map(
# CHECK-SAME:      axis_name = "i"{{.*}}in_axes = [0, 0], out_axes = [0]
# CHECK:         stablehlo.custom_call @pmapc.psum({{.*}}axes = ["i"]
# CHECK:         stablehlo.cosine
# CHECK:         stablehlo.custom_call @pmapc.psum({{.*}}axes = ["i"]


@partial(pmapc.pmap, axis_name="data")
def grad_inside(x):
    inner = pmapc.pmap(lambda y: lax.psum(y * y, "model"), axis_name="model")
    return jax.grad(lambda v: jnp.sum(inner(v)))(x)


show("grad_through_inner_map", grad_inside, X)
# CHECK-LABEL: TEST: grad_through_inner_map
# CHECK:       func.func private @grad_inside(%arg0: tensor<4x3xf32>)
# CHECK:         stablehlo.custom_call @pmapc.map({{.*}}axis_name = "model"
# CHECK:         stablehlo.custom_call @pmapc.map({{.*}}axis_name = "model"


def batched(xs):
    return jax.vmap(pmapc.pmap(lambda y: lax.psum(y, ("b", "i")), axis_name="i"), axis_name="b")(xs)


show("vmap_around_the_map", batched, np.zeros((5, 8, 3), np.float32))
# The vmapped axis becomes a leading dimension of the body, reduced in place
# where a collective names it; the sum over it is the same for every batch
# element, so the map returns it once and it is broadcast outside.
# CHECK-LABEL: TEST: vmap_around_the_map
# CHECK:         stablehlo.custom_call @pmapc.map({{.*}}in_axes = [1], out_axes = [0]
# CHECK-SAME:      (tensor<5x8x3xf32>) -> tensor<8x3xf32>
# CHECK:         stablehlo.broadcast_in_dim
# CHECK:       func.func private @{{.*}}(%arg0: tensor<5x3xf32>)
# CHECK:         stablehlo.reduce(%arg0
# CHECK:         stablehlo.custom_call @pmapc.psum({{.*}}axes = ["i"]

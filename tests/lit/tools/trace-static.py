# RUN: pmapc trace %s:reduce --arg f32[2,4] --static 1="'max'" | FileCheck %s --check-prefix=MAP
# RUN: pmapc trace %s:rows --arg f32[8] --static 1=4 | FileCheck %s --check-prefix=PLAIN
# RUN: pmapc trace %s:rows --static 1=2 --arg f32[8] | FileCheck %s --check-prefix=PLAIN2

# `--static INDEX=VALUE` gives positional argument INDEX as a Python literal: a
# pmapc.pmap function's static_broadcasted_argnums, or a static argument of any
# other function (as jax.jit's static_argnums). The --args fill the other
# positions in order.

from functools import partial

import jax

import pmapc


@partial(pmapc.pmap, axis_name="data", static_broadcasted_argnums=1)
def reduce(x, how):
    collective = {"sum": jax.lax.psum, "max": jax.lax.pmax}[how]
    return collective(x, "data")


def rows(x, count):
    return reduce(x.reshape(count, -1), "sum")


# MAP-LABEL: func.func public @main(%arg0: tensor<2x4xf32>)
# MAP:         stablehlo.custom_call @pmapc.map({{.*}}axis_size = 2
# MAP-LABEL: func.func private @reduce(
# MAP:         stablehlo.custom_call @pmapc.pmax({{.*}}axes = ["data"]

# PLAIN-LABEL: func.func public @main(%arg0: tensor<8xf32>)
# PLAIN:         stablehlo.reshape %arg0 : (tensor<8xf32>) -> tensor<4x2xf32>
# PLAIN:         stablehlo.custom_call @pmapc.map({{.*}}axis_size = 4
# PLAIN:         stablehlo.custom_call @pmapc.psum(

# PLAIN2:        stablehlo.reshape %arg0 : (tensor<8xf32>) -> tensor<2x4xf32>

# RUN: pmapc trace %s:plain --arg f32[2,4,8] | FileCheck %s --check-prefix=PLAIN
# RUN: pmapc trace %s:jitted --arg f32[2,4,8] | FileCheck %s --check-prefix=PLAIN
# RUN: pmapc trace %s:plain --arg f32[2,4,8] --emit=spmd | FileCheck %s --check-prefix=SPMD
# RUN: pmapc trace %s:step --arg f32[2,4,8] | FileCheck %s --check-prefix=MAP

# `pmapc trace` stages any function the way jax.make_jaxpr does: a plain
# function that calls a pmapc.pmap function with other JAX ops around it, a
# jax.jit of one, or the pmapc.pmap function itself.

from functools import partial

import jax

import pmapc


@partial(pmapc.pmap, axis_name="data")
def step(x):
    @partial(pmapc.pmap, axis_name="model")
    def columns(y):
        return jax.lax.psum(y, "model")

    return columns(x)


def plain(x):
    return step(2 * x) + 1


jitted = jax.jit(plain)

# The ops around the map stay in @main, around the map of the outermost axis.
# PLAIN-LABEL: func.func public @main(
# PLAIN:         stablehlo.multiply
# PLAIN:         stablehlo.custom_call @pmapc.map({{.*}}axis_name = "data"
# PLAIN:         stablehlo.add
# PLAIN:       func.func private @step(
# PLAIN:         stablehlo.custom_call @pmapc.map({{.*}}axis_name = "model"
# PLAIN:       func.func private @columns(
# PLAIN:         stablehlo.custom_call @pmapc.psum({{.*}}axes = ["model"]

# After the passes the whole function is one program over the 2x4 mesh.
# SPMD:        pmapc.mesh = {axis_names = ["data", "model"], axis_sizes = array<i64: 2, 4>}
# SPMD-LABEL:  func.func public @main(
# SPMD:          stablehlo.multiply
# SPMD:          replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
# SPMD:          stablehlo.add
# SPMD-NOT:      @pmapc.

# MAP-LABEL:   func.func public @main(
# MAP-NOT:       stablehlo.multiply
# MAP:           stablehlo.custom_call @pmapc.map({{.*}}axis_name = "data"

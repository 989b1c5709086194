# RUN: pmapc trace %s:step --arg f32[2,4,8] --fold-onto 2 | FileCheck %s
# RUN: pmapc trace %s:step --arg f32[2,4,8] --fold-onto 2 --emit=plan | FileCheck %s --check-prefix=PLAN
# RUN: pmapc trace %s:step --arg f32[2,4,8] --fold-onto 3 --emit=plan | FileCheck %s --check-prefix=PLAN
# RUN: not pmapc trace %s:step --arg f32[2,4,8] --fold-onto 0 2>&1 | FileCheck %s --check-prefix=ERROR

# `--fold-onto N` traces the nest folded onto N devices (as many as divide its
# mesh: 3 folds onto 2): the psum over 'model' runs within each device's block
# and leaves the plan; the one over both axes keeps an all-reduce over 'data'.

# PLAN: mesh data=2 (2 devices)
# PLAN-NEXT: folded: each device runs 4 of 'model'; collectives within a device's positions run on it

from functools import partial

import jax

import pmapc


@partial(pmapc.pmap, axis_name="data")
def step(x):
    @partial(pmapc.pmap, axis_name="model")
    def columns(y):
        return jax.lax.psum(y, "model") + jax.lax.psum(y, ("data", "model"))
        # PLAN-NOT: model
        # PLAN:     1  all_reduce  data  1 x 2  1  32 B  32 B  32 B  {{.*}}trace-fold.py:[[# @LINE - 2]]

    return columns(x)


# CHECK:      @pmapc.map(%arg0) {{.*}}axis_name = "data", axis_size = 2 : i64, folded = {model = 4 : i64}
# CHECK:      func.func private @step(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32>

# PLAN:       per run: 1 collectives, sent 32 B, received 32 B, minimum 32 B per device

# ERROR: pmapc trace: error: --fold-onto needs a positive device count, got 0

# RUN: pmapc trace %s:step --arg f32[2,4,8] --emit=plan --picture | FileCheck %s
# RUN: pmapc trace %s:step --arg f32[2,4,8] --emit=plan --svg %t.svg > /dev/null
# RUN: FileCheck %s --check-prefix=SVG < %t.svg

# `--emit=plan` prints the communication plan of the traced program, each row
# pointing at the Python line of its collective.

from functools import partial

import jax

import pmapc


@partial(pmapc.pmap, axis_name="data")
def step(x):
    @partial(pmapc.pmap, axis_name="model")
    def columns(y):
        # CHECK: 1  all_reduce  model  2 x 4  1  48 B  48 B  48 B  {{.*}}-plan.py:[[# @LINE + 1]]
        return jax.lax.psum(y, "model") + jax.lax.psum(y, ("data", "model"))
        # CHECK-NEXT: 2  all_reduce  data,model  1 x 8  1  56 B  56 B  56 B  {{.*}}:[[# @LINE - 1]]

    return columns(x)


# CHECK: per run: 2 collectives, sent 104 B, received 104 B, minimum 104 B per device
# CHECK: 2 all_reduce over data,model
# CHECK-NEXT:     A   A   A   A
# CHECK-NEXT:     A   A   A   A

# SVG-COUNT-16: <rect class="device"

# RUN: pmapc trace %s:step --arg f32[2,4] 2>%t.err | pmapc opt - | FileCheck %s
# RUN: FileCheck %s --check-prefix=ERR < %t.err
# RUN: pmapc trace %s:step --arg f32[2,4] > %t.mlir 2>/dev/null && pmapc opt %t.mlir | FileCheck %s
# RUN: pmapc trace %s:step --arg f32[2,4] 2>/dev/null | FileCheck %s --check-prefix=OUT

# `pmapc trace` imports this file and runs it while tracing: what the file prints
# (through Python or straight to file descriptor 1) goes to stderr, and stdout
# holds only the IR, which `pmapc opt` reads.

import os
from functools import partial

import jax

import pmapc

print("printed at import")
os.write(1, b"written to fd 1 at import\n")


@partial(pmapc.pmap, axis_name="data")
def step(x):
    print("printed while tracing")
    return jax.lax.psum(x, "data")


# CHECK-LABEL: func.func public @main(
# CHECK:         stablehlo.custom_call @pmapc.map({{.*}}axis_name = "data"
# CHECK:         stablehlo.custom_call @pmapc.psum({{.*}}axes = ["data"]

# ERR-DAG: printed at import
# ERR-DAG: written to fd 1 at import
# ERR-DAG: printed while tracing

# OUT-NOT: printed
# OUT-NOT: written
# OUT: module @step
# OUT-NOT: printed

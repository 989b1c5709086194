# RUN: pmapc trace %s:step --arg f32[2,4,8] --emit=spmd | FileCheck %s --check-prefix=NAMED
# RUN: pmapc trace %s:step --arg f32[2,4,8] --emit=hlo | FileCheck %s --check-prefix=HLO
# RUN: pmapc trace %s:step --arg f32[2,4,8] --emit=hlo --replica-groups=dense | FileCheck %s --check-prefix=DENSE
# RUN: not pmapc trace %s:step --arg f32[2,4,8] --emit=hlo --mlir-print-debuginfo 2>&1 | FileCheck %s --check-prefix=DEBUGINFO

# Every collective kind that takes replica groups, over one axis, both, and
# both in the order the program names them ('model' major). to-partitions
# writes the groups as mesh axes of an sdy.mesh op (NAMED), and XLA's HLO names
# them too (HLO); with --replica-groups=dense they are device ids (DENSE).

from functools import partial

import jax

import pmapc


@partial(pmapc.pmap, axis_name="data")
def step(x):
    @partial(pmapc.pmap, axis_name="model")
    def columns(y):
        total = jax.lax.psum(y, "model")
        stacked = jax.lax.all_gather(y, ("model", "data"))
        scattered = jax.lax.psum_scatter(y, "data", tiled=True)
        swapped = jax.lax.all_to_all(y, "model", 0, 0, tiled=True)
        return total + stacked.sum(0) + scattered.sum() + swapped

    return columns(x)


# NAMED:      sdy.mesh @mesh = <["data"=2, "model"=4]>
# NAMED-SAME: {stablehlo.mesh = {axes = [{name = "data", size = 2 : i64}, {name = "model", size = 4 : i64}]}}
# NAMED-DAG:  "stablehlo.all_reduce"{{.*}}replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>
# NAMED-DAG:  "stablehlo.all_gather"{{.*}}replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">, #stablehlo.axis_ref<name = "data">]>
# NAMED-DAG:  "stablehlo.reduce_scatter"{{.*}}replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">]>
# NAMED-DAG:  "stablehlo.all_to_all"{{.*}}replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]>

# HLO-DAG: all-reduce({{.*}}replica_groups=mesh['data'=2,'model'=4] {'model'}
# HLO-DAG: all-gather({{.*}}replica_groups=mesh['data'=2,'model'=4] {'model','data'}
# HLO-DAG: reduce-scatter({{.*}}replica_groups=mesh['data'=2,'model'=4] {'data'}
# HLO-DAG: all-to-all({{.*}}replica_groups=mesh['data'=2,'model'=4] {'model'}

# DENSE-NOT: mesh[
# DENSE-DAG: all-reduce({{.*}}replica_groups={{[{][{]}}0,1,2,3},{4,5,6,7}}
# DENSE-DAG: all-gather({{.*}}replica_groups={{[{][{]}}0,4,1,5,2,6,3,7}}
# DENSE-DAG: reduce-scatter({{.*}}replica_groups={{[{][{]}}0,4},{1,5},{2,6},{3,7}}
# DENSE-DAG: all-to-all({{.*}}replica_groups={{[{][{]}}0,1,2,3},{4,5,6,7}}
# DENSE-NOT: mesh[

# DEBUGINFO: pmapc trace: error: --mlir-print-debuginfo works with --emit=pmapc or --emit=spmd

"""to-replicas: a lowered program in replica form, one replica per mesh device.

The form XLA runs with `num_replicas` = mesh size and no SPMD partitioning
(compiler/xla.py's compile_replicated): `stablehlo.replica_id` is the device's
mesh position, collectives carry no channel handle and their `replica_groups`
and `source_target_pairs` list replica ids (= mesh positions). The module says
`mhlo.num_replicas` = mesh size, `mhlo.num_partitions = 1`.

A program in partition form (after to-partitions) is converted back: with one
replica, partition ids and global device ids are the replica ids, so
partition_id becomes replica_id and channel handles and use_global_device_ids
are dropped; groups and pairs stay as they are, but groups written as mesh axes
(which XLA reads only in partition form) become device ids.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import dialect, ir
from pmapc.errors import Category
from pmapc.passes import ragged
from pmapc.passes.base import Analyses, Analysis, Form
from pmapc.passes.op_index import index_of, op_index
from pmapc.passes.to_partitions import (
    CHANNEL_HANDLE,
    GLOBAL_DEVICE_IDS,
    device_count,
    device_ops,
    expand_groups,
    replace_device_ids,
    set_device_counts,
)
from pmapc.rewriter import Rewriter


@dataclasses.dataclass(frozen=True)
class ToReplicasPass:
    """Put a lowered program in replica form (one replica per device): replica_id, no channels."""

    name: ClassVar[str] = "to-replicas"
    accepts: ClassVar[Form] = Form.LOWERED
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        device_ids, collectives = device_ops(index_of(module, analyses), self.name)
        changed = replace_device_ids(device_ids, "stablehlo.replica_id", rewriter)
        for op in collectives:
            if ragged.is_native(op):
                raise dialect.error_at(
                    op,
                    "XLA's ragged_all_to_all runs in partition form only (its groups name "
                    "partitions; XLA crashes on one without a channel); use "
                    "target=partitions, or lower it with ragged=expanded",
                    Category.UNSUPPORTED,
                )
            changed |= rewriter.drop_attributes(op, (CHANNEL_HANDLE, GLOBAL_DEVICE_IDS))
        mesh = analyses.views.read_mesh(module)
        changed |= expand_groups(module, mesh, collectives, rewriter)
        replicas = device_count(module, mesh)
        changed |= set_device_counts(module, rewriter, replicas=replicas, partitions=1)
        return changed

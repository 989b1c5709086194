"""to-partitions: a lowered program in partition form, the form `jax.jit` runs.

lower-collectives leaves a target-neutral program: `stablehlo.replica_id` is
the device's position in the mesh and every collective's `replica_groups`
lists mesh positions. Inside a `shard_map` region of a jitted program (and in
any SPMD-partitioned program) the devices are partitions of one replica, so:

  replica_id                             -> partition_id (same ui32 scalar)
  all_reduce, all_gather, reduce_scatter -> + channel_handle, use_global_device_ids
  all_to_all, collective_permute         -> + channel_handle
  variadic all_reduce                    -> one all_reduce per operand

With a channel handle and global device ids, groups and pairs name partitions
(= mesh positions: one replica), so they stay as they are. Handles are
numbered from the `first-channel` option in op order, one per collective.
XLA's SPMD partitioner takes only single-operand all-reduces in a manual
region ("supports only single-operand allreduce in manual partitioning
mode"), so a variadic one (combine-all-reduces) is split again.
The module says `mhlo.num_partitions` = mesh size, `mhlo.num_replicas = 1`.

to-replicas (passes/to_replicas.py) is the inverse and shares the helpers
below.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from pmapc import dialect, ir
from pmapc.errors import PipelineError
from pmapc.passes.base import Analyses
from pmapc.passes.op_index import OpIndex, index_of
from pmapc.passes.rewriter import Rewriter

NUM_REPLICAS = "mhlo.num_replicas"
NUM_PARTITIONS = "mhlo.num_partitions"
CHANNEL_HANDLE = "channel_handle"
GLOBAL_DEVICE_IDS = "use_global_device_ids"

# The collectives whose groups name devices; the first three also take
# use_global_device_ids (all_to_all and collective_permute have none).
COLLECTIVES = (
    "stablehlo.all_reduce",
    "stablehlo.all_gather",
    "stablehlo.reduce_scatter",
    "stablehlo.all_to_all",
    "stablehlo.collective_permute",
)
WITH_GLOBAL_DEVICE_IDS = COLLECTIVES[:3]
DEVICE_IDS = ("stablehlo.replica_id", "stablehlo.partition_id")
# What device_ops looks at: device ids, collectives, and custom_calls (pmapc ops left).
_DEVICE_OPS = frozenset((*DEVICE_IDS, *COLLECTIVES, "stablehlo.custom_call"))


@dataclasses.dataclass(frozen=True)
class ToPartitionsPass:
    """Put a lowered program in partition form (what jax.jit runs): partition_id, channels."""

    name: ClassVar[str] = "to-partitions"
    first_channel: int = 1
    keeps_analyses_current: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.first_channel < 1:
            raise PipelineError(
                f"option 'first-channel' of pass '{self.name}' must be at "
                f"least 1, got {self.first_channel}"
            )

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        device_ids, collectives = device_ops(index_of(module, analyses), self.name)
        changed = replace_device_ids(device_ids, "stablehlo.partition_id", rewriter)
        singles = []
        for op in collectives:
            if is_variadic_all_reduce(op):
                singles.extend(split_all_reduce(op, rewriter))
                changed = True
            else:
                singles.append(op)
        global_ids = ir.unit_attr()
        for handle, op in enumerate(singles, start=self.first_channel):
            values = {CHANNEL_HANDLE: ir.channel_handle_attr(handle)}
            if op.name in WITH_GLOBAL_DEVICE_IDS:
                values[GLOBAL_DEVICE_IDS] = global_ids
            changed |= rewriter.set_attributes(op, values)
        changed |= set_device_counts(module, rewriter, replicas=1, partitions=device_count(module))
        return changed


def is_variadic_all_reduce(op: ir.Operation) -> bool:
    return op.name == "stablehlo.all_reduce" and len(op.operands) > 1


def split_all_reduce(op: ir.Operation, rewriter: Rewriter) -> list[ir.Operation]:
    """A variadic all_reduce as one all_reduce per operand, with its reducer and
    attributes."""
    operands = list(op.operands)
    b, attributes = rewriter.before(op), op.attributes
    first = b.create(
        op.name,
        operands[:1],
        [operands[0].type],
        {key: attributes[key] for key in attributes},
        regions=1,
    )
    op.regions[0].blocks[0].append_to(first.regions[0])
    singles = [first]
    for operand in operands[1:]:
        single = b.clone(first)
        single.operands[0] = operand
        ir.set_value_type(single.result, operand.type)
        singles.append(single)
    rewriter.replace(op, [single.result for single in singles])
    return singles


# ----------------------------------------------------------------------------
# Shared with to-replicas


def device_ops(index: OpIndex, pass_name: str) -> tuple[list, list]:
    """(device-id ops, collectives) of every function of the indexed module, in op order.

    Refuses what is not a lowered program of one of the two forms: a `pmapc.*`
    op, or a collective whose groups name replicas of a replica-and-partition
    program (a channel handle without use_global_device_ids).
    """
    device_ids, collectives = [], []
    for op in index.ops(_DEVICE_OPS):
        name = op.name
        if name in DEVICE_IDS:
            device_ids.append(op)
        elif name in COLLECTIVES:
            check_groups_name_devices(op, pass_name)
            collectives.append(op)
        elif dialect.is_pmapc_op(op):
            raise still_named(op, pass_name)
    return device_ids, collectives


def still_named(op: ir.Operation, pass_name: str):
    target = dialect.target_of(op)
    before = "flatten-maps and lower-collectives" if dialect.is_map(op) else "lower-collectives"
    return dialect.error_at(op, f"'{target}' is still here; run {before} before {pass_name}")


def check_groups_name_devices(op: ir.Operation, pass_name: str) -> None:
    attributes = op.attributes
    if op.name not in WITH_GLOBAL_DEVICE_IDS or CHANNEL_HANDLE not in attributes:
        return
    if GLOBAL_DEVICE_IDS in attributes:
        return
    raise dialect.error_at(
        op,
        f"'{op.name}' has a channel_handle but no "
        f"use_global_device_ids, so its replica_groups do not name "
        f"devices; {pass_name} only converts collectives whose groups "
        "name devices (add use_global_device_ids, or drop the channel "
        "handle for replica groups)",
    )


def replace_device_ids(ops: list[ir.Operation], name: str, rewriter: Rewriter) -> bool:
    """Replace each replica_id or partition_id op by `name`; whether any was replaced."""
    changed = False
    for op in ops:
        if op.name != name:
            new = rewriter.before(op).create(name, [], [op.result.type])
            rewriter.replace(op, [new.result])
            changed = True
    return changed


def device_count(module: ir.Module) -> int:
    """The mesh size; without a mesh, the devices the module already declares (else 1)."""
    mesh = dialect.read_mesh(module)
    if mesh is not None:
        return mesh.size
    attributes = module.operation.attributes
    count = 1
    for key in (NUM_REPLICAS, NUM_PARTITIONS):
        if key in attributes:
            count *= ir.as_int(attributes[key]) or 1
    return count


def set_device_counts(
    module: ir.Module, rewriter: Rewriter, *, replicas: int, partitions: int
) -> bool:
    return rewriter.set_attributes(
        module.operation,
        {NUM_REPLICAS: ir.i32_attr(replicas), NUM_PARTITIONS: ir.i32_attr(partitions)},
    )

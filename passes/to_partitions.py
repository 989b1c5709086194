"""to-partitions: a lowered program in partition form, the form `jax.jit` runs.

lower-collectives leaves a target-neutral program: `stablehlo.replica_id` is
the device's position in the mesh and every collective's `replica_groups`
lists mesh positions. Inside a `shard_map` region of a jitted program (and in
any SPMD-partitioned program) the devices are partitions of one replica, so:

  replica_id                             -> partition_id (same ui32 scalar)
  all_reduce, all_gather, reduce_scatter -> + channel_handle, use_global_device_ids
  all_to_all, collective_permute         -> + channel_handle
  XLA's ragged_all_to_all custom call    -> + channel_id in its backend_config
  variadic all_reduce                    -> one all_reduce per operand

With a channel handle and global device ids, groups and pairs name partitions
(= mesh positions: one replica). Handles are numbered from the `first-channel`
option in op order, one per collective.

Replica groups that are whole mesh axes (every collective's, but those split
by `axis_index_groups`) are written as those axes, in their order, as JAX
0.11+ writes a shard_map's (lower-collectives writes them so; groups given as
device ids that are whole axes are named here, from their strides, in time of
the ids written):

  replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh,
                       axes = [#stablehlo.axis_ref<name = "model">]>

over an `sdy.mesh @mesh` op the pass adds for the module's mesh, so that XLA's
HLO names them too (`replica_groups=mesh['data'=2,'model'=4] {'model'}`).
With the option `replica-groups=dense` every group is a matrix of device ids
instead (groups written as axes are expanded). collective_permute keeps its
`source_target_pairs`.
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

from pmapc import dialect, hlo, ir, options
from pmapc.errors import PipelineError
from pmapc.mesh import Mesh, ReplicaGroups, axes_of_groups
from pmapc.options import DEFAULT_GROUP_FORM, GroupForm
from pmapc.passes import ragged
from pmapc.passes.base import Analyses, Analysis, Form
from pmapc.passes.op_index import OpIndex, index_of, op_index
from pmapc.rewriter import Rewriter

NUM_REPLICAS = "mhlo.num_replicas"
NUM_PARTITIONS = "mhlo.num_partitions"
CHANNEL_HANDLE = "channel_handle"
GLOBAL_DEVICE_IDS = "use_global_device_ids"

# The collectives whose groups name devices; the first three also take
# use_global_device_ids (all_to_all and collective_permute have none).
COLLECTIVES = tuple(hlo.COLLECTIVE_OPS)
WITH_GLOBAL_DEVICE_IDS = COLLECTIVES[:3]
REPLICA_GROUPS = "replica_groups"
WITH_REPLICA_GROUPS = COLLECTIVES[:4]  # every collective but collective_permute

DEVICE_IDS = ("stablehlo.replica_id", "stablehlo.partition_id")
# What device_ops looks at: device ids, collectives, and custom_calls (pmapc ops left).
_DEVICE_OPS = frozenset((*DEVICE_IDS, *COLLECTIVES, "stablehlo.custom_call"))


@dataclasses.dataclass(frozen=True)
class ToPartitionsPass:
    """Put a lowered program in partition form (what jax.jit runs): partition_id, channels."""

    name: ClassVar[str] = "to-partitions"
    accepts: ClassVar[Form] = Form.LOWERED
    first_channel: int = 1
    replica_groups: GroupForm = DEFAULT_GROUP_FORM
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def __post_init__(self) -> None:
        if self.first_channel < 1:
            raise PipelineError(
                f"option 'first-channel' of pass '{self.name}' must be at "
                f"least 1, got {self.first_channel}"
            )
        # a pipeline string gives the option as text: read it here, once
        form = group_form(self.replica_groups, f"pass '{self.name}'")
        object.__setattr__(self, "replica_groups", form)

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
        mesh = analyses.views.read_mesh(module)
        groups = GroupWriter(module, mesh, self.replica_groups, rewriter)
        for handle, op in enumerate(singles, start=self.first_channel):
            if ragged.is_native(op):
                config = ragged.with_channel(op, handle)
                changed |= rewriter.set_attributes(op, {"backend_config": config})
                continue
            values = {CHANNEL_HANDLE: ir.channel_handle_attr(handle)}
            if op.name in WITH_GLOBAL_DEVICE_IDS:
                values[GLOBAL_DEVICE_IDS] = global_ids
            rewritten = groups.rewritten(op)
            if rewritten is not None:
                values[REPLICA_GROUPS] = rewritten
            changed |= rewriter.set_attributes(op, values)
        partitions = device_count(module, mesh)
        changed |= set_device_counts(module, rewriter, replicas=1, partitions=partitions)
        return changed


def group_form(value: object, owner: str) -> GroupForm:
    """The `replica-groups` option of `owner` as a GroupForm this jaxlib can write;
    a PipelineError says what is wrong."""
    form = options.parse(GroupForm, value)
    if form is None:
        choices = " or ".join(options.choices(GroupForm))
        raise PipelineError(f"option 'replica-groups' of {owner} takes {choices}, got '{value}'")
    if not options.writable(form):
        raise PipelineError(
            f"option 'replica-groups' of {owner}: this jaxlib's StableHLO has no mesh-axis "
            "replica groups; use replica-groups=dense"
        )
    return form


class MeshNames:
    """Where groups that are whole mesh axes are written as those axes: `mesh`, the
    mesh they name (None where the form is dense, there is no mesh, or the XLA in
    use cannot read one of its axis names), and `symbol()`, its `sdy.mesh` op's
    symbol, found in the module or made at its top the first time it is asked for.
    The one check and the one lazily made mesh op of lower-collectives (which names
    groups as it builds them) and to-partitions (which names groups given as ids)."""

    def __init__(
        self, module: ir.Module, mesh: Mesh | None, form: GroupForm, rewriter: Rewriter
    ) -> None:
        self.module = module
        self.rewriter = rewriter
        self.readable = mesh is not None and all(map(ir.mesh_axis_name_readable, mesh.axis_names))
        self.mesh = mesh if form is GroupForm.NAMED and self.readable else None
        self._meshes: dict[str, hlo.MeshDevices] | None = None
        self._symbol: str | None = None

    @property
    def meshes(self) -> dict[str, hlo.MeshDevices]:
        """The module's `sdy.mesh` ops by symbol (`hlo.meshes_of`), read when first
        asked for; the one `symbol()` makes joins them."""
        if self._meshes is None:
            self._meshes = hlo.meshes_of(self.module)
        return self._meshes

    def symbol(self) -> str:
        """The symbol of the `sdy.mesh` op of `mesh`, made once."""
        assert self.mesh is not None, "groups are named only over a readable mesh"
        if self._symbol is None:
            top = self.rewriter.at_start(self.module.body, ir.unknown_location(self.module.context))
            self._symbol = hlo.mesh_symbol(top, self.module, self.mesh, self.meshes)
        return self._symbol


class GroupWriter:
    """Writes replica groups in one form (`form`, "named" or "dense"): `rewritten(op)`
    is `op`'s groups in that form, or None where they stay as they are. Groups are
    read once per distinct attribute (MLIR uniques them: ops of one group set share
    one), and the mesh op is made when the first group is named (`MeshNames`)."""

    def __init__(
        self, module: ir.Module, mesh: Mesh | None, form: GroupForm, rewriter: Rewriter
    ) -> None:
        self.names = MeshNames(module, mesh, form, rewriter)
        # Device ids where asked, and where the XLA in use cannot read an axis name.
        self.expand = form is GroupForm.DENSE or (mesh is not None and not self.names.readable)
        self.written: dict[ir.Attribute, ir.Attribute | None] = {}

    def rewritten(self, op: ir.Operation) -> ir.Attribute | None:
        if op.name not in WITH_REPLICA_GROUPS:
            return None  # collective_permute: pairs
        groups = op.attributes[REPLICA_GROUPS]  # the verifier requires it of the others
        if groups not in self.written:
            self.written[groups] = self._rewrite(op)
        return self.written[groups]

    def _rewrite(self, op: ir.Operation) -> ir.Attribute | None:
        groups = read_groups(op, self.names.meshes)
        if self.expand:
            return hlo.groups_attr(groups.matrix()) if groups.axes is not None else None
        mesh = self.names.mesh
        if groups.axes is not None or mesh is None:
            return None  # named already, or no mesh to name them by
        axes = axes_of_groups(mesh, groups.matrix())
        if axes is None:
            return None  # not whole mesh axes (axis_index_groups split them)
        return ir.mesh_axis_groups_attr(self.names.symbol(), axes)


def expand_groups(
    module: ir.Module, mesh: Mesh | None, collectives: list[ir.Operation], rewriter: Rewriter
) -> bool:
    """Write replica groups given as mesh axes (of `mesh`, the module's) as device ids;
    whether any were."""
    groups = GroupWriter(module, mesh, GroupForm.DENSE, rewriter)
    changed = False
    for op in collectives:
        dense = groups.rewritten(op)
        if dense is not None:
            changed |= rewriter.set_attributes(op, {REPLICA_GROUPS: dense})
    return changed


def read_groups(op: ir.Operation, meshes: dict[str, hlo.MeshDevices]) -> ReplicaGroups:
    """`hlo.read_groups` of `op`'s replica groups, a bad mesh or axis at `op`."""
    try:
        return hlo.read_groups(op.attributes[REPLICA_GROUPS], meshes)
    except hlo.GroupsError as error:
        raise dialect.error_at(op, f"'{op.name}': {error}") from None


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
    rewriter.move_block(op.regions[0].blocks[0], first.regions[0])
    singles = [first]
    for operand in operands[1:]:
        single = b.clone(first)
        rewriter.set_operand(single, 0, operand)
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
        elif ragged.is_native(op):
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


def device_count(module: ir.Module, mesh: Mesh | None) -> int:
    """The size of `mesh` (the module's); without one, the devices the module already
    declares (else 1)."""
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

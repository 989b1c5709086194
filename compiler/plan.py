"""The communication plan of a lowered program: which devices talk, and how much.

Reads a module after `lower-collectives` (either target form): every
StableHLO collective becomes one `Step` with its groups of mesh positions as
written (mesh axes, never listed device by device but for a picture; or
device ids), the mesh axes those groups are (those named; of device ids, found
from the strides of the first group and checked against the rest; None for
groups no tuple gives, such as `axis_index_groups`; of a permute's pairs, the
axes along which they differ), how often one run of the program executes it
(loops with a known trip count multiply), and its bytes per device. All of it
costs time in proportion to what the module writes, and the pictures to the
devices they draw.

Bytes follow the cost model of `benchmarks/hlo_stats.py` (S is the payload:
the larger of the operands and the results, summed over a variadic op; n the
group size), for one execution, per device, the busiest device's:

| op | sent = received | minimum |
|---|---|---|
| all_reduce | 2(n-1)/n S | 2(n-1)/n S |
| all_gather, reduce_scatter, all_to_all | (n-1)/n S | (n-1)/n S |
| collective_permute | S | S |

Host callbacks (`jax.debug.print`, `pure_callback`, `io_callback`) are listed
too, as `HostCall`s: each is a round-trip of every device to the Python process
that traced the program, with the bytes it sends there and gets back.

The minimum is the bandwidth lower bound of the collective's semantics over
its groups (Chan et al., "Collective communication: theory, practice, and
experience", 2007): what any algorithm must move per device. pmapc emits
bandwidth-optimal collectives, so each row's bytes equal its minimum; the
column makes that checkable, and the per-run totals say what the whole
program moves.

What XLA runs (`Compiled.plan()`, `pmapc plan --xla`; `compiler/plan_xla.py`):
next to each collective, the collective(s) of the HLO XLA compiled and
scheduled that run it (combined with others, split, made async, or none), with
XLA's totals beside pmapc's. They are read from the executable's optimized HLO
rather than through `jax.extend.xla.register_hlo_module_transformation`: the
same collectives on both JAX ends without registering a pass for every
compilation of the process (plan_xla.py says more), and matched to pmapc's by
their groups, kinds, bytes and order, not by source lines, which XLA drops from
the collectives it combines.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence
from typing import Protocol

import numpy as np

from pmapc import dialect, hlo, ir
from pmapc.compiler import plan_hosts, plan_pictures, runtime
from pmapc.compiler.plan_pictures import axes_text
from pmapc.errors import SourceLoc, shown_file
from pmapc.mesh import Mesh, ReplicaGroups, axes_joining, axes_of_groups, canonical_axes
from pmapc.passes import forms, ragged


class XlaSide(Protocol):
    """What XLA runs for each step of a plan (compiler/plan_xla.py's `XlaRuns`, which
    builds on this module): what the table shows of it."""

    unavailable: str | None  # why XLA's side could not be read, if it could not

    def cell(self, step: int) -> str:
        """The XLA collectives that run step `step`, for its row."""
        ...

    def lines(self, pmapc_totals: dict[str, float]) -> list[str]:
        """XLA's collectives as a table after the plan's, and the totals both ways."""
        ...


@dataclasses.dataclass(frozen=True)
class Step:
    """One collective of the plan."""

    op: str  # "all_reduce", ...
    axes: tuple[str, ...] | None  # the mesh axes its groups are; None: other groups
    # its groups of mesh positions, as written (mesh axes, or device ids); for a
    # permute, its (source, target) pairs as ids
    groups: ReplicaGroups
    payload: int  # S, bytes
    parts: tuple[int, ...]  # S of each operand (a variadic all_reduce has several)
    executions: int  # per run of the program
    loop_unknown: bool  # inside a loop whose trip count is not known (counted once)
    location: SourceLoc | None
    # The expanded form of a ragged_all_to_all (passes/ragged.py): the payload of its
    # padded exchange is `payload`; a ragged exchange's is at most this.
    ragged_payload: int | None = None

    @property
    def label(self) -> str:
        """The op as the table names it."""
        return f"{self.op} (ragged, padded)" if self.ragged_payload is not None else self.op

    @property
    def is_permute(self) -> bool:
        return self.op == "collective_permute"

    @property
    def group_size(self) -> int:
        return 2 if self.is_permute else self.groups.size

    def sent(self) -> float:
        """Bytes the busiest device sends in one execution, by the algorithm XLA's
        cost model assumes: a ring within each group (a pair for a permute)."""
        if self.is_permute:
            return float(self.payload) * _most_pairs(self.groups.matrix()[:, 0])
        if self.groups.count == 0:
            return 0.0
        return _ring_bytes(self.op, self.groups.largest(), self.payload)

    def received(self) -> float:
        """Bytes the busiest device receives in one execution."""
        if self.is_permute:
            return float(self.payload) * _most_pairs(self.groups.matrix()[:, 1])
        return self.sent()  # a ring receives what it sends

    @property
    def kind(self) -> str:
        """Its op, as the split by link reads it (compiler/plan_hosts.py: Talks)."""
        return self.op

    def group_matrix(self) -> np.ndarray:
        """Its groups as rows of mesh positions (-1 padded); a permute's pairs."""
        return self.groups.matrix()

    def minimum(self) -> float:
        """The bandwidth lower bound per device of one execution (module docstring)."""
        if self.is_permute:
            return float(self.payload) if self.groups.count else 0.0
        n = self.group_size
        payload = self.payload if self.ragged_payload is None else self.ragged_payload
        return LOWER_BOUND_FACTOR[self.op] * (n - 1) / n * payload


def _most_pairs(devices: np.ndarray) -> int:
    """How many pairs the device in most of them is in (of the sources or targets)."""
    if devices.size == 0:
        return 0
    return int(np.unique(devices, return_counts=True)[1].max())


# The bandwidth lower bound of each collective over n devices, in units of (n-1)/n S.
LOWER_BOUND_FACTOR = {
    "all_reduce": 2.0,
    "all_gather": 1.0,
    "reduce_scatter": 1.0,
    "all_to_all": 1.0,
    "ragged_all_to_all": 1.0,  # payload: the operand, the most it sends
}


def _ring_bytes(op: str, n: int, payload: int) -> float:
    """Bytes one device sends in a ring over n devices: n - 1 steps of S/n each, twice
    for an all-reduce (reduce-scatter, then all-gather)."""
    steps = (n - 1) * (2 if op == "all_reduce" else 1)
    return steps * payload / n if n > 1 else 0.0


@dataclasses.dataclass(frozen=True)
class HostCall:
    """One host callback: each device's round-trip to the Python process."""

    target: str  # the custom_call's target, e.g. "xla_ffi_python_cpu_callback"
    to_host: int  # bytes of its operands, per device
    from_host: int  # bytes of its results, per device
    executions: int  # per run of the program
    loop_unknown: bool
    location: SourceLoc | None


@dataclasses.dataclass(frozen=True)
class Plan:
    """Every collective of one program, in program order, on its mesh, and its host
    callbacks."""

    mesh: Mesh
    steps: tuple[Step, ...]
    host_calls: tuple[HostCall, ...] = ()
    xla: XlaSide | None = None  # what XLA runs for each step (plan_xla.plan_with_xla)
    # a nest folded onto the mesh: (axis, positions of it each device runs)
    folded: tuple[tuple[str, int], ...] = ()
    # branches and loops every device runs, their predicates differing (predicate-divergent)
    predicated: tuple[dialect.Predicated, ...] = ()
    # the host and slice of each mesh position's device, where the plan knows its devices
    placement: plan_hosts.Placement | None = None

    def by_link(self) -> plan_hosts.Links | None:
        """Bytes per device per run inside a host, between hosts of one slice and
        between slices (compiler/plan_hosts.py); None without the devices."""
        if self.placement is None:
            return None
        return plan_hosts.per_run(self.placement, self.steps)

    def hints(self) -> list[plan_hosts.Hint]:
        """Collectives another order of the nest's axes keeps inside a host or slice."""
        if self.placement is None:
            return []
        return plan_hosts.hints(self.mesh, self.placement, self.steps)

    def totals(self) -> dict[str, float]:
        """Bytes per device per run: sent, received and the minimum, loops counted;
        and the host round-trips per run."""
        return {
            "host round-trips": sum(call.executions for call in self.host_calls),
            "collectives": sum(step.executions for step in self.steps),
            "sent": sum(step.sent() * step.executions for step in self.steps),
            "received": sum(step.received() * step.executions for step in self.steps),
            "minimum": sum(step.minimum() * step.executions for step in self.steps),
        }

    def table(self) -> str:
        """The plan as a text table, one row per collective, totals last."""
        return format_table(self)

    def picture(self, color: bool = False) -> str:
        """Each collective's groups on the mesh grid, as text (compiler/plan_pictures.py)."""
        return plan_pictures.terminal_picture(self, color)

    def svg(self) -> str:
        """Each collective's groups on the mesh grid, as an SVG document."""
        return plan_pictures.svg_picture(self)

    def __str__(self) -> str:
        return self.table()


def plan_of(module: ir.Module, devices: Sequence | None = None) -> Plan:
    """The communication plan of a module after lower-collectives; with the `devices`
    it runs on (one per mesh position), its bytes by link (compiler/plan_hosts.py)."""
    mesh = dialect.mesh_of(module)
    forms.check_lowered(module, "the plan", devices=mesh.size)
    functions = ir.functions(module)
    meshes = hlo.meshes_of(module)
    steps, host_calls = [], []
    for op, executions, unknown in _collectives(functions, "main", 1, False, set()):
        if dialect.is_host_callback(op):
            host_calls.append(_host_call(op, executions, unknown))
        else:
            steps.append(_step(op, mesh, meshes, executions, unknown))
    return Plan(
        mesh,
        tuple(steps),
        tuple(host_calls),
        folded=dialect.fold_of(module),
        predicated=dialect.predicated_of(module),
        placement=None if devices is None else plan_hosts.Placement.of_devices(devices),
    )


def _collectives(
    functions, name: str, executions: int, unknown: bool, active: set[str]
) -> Iterator[tuple[ir.Operation, int, bool]]:
    """(op, executions per run, in a loop of unknown trip count) for every collective
    and host callback reachable from function `name`, in program order."""
    if name in active or name not in functions:
        return
    active.add(name)
    yield from _walk_ops(functions, functions[name], executions, unknown, active)
    active.discard(name)


def _walk_ops(
    functions, parent: ir.Operation, executions: int, unknown: bool, active: set[str]
) -> Iterator[tuple[ir.Operation, int, bool]]:
    for region in parent.regions:
        for block in region.blocks:
            for op in block.operations:
                op = op.operation
                if (
                    op.name in hlo.COLLECTIVE_OPS
                    or ragged.is_native(op)
                    or dialect.is_host_callback(op)
                ):
                    yield op, executions, unknown
                    continue  # a collective's regions are its reducer
                if op.name == "func.call":
                    yield from _collectives(
                        functions, ir.callee_of(op), executions, unknown, active
                    )
                    continue
                if op.name == "stablehlo.while":
                    trips = trip_count(op)
                    yield from _walk_ops(
                        functions, op, executions * (trips or 1), unknown or trips is None, active
                    )
                    continue
                if op.regions:
                    yield from _walk_ops(functions, op, executions, unknown, active)


def trip_count(while_op: ir.Operation) -> int | None:
    """The iterations of a `stablehlo.while` that counts a value from a constant to a
    constant bound by 1 (`compare LT`, as `lax.fori_loop` and `lax.scan` lower), or None."""
    cond, body = while_op.regions[0].blocks[0], while_op.regions[1].blocks[0]
    returned = _terminator(cond).operands[0]
    compare = ir.value_owner_op(returned)
    if compare is None or compare.name != "stablehlo.compare":
        return None
    if ir.comparison_direction(compare) != "LT":
        return None
    counter, bound = compare.operands
    position = _block_argument_index(cond, counter)
    limit = _constant_int(bound)
    if position is None or limit is None:
        return None
    start = _constant_int(while_op.operands[position])
    step = _increment(body, position)
    if start is None or step != 1:
        return None
    return max(0, limit - start)


def _terminator(block) -> ir.Operation:
    operations = list(block.operations)
    return operations[-1].operation


def _block_argument_index(block, value) -> int | None:
    for index, argument in enumerate(block.arguments):
        if argument == value:
            return index
    return None


def _constant_int(value) -> int | None:
    owner = ir.value_owner_op(value)
    if owner is None or owner.name != "stablehlo.constant":
        return None
    values = ir.as_dense_values(owner.attributes["value"])
    if values is None or len(values) != 1:
        return None
    return int(values[0])


def _increment(body, position: int) -> int | None:
    """k if the body returns its argument `position` plus the constant k."""
    returned = _terminator(body).operands[position]
    add = ir.value_owner_op(returned)
    if add is None or add.name != "stablehlo.add":
        return None
    lhs, rhs = add.operands
    argument = body.arguments[position]
    if lhs == argument:
        return _constant_int(rhs)
    if rhs == argument:
        return _constant_int(lhs)
    return None


def _step(
    op: ir.Operation,
    mesh: Mesh,
    meshes: dict[str, hlo.MeshDevices],
    executions: int,
    unknown: bool,
) -> Step:
    if ragged.is_native(op):
        ids = ir.dense_int_matrix(ragged.native_groups(op))
        kind, axes = "ragged_all_to_all", axes_of_groups(mesh, ids)
        payload = _bytes(op.operands[0].type)  # its operand: the most it sends
        groups = ReplicaGroups.of_ids(ids)
        return Step(kind, axes, groups, payload, (payload,), executions, unknown, _loc(op))
    kind = hlo.COLLECTIVE_OPS[op.name]
    if kind == "collective_permute":
        pairs = ir.dense_int_matrix(op.attributes["source_target_pairs"])
        groups, axes = ReplicaGroups.of_ids(pairs), axes_joining(mesh, pairs) or None
    else:
        groups, axes = _groups_and_axes(op, mesh, meshes)
    operands = [_bytes(v.type) for v in op.operands]
    results = [_bytes(r.type) for r in op.results]
    payload = max(sum(operands), sum(results))
    parts = tuple(map(max, operands, results)) if len(operands) == len(results) else (payload,)
    bound = _ragged_payload(op, payload)
    return Step(kind, axes, groups, payload, parts, executions, unknown, _loc(op), bound)


def _groups_and_axes(
    op: ir.Operation, mesh: Mesh, meshes: dict[str, hlo.MeshDevices]
) -> tuple[ReplicaGroups, tuple[str, ...] | None]:
    """A collective's replica groups, and the mesh axes they are (None: no axes)."""
    try:  # dense, or mesh axes (to-partitions' default)
        groups = hlo.read_groups(op.attributes["replica_groups"], meshes)
    except hlo.GroupsError as error:
        raise dialect.error_at(op, f"'{op.name}': {error}") from None
    if groups.axes is not None:
        return groups, groups.axes
    assert groups.ids is not None
    if groups.ids.size == 0:  # no groups: one group of every device
        every = canonical_axes(mesh, mesh.axis_names)
        return ReplicaGroups.over_axes(mesh, every), every
    return groups, axes_of_groups(mesh, groups.ids)


def _ragged_payload(op: ir.Operation, payload: int) -> int | None:
    """For the padded all_to_all of an expanded ragged_all_to_all ([slices, rows, ...]),
    the payload of a ragged exchange at most (its `pmapc.ragged_rows` rows); else None."""
    if ragged.RAGGED_ROWS not in op.attributes:
        return None
    rows = ir.as_int(op.attributes[ragged.RAGGED_ROWS])
    assert rows is not None, "pmapc.ragged_rows is an integer (passes/ragged.py)"
    return payload // math.prod(ir.shape_of(op.operands[0].type)[:2]) * rows


def _loc(op: ir.Operation) -> SourceLoc | None:
    return ir.source_loc(op.location)


def _host_call(op: ir.Operation, executions: int, unknown: bool) -> HostCall:
    return HostCall(
        dialect.target_of(op) or "",
        sum(_bytes(v.type) for v in op.operands),
        sum(_bytes(r.type) for r in op.results),
        executions,
        unknown,
        ir.source_loc(op.location),
    )


def _bytes(type_) -> int:
    if not ir.is_ranked_tensor(type_):
        return 0
    itemsize = runtime.element_dtype(ir.element_type_of(type_)).itemsize
    return int(np.prod(ir.shape_of(type_), dtype=np.int64)) * itemsize


# ----------------------------------------------------------------------------
# Text


def format_bytes(count: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count:.0f} B" if count == int(count) else f"{count:.1f} B"


def _where(location: SourceLoc | None) -> str:
    """file:line, the file relative to the working directory when it lies below it."""
    if location is None:
        return "-"
    return f"{shown_file(location.file)}:{location.line}"


def format_table(plan: Plan) -> str:
    """One row per collective (with what XLA runs for it when the plan has XLA's
    side), the totals, the host round-trips; then XLA's collectives."""
    header = ("#", "op", "axes", "groups", "per run", "sent", "received", "minimum", "source")
    xla = plan.xla if plan.xla is not None and plan.xla.unavailable is None else None
    placement = plan.placement if plan.placement is not None else plan_hosts.NOWHERE
    header = (*header[:-1], *plan_hosts.header(placement), header[-1])
    if xla is not None:
        header = (*header, "XLA runs")
    rows = []
    for index, step in enumerate(plan.steps, 1):
        groups = (
            f"{step.groups.count} pairs"
            if step.is_permute
            else f"{step.groups.count} x {step.group_size}"
        )
        runs = f"{step.executions}" + ("?" if step.loop_unknown else "")
        where = _where(step.location)
        rows.append(
            (
                str(index),
                step.label,
                axes_text(step),
                groups,
                runs,
                format_bytes(step.sent()),
                format_bytes(step.received()),
                format_bytes(step.minimum()),
                *plan_hosts.cells(placement, step, format_bytes),
                where,
                *([xla.cell(index - 1)] if xla is not None else []),
            )
        )
    totals = plan.totals()
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    out = [f"mesh {plan.mesh} ({plan.mesh.size} devices); bytes per device per execution"]
    if placement.spans_hosts:
        out.append(plan_hosts.legend(placement))
    if plan.folded:
        positions = ", ".join(f"{count} of '{axis}'" for axis, count in plan.folded)
        out.append(
            f"folded: each device runs {positions}; collectives within a device's "
            "positions run on it and send nothing (not listed)"
        )
    out.append(line(header))
    out.extend(line(row) for row in rows)
    out.append(
        f"per run: {int(totals['collectives'])} collectives, "
        f"sent {format_bytes(totals['sent'])}, received {format_bytes(totals['received'])}, "
        f"minimum {format_bytes(totals['minimum'])} per device"
    )
    if placement.spans_hosts:
        out.append(plan_hosts.total_line(placement, plan.steps, format_bytes, "pmapc"))
        out.extend(hint.line(format_bytes) for hint in plan.hints())
    out.extend(_host_call_lines(plan))
    out.extend(_predicated_lines(plan))
    if any(item.loop_unknown for item in (*plan.steps, *plan.host_calls)):
        out.append("?: inside a loop whose trip count is unknown, counted once")
    if plan.xla is not None:
        out.extend(["", *plan.xla.lines(totals)])
    return "\n".join(out) + "\n"


def _host_call_lines(plan: Plan) -> list[str]:
    """One line per host callback, after the collectives (none without any)."""
    if not plan.host_calls:
        return []
    runs = int(plan.totals()["host round-trips"])
    lines = [f"host round-trips per run: {runs}, every device to the Python process"]
    for call in plan.host_calls:
        per_run = f"{call.executions}" + ("?" if call.loop_unknown else "")
        lines.append(
            f"  {_where(call.location)}: {per_run} per run, "
            f"{format_bytes(call.to_host)} to the host, {format_bytes(call.from_host)} back"
        )
    return lines


def _predicated_lines(plan: Plan) -> list[str]:
    """One line per branch or loop whose predicate differs between the devices of its
    collectives' groups, which every device therefore runs (none without any)."""
    if not plan.predicated:
        return []
    how = {
        "cond": "every branch runs, each device selects its own",
        "while": "loops while any device of the group continues, masking the others",
    }
    lines = ["predicated (the predicate differs between devices that talk inside):"]
    for record in plan.predicated:
        axes = ", ".join(f"'{axis}'" for axis in record.axes)
        lines.append(f"  {_where(record.location)}: {record.kind} over {axes}: {how[record.kind]}")
    return lines

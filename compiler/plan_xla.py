"""What XLA runs for each collective pmapc emits: the XLA side of the communication plan.

pmapc's plan (`compiler/plan.py`) counts the collectives of the module pmapc hands
to XLA. XLA's own passes then change them: its combiners merge collectives over
the same groups into one (the partition form splits combine-all-reduces'
variadic all_reduce, and XLA merges it again), it splits some (an array
all-to-all becomes a tuple of one piece per device), removes those whose result
is unused, promotes bf16 all-reduces to f32, and on GPU makes them asynchronous
(`-start`/`-done`, or an `async-start` wrapper). `plan_with_xla` puts the
collectives XLA runs next to pmapc's.

Where XLA's collectives come from: the optimized HLO of the compiled executable
(`compiler/xla.py: optimized_hlo_text`, `executable.hlo_modules()[0]`), the
module XLA scheduled (`is_scheduled=true`) and runs, after all of its passes.
`jax.extend.xla.register_hlo_module_transformation` (PRE_/POST_SCHEDULER, on
jax 0.10.2 and 0.12.0.1) hands over the same module at a pass boundary, and on
XLA:CPU its POST_SCHEDULER module holds the same collectives (measured on both
ends); but it registers a pass for every compilation of the process (JAX's own
included, from any thread) until cleared, its proto must be turned into text
through JAX's private `hlo` module, and it is experimental. The executable's
HLO needs none of that and belongs to the one compilation asked about. A
backend whose executables give no HLO (some PJRT plugins) gets a plan that
says XLA's side is unavailable.

Matching, structural and in order (`match`): both sides are cut into pieces, one
per operand of a pmapc collective (a variadic all_reduce has several) and one
per element of an XLA collective (a combined one has several), each with its
kind, its groups (as sets of devices, from the IR's groups and the HLO's
`replica_groups` or `source_target_pairs` in any form, read by
`compiler/hlo_collectives.py`) and its bytes. Within the pieces over the same
groups, an XLA piece first takes the earliest pmapc piece of the same kind and
bytes (what a combiner or the scheduler only moved); the pieces left over on
both sides (split, promoted or converted ones) are laid end to end in program
order and each XLA piece goes to the pmapc piece at the same fraction of the
bytes. A pmapc collective that gets no piece is one XLA removed; an XLA
collective that gets none is XLA's own. Op metadata is not used: a combined
collective keeps no source line (its `op_name` reads "psum;psum").
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import functools
import itertools
from collections.abc import Sequence

import numpy as np

from pmapc import ir
from pmapc.compiler import hlo_collectives, plan_hosts
from pmapc.compiler.plan import Plan, Step, format_bytes, plan_of
from pmapc.mesh import Mesh, axes_joining, axes_of_groups

UNAVAILABLE = "the backend gives no optimized HLO for its executable"

GroupSet = tuple[tuple[int, ...], ...]


@dataclasses.dataclass(frozen=True)
class XlaCollective:
    """One collective of the HLO XLA runs, with the plan's steps it runs."""

    hlo: hlo_collectives.Collective
    axes: tuple[str, ...] | None  # the mesh axes its groups are; None: other groups
    executions: int  # per run of the program
    loop_unknown: bool
    steps: tuple[int, ...]  # indices into the plan's steps; () when XLA added it

    @property
    def op(self) -> str:
        """As the HLO writes it; a transfer between TPU slices, by its kind."""
        return f"{self.hlo.kind} (DCN)" if self.hlo.dcn else self.hlo.opcode

    def sent(self) -> float:
        """Bytes a device sends in one execution, by the plan's cost model."""
        return self.hlo.wire_bytes()

    # What the split by link reads (compiler/plan_hosts.py: Talks).
    @property
    def payload(self) -> int:
        return self.hlo.payload_bytes

    def group_matrix(self) -> np.ndarray:
        return self.hlo.groups

    @property
    def kind(self) -> str:
        """pmapc's spelling of its kind: "all_reduce", ..."""
        return self.hlo.kind.replace("-", "_")


@dataclasses.dataclass(frozen=True)
class XlaRuns:
    """The collectives XLA runs for a plan, or why they could not be read."""

    collectives: tuple[XlaCollective, ...] = ()
    unavailable: str | None = None
    placement: plan_hosts.Placement | None = None  # the devices' hosts and slices

    def runs_of(self, step: int) -> list[int]:
        """The indices of the XLA collectives that run step `step` of the plan."""
        return self._runs_by_step.get(step, [])

    @functools.cached_property
    def _runs_by_step(self) -> dict[int, list[int]]:
        runs: dict[int, list[int]] = collections.defaultdict(list)
        for index, collective in enumerate(self.collectives):
            for step in collective.steps:
                runs[step].append(index)
        return dict(runs)

    def totals(self) -> dict[str, float]:
        """XLA's collectives per run and the bytes a device sends per run."""
        return {
            "collectives": sum(c.executions for c in self.collectives),
            "sent": sum(c.sent() * c.executions for c in self.collectives),
        }

    def cell(self, step: int) -> str:
        """What XLA runs for step `step`, as the plan's table shows it."""
        runs = self.runs_of(step)
        if not runs:
            return "none (removed)"
        names = ", ".join(f"X{k + 1}" for k in runs)
        first = self.collectives[runs[0]]
        suffix = " async" if first.hlo.is_async else ""
        if len(runs) > 1:
            kinds = " + ".join(dict.fromkeys(self.collectives[k].op for k in runs))
            return f"{names} {kinds} (split)"
        others = [str(s + 1) for s in first.steps if s != step]
        combined = f", combined with {', '.join(others)}" if others else ""
        return f"{names} {first.op}{suffix}{combined}"

    def lines(self, pmapc_totals: dict[str, float]) -> list[str]:
        """XLA's collectives as a table after the plan's, and the totals both ways."""
        if self.unavailable is not None:
            return [f"what XLA runs: unavailable ({self.unavailable})"]
        totals = self.totals()
        both = (
            f"per run: pmapc emits {int(pmapc_totals['collectives'])} collectives, sent "
            f"{format_bytes(pmapc_totals['sent'])}; XLA runs {int(totals['collectives'])}, sent "
            f"{format_bytes(totals['sent'])} per device"
        )
        if not self.collectives:
            return ["what XLA runs (the HLO it compiled and scheduled): no collective", both]
        placement = self.placement if self.placement is not None else plan_hosts.NOWHERE
        header = ("X", "op", "axes", "groups", "per run", "sent", *plan_hosts.header(placement))
        header = (*header, "HLO", "runs")
        rows = [
            _row(k, collective, plan_hosts.cells(placement, collective, format_bytes))
            for k, collective in enumerate(self.collectives)
        ]
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        lines = ["what XLA runs (the HLO it compiled and scheduled):"]
        lines.extend(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in [header, *rows]
        )
        lines.append(both)
        if placement.spans_hosts:
            lines.append(plan_hosts.total_line(placement, self.collectives, format_bytes, "XLA"))
        return lines

    def by_link(self) -> plan_hosts.Links | None:
        """XLA's bytes per device per run by link (compiler/plan_hosts.py)."""
        if self.placement is None:
            return None
        return plan_hosts.per_run(self.placement, self.collectives)


def _row(index: int, collective: XlaCollective, links: tuple[str, ...]) -> tuple[str, ...]:
    hlo = collective.hlo
    if hlo.kind == "collective-permute":
        groups = f"{len(hlo.groups)} pairs"
    else:
        groups = f"{hlo.groups.shape[0]} x {hlo.group_size}"
    steps = ", ".join(str(s + 1) for s in collective.steps) or "- (XLA's own)"
    if len(collective.steps) > 1:
        steps += " (combined)"
    runs = f"{collective.executions}" + ("?" if collective.loop_unknown else "")
    op = collective.op
    if hlo.is_async and not hlo.opcode.endswith("-start") and not hlo.dcn:
        op += " (async)"
    return (
        f"X{index + 1}",
        op,
        ",".join(collective.axes) if collective.axes is not None else "(groups)",
        groups,
        runs,
        format_bytes(collective.sent()),
        *links,
        f"%{hlo.name}",
        steps,
    )


def plan_with_xla(module: ir.Module, xla_hlo: str | None, devices: Sequence | None = None) -> Plan:
    """The plan of a module after lower-collectives, with what XLA runs for each
    collective read from `xla_hlo`, the optimized HLO text of the module compiled
    for the mesh's devices (None: XLA gave none, and the plan says so); with the
    `devices`, both sides' bytes by link."""
    plan = plan_of(module, devices)
    return dataclasses.replace(plan, xla=xla_runs(plan.steps, plan.mesh, xla_hlo, plan.placement))


def xla_runs(
    steps: Sequence[Step],
    mesh: Mesh,
    xla_hlo: str | None,
    placement: plan_hosts.Placement | None = None,
) -> XlaRuns:
    """XLA's collectives in `xla_hlo`, each with the steps it runs; their groups as
    mesh positions (a program of one TPU slice's devices: in every slice)."""
    if xla_hlo is None:
        return XlaRuns(unavailable=UNAVAILABLE, placement=placement)
    slices = _slices_of(placement, mesh, xla_hlo)
    parsed = hlo_collectives.parse(xla_hlo, mesh.size // len(slices) if slices else mesh.size)
    executions = parsed.executions()
    in_order = [parsed.collectives[index] for index in parsed.run_order()]
    if slices:
        in_order = [_in_every_slice(collective, slices) for collective in in_order]
    sources = match(steps, in_order)
    axes_of = _axes_namer(mesh)
    collectives = []
    for collective, steps_run in zip(in_order, sources):
        runs, unknown = executions.get(collective.computation, (0, False))
        axes = axes_of(collective)
        collectives.append(XlaCollective(collective, axes, runs, unknown, steps_run))
    return XlaRuns(tuple(collectives), placement=placement)


def _slices_of(placement: plan_hosts.Placement | None, mesh: Mesh, xla_hlo: str):
    """Each slice's mesh positions in order, where `xla_hlo` is the program of one
    slice of several (its device count one slice's); else None."""
    if placement is None or placement.slice_count == 1:
        return None
    if hlo_collectives.module_device_count(xla_hlo) * placement.slice_count != mesh.size:
        return None
    return [np.flatnonzero(placement.slices == s) for s in np.unique(placement.slices)]


def _in_every_slice(
    collective: hlo_collectives.Collective, slices: list[np.ndarray]
) -> hlo_collectives.Collective:
    """A collective of one slice's program with its groups as mesh positions: the same
    groups in every slice; a DCN transfer's, each device with its counterpart in
    every slice."""
    local = collective.groups
    if collective.dcn:
        groups = np.stack(slices, axis=1)
    elif collective.kind == "collective-permute":
        groups = np.concatenate([positions[local] for positions in slices])
    else:
        groups = np.concatenate(
            [np.where(local >= 0, positions[np.maximum(local, 0)], -1) for positions in slices]
        )
    return dataclasses.replace(collective, groups=groups)


def _axes_namer(mesh: Mesh):
    """A function giving the mesh axes of an XLA collective's groups: in the order its
    groups list the devices where that order is one of a tuple of axes, else in mesh
    order; a permute's, the fewest axes holding its pairs; None for other groups."""

    def axes_of(collective: hlo_collectives.Collective) -> tuple[str, ...] | None:
        if collective.kind == "collective-permute":
            return axes_joining(mesh, collective.groups) or None
        found = axes_of_groups(mesh, collective.groups)
        return (
            found if found is not None else axes_of_groups(mesh, _in_mesh_order(collective.groups))
        )

    return axes_of


def _in_mesh_order(groups: np.ndarray) -> np.ndarray:
    """The groups with each group's devices, and the groups, in increasing order (how
    the groups over axes in mesh order list them)."""
    if groups.ndim != 2 or groups.size == 0:
        return groups
    ordered = np.sort(groups, axis=1)
    return ordered[np.argsort(ordered[:, 0], kind="stable")]


@dataclasses.dataclass
class _Piece:
    owner: int  # the step or XLA collective it is part of
    kind: str  # pmapc's spelling: "all_reduce", ...
    groups: GroupSet
    size: int  # bytes


def match(
    steps: Sequence[Step], collectives: Sequence[hlo_collectives.Collective]
) -> list[tuple[int, ...]]:
    """For each of XLA's collectives, the indices of the steps it runs (module docstring)."""
    mine: dict[GroupSet, list[_Piece]] = collections.defaultdict(list)
    for index, step in enumerate(steps):
        groups = _groups_of(step.op, step.groups.matrix())
        mine[groups].extend(_Piece(index, step.op, groups, size) for size in step.parts)
    theirs: dict[GroupSet, list[_Piece]] = collections.defaultdict(list)
    for index, collective in enumerate(collectives):
        kind, groups = (
            collective.kind.replace("-", "_"),
            _groups_of(collective.kind, collective.groups),
        )
        theirs[groups].extend(
            _Piece(index, kind, groups, size) for size in collective.element_bytes
        )
    found: list[set[int]] = [set() for _ in collectives]
    for groups, pieces in theirs.items():
        left_mine, left_theirs = _pair_equal(mine.get(groups, []), pieces, found)
        _align(left_mine, left_theirs, found)
    return [tuple(sorted(owners)) for owners in found]


def _pair_equal(
    mine: list[_Piece], theirs: list[_Piece], found: list[set[int]]
) -> tuple[list[_Piece], list[_Piece]]:
    """Give each XLA piece, in order, the first pmapc piece left of the same kind and
    bytes; the pieces of each side left without a partner."""
    waiting: dict[tuple[str, int], collections.deque[int]] = collections.defaultdict(
        collections.deque
    )
    for position, piece in enumerate(mine):
        waiting[piece.kind, piece.size].append(position)
    paired: set[int] = set()
    left_theirs = []
    for piece in theirs:
        queue = waiting.get((piece.kind, piece.size))
        if not queue:
            left_theirs.append(piece)
            continue
        position = queue.popleft()
        paired.add(position)
        found[piece.owner].add(mine[position].owner)
    left_mine = [piece for position, piece in enumerate(mine) if position not in paired]
    return left_mine, left_theirs


def _align(mine: list[_Piece], theirs: list[_Piece], found: list[set[int]]) -> None:
    """Lay both sides' pieces end to end and give each XLA piece the pmapc piece at the
    same fraction of the bytes (equal shares when a side has no bytes)."""
    if not mine or not theirs:
        return
    mine_ends = _fractions(mine)
    theirs_ends = _fractions(theirs)
    for piece, start, end in zip(theirs, [0.0, *theirs_ends[:-1]], theirs_ends):
        position = min(bisect.bisect_right(mine_ends, (start + end) / 2), len(mine) - 1)
        found[piece.owner].add(mine[position].owner)


def _fractions(pieces: list[_Piece]) -> list[float]:
    """The end of each piece as a fraction of all their bytes."""
    sizes = [piece.size for piece in pieces]
    if sum(sizes) == 0:
        sizes = [1] * len(pieces)
    total = sum(sizes)
    return [end / total for end in itertools.accumulate(sizes)]


def _groups_of(kind: str, groups: np.ndarray) -> GroupSet:
    """Groups as sets of devices (a permute's pairs as they are), in a canonical order."""
    if kind.replace("-", "_") == "collective_permute":
        return tuple(sorted((int(source), int(target)) for source, target in groups))
    return _group_set(groups)


def _group_set(groups) -> GroupSet:
    return tuple(sorted(tuple(sorted(int(d) for d in group if d >= 0)) for group in groups))

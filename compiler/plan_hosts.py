"""Where a plan's bytes travel: inside a host, between the hosts of one slice, or
between slices.

A program compiled for devices of several hosts (a GPU machine of 2 hosts, a TPU
pod slice, a `jax.distributed` run) or of several TPU slices has links of very
different speeds: NVLink or ICI inside, the network between hosts, the data-centre
network (DCN) between slices. `Placement` records the host (the device's
`process_index`) and the slice (its `slice_index`; 0 where the platform has none)
of the device at each mesh position, and splits each collective's bytes per
device into the three links:

- `Links.in_host`: to devices of the same host;
- `Links.across_hosts`: to devices of other hosts of the same slice;
- `Links.across_slices`: to devices of other slices.

The split follows the plan's cost model (compiler/plan.py) and sums to its bytes
where every device of a group holds as many of the group's devices on its host
and in its slice as every other. For a device whose group has n devices, k of
them on its host (itself included) and m in its slice:

| op | in host | across hosts | across slices |
|---|---|---|---|
| all_reduce (x2), all_gather, reduce_scatter | (k-1)/k S | (1/k - 1/m) S | (1/m - 1/n) S |
| all_to_all, ragged_all_to_all | (k-1)/n S | (m-k)/n S | (n-m)/n S |
| collective_permute | S per pair on that link | | |

The first row is the hierarchical algorithm (reduce inside the host, then the
slice, then between slices, each stage on 1/k, then 1/m of the payload): the
bandwidth lower bound of each link for a reduction or a gather. An all-to-all
cannot combine its pieces: each goes where its device is. Each link's figure is
its busiest device's, as the plan's bytes are.

`hints` looks for another order of the nest's axes (one axis moved outward or
inward) under which the program sends fewer bytes between slices, then between
hosts: the same accounting with the devices' hosts and slices laid out in that
order. Where that keeps a collective's groups inside a host (or a slice), the
plan says so, with the bytes it saves.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from pmapc.mesh import Mesh

REDUCTIONS = ("all_reduce", "all_gather", "reduce_scatter")
EXCHANGES = ("all_to_all", "ragged_all_to_all")
PERMUTE = "collective_permute"


@dataclasses.dataclass(frozen=True)
class Links:
    """Bytes one device sends per execution (or per run), by link."""

    in_host: float = 0.0
    across_hosts: float = 0.0  # between hosts of one slice
    across_slices: float = 0.0

    def __add__(self, other: Links) -> Links:
        return Links(
            self.in_host + other.in_host,
            self.across_hosts + other.across_hosts,
            self.across_slices + other.across_slices,
        )

    def times(self, count: float) -> Links:
        return Links(self.in_host * count, self.across_hosts * count, self.across_slices * count)

    @property
    def between(self) -> tuple[float, float]:
        """(across slices, across hosts): what a layout should make small, in that order."""
        return (self.across_slices, self.across_hosts)


class Talks(Protocol):
    """What the split reads of a collective: a plan's Step, or one XLA runs."""

    @property
    def kind(self) -> str:
        """pmapc's spelling of its kind: "all_reduce", ..."""
        ...

    @property
    def executions(self) -> int: ...

    @property
    def payload(self) -> int: ...

    def group_matrix(self) -> np.ndarray:
        """(groups, size) mesh positions, -1 padded; (pairs, 2) for a permute."""
        ...


@dataclasses.dataclass(frozen=True, eq=False)
class Placement:
    """The host and slice of the device at each mesh position."""

    hosts: np.ndarray  # int64 per position: the device's process index
    slices: np.ndarray  # int64 per position: its slice index (0 without slices)
    # Links of one byte and spans, by (op, groups): most collectives of a program share
    # a few group sets, so a plan costs numpy's work once per set, not per collective.
    _links: dict = dataclasses.field(default_factory=dict, repr=False)
    _spans: dict = dataclasses.field(default_factory=dict, repr=False)

    @classmethod
    def of_devices(cls, devices: Sequence) -> Placement:
        hosts = np.array([device.process_index for device in devices], dtype=np.int64)
        slices = np.array(
            [getattr(device, "slice_index", None) or 0 for device in devices], dtype=np.int64
        )
        return cls(hosts, slices)

    @functools.cached_property
    def host_count(self) -> int:
        return len(np.unique(self.hosts))

    @functools.cached_property
    def slice_count(self) -> int:
        return len(np.unique(self.slices))

    @property
    def spans_hosts(self) -> bool:
        """Whether the mesh's devices are on more than one host (or slice)."""
        return self.host_count > 1 or self.slice_count > 1

    def reordered(self, mesh: Mesh, order: Sequence[str]) -> Placement:
        """The hosts and slices each position of `mesh` would have with its axes nested
        in `order` (outermost first) over the same devices in the same order."""
        sizes = [mesh.axis_size(name) for name in order]
        positions = np.arange(mesh.size, dtype=np.int64).reshape(sizes)
        back = [list(order).index(name) for name in mesh.axis_names]
        moved = positions.transpose(back).reshape(-1)  # each position's device there
        return Placement(self.hosts[moved], self.slices[moved])

    def span(self, matrix: np.ndarray) -> tuple[int, int]:
        """The most hosts, and slices, one group of `matrix` spans."""
        if matrix.size == 0:
            return 0, 0
        key = (matrix.shape, matrix.tobytes())
        found = self._spans.get(key)
        if found is None:
            found = (
                self._most_distinct(self.hosts, matrix),
                self._most_distinct(self.slices, matrix),
            )
            self._spans[key] = found
        return found

    def _most_distinct(self, where: np.ndarray, matrix: np.ndarray) -> int:
        members = matrix >= 0
        places = np.where(members, where[np.where(members, matrix, 0)], -1)
        ordered = np.sort(places, axis=1)
        changes = (np.diff(ordered, axis=1) != 0) & (ordered[:, 1:] >= 0)
        return int((changes.sum(axis=1) + (ordered[:, :1] >= 0).sum(axis=1)).max())

    def links(self, op: str, matrix: np.ndarray, payload: float) -> Links:
        """The bytes of one execution per link, each its busiest device's (in proportion
        to the payload: worked out once per op and groups, for one byte)."""
        if matrix.size == 0 or payload == 0:
            return Links()
        key = (op, matrix.shape, matrix.tobytes())
        unit = self._links.get(key)
        if unit is None:
            unit = self._links[key] = self._unit_links(op, matrix)
        return unit.times(payload)

    def _unit_links(self, op: str, matrix: np.ndarray) -> Links:
        payload = 1.0
        if op == PERMUTE:
            return self._permute_links(matrix, payload)
        members = matrix >= 0
        k = self._same(self.hosts, self.slices, matrix, members)
        m = self._same(self.slices, self.slices, matrix, members)
        n = np.broadcast_to(members.sum(axis=1, keepdims=True), matrix.shape)
        k, m, n = (np.where(members, count, 1).astype(np.float64) for count in (k, m, n))
        if op in EXCHANGES:
            parts = ((k - 1) / n, (m - k) / n, (n - m) / n)
        else:
            factor = 2.0 if op == "all_reduce" else 1.0
            parts = tuple(factor * p for p in ((k - 1) / k, 1 / k - 1 / m, 1 / m - 1 / n))
        return Links(*(float(np.where(members, p, 0).max()) * payload for p in parts))

    @staticmethod
    def _same(where: np.ndarray, slices: np.ndarray, matrix: np.ndarray, members) -> np.ndarray:
        """For each member of each group, how many of its group share its `where` (a
        host within its slice, or a slice)."""
        rows = np.broadcast_to(np.arange(len(matrix))[:, None], matrix.shape)
        safe = np.where(members, matrix, 0)
        key = np.stack([rows, slices[safe], where[safe]], axis=-1)[members]
        _, inverse, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
        out = np.zeros(matrix.shape, dtype=np.int64)
        out[members] = counts[inverse.reshape(-1)]
        return out

    def _permute_links(self, pairs: np.ndarray, payload: float) -> Links:
        sources, targets = pairs[:, 0], pairs[:, 1]
        other_slice = self.slices[sources] != self.slices[targets]
        other_host = (self.hosts[sources] != self.hosts[targets]) & ~other_slice
        same_host = ~other_slice & ~other_host

        def busiest(chosen: np.ndarray) -> float:
            if not chosen.any():
                return 0.0
            return float(np.unique(sources[chosen], return_counts=True)[1].max()) * payload

        return Links(busiest(same_host), busiest(other_host), busiest(other_slice))


# A placement of every position on one host of one slice (a plan without its devices).
NOWHERE = Placement(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))


def per_run(placement: Placement, talks: Sequence[Talks]) -> Links:
    """The bytes per run of every collective of `talks`, by link."""
    total = Links()
    for item in talks:
        links = placement.links(item.kind, item.group_matrix(), item.payload)
        total += links.times(item.executions)
    return total


@dataclasses.dataclass(frozen=True)
class Hint:
    """Another order of the nest's axes that sends fewer bytes between hosts or slices."""

    axes: tuple[str, ...]  # the collectives' axes it keeps inside
    spans: tuple[int, int]  # the hosts and slices their groups span now
    now: Links  # their bytes per run now
    order: tuple[str, ...]  # the better order of the nest's axes, outermost first
    moved: str  # the axis that moves
    outward_of: str | None  # the axis it moves outside of (None: it moves inward)
    inward_of: str | None
    program_now: Links
    program_then: Links
    inside: str  # "a host" or "a slice"

    def line(self, format_bytes) -> str:
        over = ",".join(self.axes)
        hosts, slices = self.spans
        if self.inside == "a host":
            spans = f"span {hosts} hosts" + (f" in {slices} slices" if slices > 1 else "")
            apart = "between hosts" if slices == 1 else "between hosts and slices"
            moves = f"{format_bytes(_between(self.now))} per run {apart}"
            then = f"{format_bytes(_between(self.program_then))} {apart}"
            was = format_bytes(_between(self.program_now))
        else:
            spans = f"span {slices} slices"
            moves = f"{format_bytes(self.now.across_slices)} per run between slices"
            then = f"{format_bytes(self.program_then.across_slices)} between slices"
            was = format_bytes(self.program_now.across_slices)
        where = (
            f"'{self.moved}' outer to '{self.outward_of}'"
            if self.outward_of is not None
            else f"'{self.moved}' inner to '{self.inward_of}'"
        )
        return (
            f"hint: '{over}' groups {spans}: {moves}; with {where} (axes "
            f"{', '.join(self.order)}, outermost first) they stay inside {self.inside}, and "
            f"the program sends {then} per run instead of {was}"
        )


def _between(links: Links) -> float:
    return links.across_hosts + links.across_slices


def hints(mesh: Mesh, placement: Placement, talks: Sequence[Talks]) -> list[Hint]:
    """The collectives (by their axes) whose groups another order of the nest's axes,
    one axis moved, keeps inside a host or slice, if that order sends fewer bytes
    between slices, then between hosts, for the whole program; the best such order."""
    named = [item for item in talks if getattr(item, "axes", None) is not None]
    if not placement.spans_hosts or len(mesh.axis_names) < 2 or not named:
        return []
    program_now = per_run(placement, talks)
    best = None
    for move in _one_axis_moves(mesh.axis_names):
        reordered = placement.reordered(mesh, move[0])
        then = per_run(reordered, talks)
        if then.between < program_now.between and (best is None or then.between < best[2].between):
            best = (move, reordered, then)
    if best is None:
        return []
    (order, moved, outward_of, inward_of), alternative, program_then = best
    found = []
    for axes in dict.fromkeys(item.axes for item in named):  # type: ignore[attr-defined]
        same = [item for item in named if item.axes == axes]  # type: ignore[attr-defined]
        now, then = per_run(placement, same), per_run(alternative, same)
        inside = None
        if _between(now) > 0 and _between(then) == 0:
            inside = "a host"
        elif now.across_slices > 0 and then.across_slices == 0:
            inside = "a slice"
        if inside is None:
            continue
        spans = max((placement.span(item.group_matrix()) for item in same), default=(0, 0))
        found.append(
            Hint(
                axes,
                spans,
                now,
                tuple(order),
                moved,
                outward_of,
                inward_of,
                program_now,
                program_then,
                inside,
            )
        )
    return found


def _one_axis_moves(names: Sequence[str]):
    """Each order of `names` with one axis moved to another place: (order, the axis,
    the axis it now sits just outside of or None, the one it now sits just inside of
    or None); the moves outward first, so that of two equal orders (two axes
    swapped) the hint names the axis that moves outward."""
    for outward in (True, False):
        for source in range(len(names)):
            for target in range(len(names)):
                if (target < source) != outward or target == source:
                    continue
                rest = [name for position, name in enumerate(names) if position != source]
                order = (*rest[:target], names[source], *rest[target:])
                if outward:
                    yield order, names[source], names[target], None
                else:
                    yield order, names[source], None, names[target]


# ----------------------------------------------------------------------------
# The plan's table: its columns by link, its totals and hints


def header(placement: Placement) -> tuple[str, ...]:
    """The columns a plan on `placement` adds to each row (none on one host)."""
    if not placement.spans_hosts:
        return ()
    if placement.slice_count > 1:
        return ("hosts", "slices", "in host", "across hosts", "across slices")
    return ("hosts", "in host", "across hosts")


def cells(placement: Placement, item: Talks, format_bytes) -> tuple[str, ...]:
    """One row's cells under `header`: the most hosts (and slices) one group spans,
    and the bytes of one execution per link."""
    if not placement.spans_hosts:
        return ()
    matrix = item.group_matrix()
    hosts, slices = placement.span(matrix)
    links = placement.links(item.kind, matrix, item.payload)
    if placement.slice_count > 1:
        return (
            str(hosts),
            str(slices),
            format_bytes(links.in_host),
            format_bytes(links.across_hosts),
            format_bytes(links.across_slices),
        )
    return (str(hosts), format_bytes(links.in_host), format_bytes(links.across_hosts))


def total_line(placement: Placement, talks: Sequence[Talks], format_bytes, who: str) -> str:
    """The bytes per run per device by link, in one line (`who`: "pmapc", "XLA")."""
    links = per_run(placement, talks)
    text = (
        f"{who} per run by link: in host {format_bytes(links.in_host)}, across hosts "
        f"{format_bytes(links.across_hosts)}"
    )
    if placement.slice_count > 1:
        text += f", across slices {format_bytes(links.across_slices)}"
    return text + " per device"


def legend(placement: Placement) -> str:
    """What the columns by link mean, and where the devices are."""
    slices = f" in {placement.slice_count} slices" if placement.slice_count > 1 else ""
    return (
        f"devices on {placement.host_count} hosts{slices}; hosts: the most one group "
        "spans; across hosts: between hosts of one slice"
    )


# ----------------------------------------------------------------------------
# The pictures: where two neighbouring devices of the grid are on other hosts


def boundaries(placement: Placement, rows: int, columns: int) -> tuple[np.ndarray, np.ndarray]:
    """For a grid of `rows` x `columns` devices (position = row * columns + column):
    between each device and its right neighbour (rows, columns - 1), and its lower
    one (rows - 1, columns), 2 where they are in other slices, 1 on other hosts of
    one slice, 0 on one host."""
    hosts = placement.hosts.reshape(rows, columns)
    slices = placement.slices.reshape(rows, columns)

    def apart(axis: int) -> np.ndarray:
        other_slice = np.diff(slices, axis=axis) != 0
        other_host = np.diff(hosts, axis=axis) != 0
        return np.where(other_slice, 2, np.where(other_host, 1, 0))

    return apart(1), apart(0)


# How the text picture marks them: between columns, and under a row.
COLUMN_MARKS = (" ", "|", "#")
ROW_MARKS = ("   ", "---", "===")
PICTURE_LEGEND = "hosts apart: | and ---; slices apart: # and ==="

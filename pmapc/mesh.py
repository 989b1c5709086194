"""Pure index math over a device mesh: no IR objects here.

A mesh is an ordered list of named axes; devices are numbered row-major over
it (the first axis slowest): device id = sum(index_k * stride_k). A collective
over a tuple of axes acts within groups of devices that agree on every other
axis; inside a group devices are ordered row-major over the named axes in the
order the tuple names them (JAX 0.4's nested-pmap rule), except for ppermute,
whose positions follow the mesh order (`permutation_pairs`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Mesh:
    axis_names: tuple[str, ...]
    axis_sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        assert len(self.axis_names) == len(self.axis_sizes)
        assert len(set(self.axis_names)) == len(self.axis_names), self.axis_names

    @property
    def size(self) -> int:
        return math.prod(self.axis_sizes)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.axis_sizes

    def axis_position(self, name: str) -> int:
        return self.axis_names.index(name)

    def axis_size(self, name: str) -> int:
        return self.axis_sizes[self.axis_position(name)]

    def stride(self, name: str) -> int:
        """How far apart two devices are whose indices differ by 1 along `name`."""
        position = self.axis_position(name)
        return math.prod(self.axis_sizes[position + 1 :])

    def group_size(self, axes: tuple[str, ...]) -> int:
        return math.prod(self.axis_size(a) for a in axes)

    def device_coords(self, device: int) -> dict[str, int]:
        coords = np.unravel_index(device, self.axis_sizes)
        return {name: int(c) for name, c in zip(self.axis_names, coords)}

    def __str__(self) -> str:
        return "x".join(f"{n}={s}" for n, s in zip(self.axis_names, self.axis_sizes))


def replica_groups_for(
    mesh: Mesh, axes: tuple[str, ...], index_groups: Sequence[Sequence[int]] | None = None
) -> np.ndarray:
    """The (num_groups, group_size) matrix of device ids of a collective over `axes`.

    Lay iota(N) out in the mesh shape, move the named axes to the back in the
    order given, and reshape. With `index_groups` (positions within a group
    over `axes`, JAX's `axis_index_groups`), each group splits into one group
    per index group, `[group[i] for i in index_group]`, in that order (JAX 0.4's
    `_replica_groups`); groups of unequal sizes are padded with -1, as
    StableHLO writes them.

    This enumerates every device: the dense form of the groups. Where the mesh
    axes describe the groups (a `ReplicaGroups` over axes), nothing needs it.
    """
    ids = np.arange(mesh.size, dtype=np.int64).reshape(mesh.axis_sizes)
    named = [mesh.axis_position(a) for a in axes]
    others = [p for p in range(len(mesh.axis_names)) if p not in named]
    groups = ids.transpose(others + named).reshape(-1, mesh.group_size(axes))
    if index_groups is None:
        return groups
    width = max(len(index_group) for index_group in index_groups)
    split = np.full((len(groups), len(index_groups), width), -1, dtype=np.int64)
    for position, index_group in enumerate(index_groups):
        split[:, position, : len(index_group)] = groups[:, list(index_group)]
    return split.reshape(-1, width)


def canonical_axes(mesh: Mesh, axes: tuple[str, ...]) -> tuple[str, ...]:
    """The shortest tuple of mesh axes whose groups are those of `axes`: its axes of
    size 1 dropped (they change no group), in their order; when every one has size
    1 (groups of one device), the mesh's first axis of size 1."""
    kept = tuple(axis for axis in axes if mesh.axis_size(axis) > 1)
    if kept or not axes:
        return kept
    unit = _first_unit_axis(mesh)
    assert unit is not None  # `axes` are axes of size 1
    return (unit,)


def _first_unit_axis(mesh: Mesh) -> str | None:
    """The mesh's first axis of size 1 (which names groups of one device), if any."""
    return next((n for n, size in zip(mesh.axis_names, mesh.axis_sizes) if size == 1), None)


def axes_of_groups(mesh: Mesh, groups: np.ndarray) -> tuple[str, ...] | None:
    """The mesh axes (`canonical_axes`) whose replica groups are the matrix `groups`,
    or None when no tuple of axes gives it (index groups split it, say).

    The first group says which axes they would be: its devices step by the
    stride of the last axis, then of the one before, and so on (row-major over
    the axes in their order); the whole matrix is then compared with those axes'
    groups. Time and memory in proportion to the matrix, whatever the number of
    axes (no tuple of axes is tried).
    """
    if groups.ndim != 2 or groups.size == 0 or groups.shape[0] * groups.shape[1] != mesh.size:
        return None
    by_stride = {
        mesh.stride(name): name for name, size in zip(mesh.axis_names, mesh.axis_sizes) if size > 1
    }
    first, span, axes = groups[0], 1, []
    while span < len(first):
        axis = by_stride.get(int(first[span]) - int(first[0]))
        if axis is None or axis in axes:
            return None
        axes.insert(0, axis)
        span *= mesh.axis_size(axis)
    if span != len(first):
        return None
    candidate = tuple(axes)
    if not candidate:  # groups of one device: the first axis of size 1, if any
        unit = _first_unit_axis(mesh)
        if unit is None:
            return None
        candidate = (unit,)
    return candidate if np.array_equal(replica_groups_for(mesh, candidate), groups) else None


def axes_joining(mesh: Mesh, pairs: np.ndarray) -> tuple[str, ...]:
    """The fewest mesh axes whose groups hold every (source, target) pair: those along
    which some pair's devices differ, in mesh order. (Devices share a group over a
    set of axes exactly when they agree on every other axis.)"""
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    joining = []
    for name, size in zip(mesh.axis_names, mesh.axis_sizes):
        stride = mesh.stride(name)
        coordinates = (pairs // stride) % size
        if np.any(coordinates[:, 0] != coordinates[:, 1]):
            joining.append(name)
    return tuple(joining)


def axis_index_terms(mesh: Mesh, axes: tuple[str, ...]) -> list[tuple[int, int, int]]:
    """(stride, size, weight) per named axis: index = sum(((id // stride) % size) * weight)."""
    terms = []
    weight = mesh.group_size(axes)
    for axis in axes:
        size = mesh.axis_size(axis)
        weight //= size
        terms.append((mesh.stride(axis), size, weight))
    return terms


def axis_index_of(mesh: Mesh, axes: tuple[str, ...], device: int) -> int:
    """The device's position inside its group for `axes` (used by tests and the runtime)."""
    return sum(((device // s) % n) * w for s, n, w in axis_index_terms(mesh, axes))


@dataclasses.dataclass(frozen=True, eq=False)
class ReplicaGroups:
    """A collective's replica groups in the form they are written: whole mesh axes
    (`axes`, over `mesh`; the devices are never listed unless asked for) or a
    matrix of device ids (`ids`, rows padded with -1). `order` maps a mesh position
    to its device where the mesh lists its devices (an `sdy.mesh` with device ids).

    What the plan and the passes read (how many groups, how large, which axes)
    costs time in proportion to what is written: the axes, or the matrix.
    """

    mesh: Mesh | None = None
    axes: tuple[str, ...] | None = None
    ids: np.ndarray | None = None
    order: tuple[int, ...] = ()

    @classmethod
    def over_axes(
        cls, mesh: Mesh, axes: tuple[str, ...], order: Sequence[int] = ()
    ) -> ReplicaGroups:
        return cls(mesh=mesh, axes=tuple(axes), order=tuple(order))

    @classmethod
    def of_ids(cls, ids: np.ndarray) -> ReplicaGroups:
        return cls(ids=np.asarray(ids, dtype=np.int64))

    @property
    def count(self) -> int:
        """How many groups."""
        if self.ids is not None:
            return int(self.ids.shape[0])
        assert self.mesh is not None and self.axes is not None
        return self.mesh.size // self.mesh.group_size(self.axes)

    @property
    def size(self) -> int:
        """Devices per group (of the widest row, for padded ids)."""
        if self.ids is not None:
            return int(self.ids.shape[1]) if self.ids.ndim == 2 else 0
        assert self.mesh is not None and self.axes is not None
        return self.mesh.group_size(self.axes)

    def largest(self) -> int:
        """The devices of the largest group (padding not counted)."""
        if self.ids is None:
            return self.size
        if self.ids.size == 0:
            return 0
        return int((self.ids >= 0).sum(axis=1).max())

    def matrix(self) -> np.ndarray:
        """Every group's device ids (`replica_groups_for`; this lists every device)."""
        if self.ids is not None:
            return self.ids
        assert self.mesh is not None and self.axes is not None
        groups = replica_groups_for(self.mesh, self.axes)
        return np.asarray(self.order, dtype=np.int64)[groups] if self.order else groups


def permutation_pairs(
    mesh: Mesh, axes: tuple[str, ...], perm: Sequence[tuple[int, int]]
) -> np.ndarray:
    """Expand a ppermute over group positions into (source, target) device pairs, a
    (pairs, 2) matrix: each group's pairs in `perm`'s order, the groups in order.

    Positions count the group's devices in increasing id (mesh) order, whatever
    the order of `axes`: JAX 0.4's `_ppermute_lowering` (unchanged in JAX 0.10)
    sorts each group before it reads `perm`, unlike every other collective.
    """
    groups = np.sort(replica_groups_for(mesh, axes), axis=1)
    positions = np.asarray(perm, dtype=np.int64).reshape(-1, 2)
    pairs = np.stack([groups[:, positions[:, 0]], groups[:, positions[:, 1]]], axis=-1)
    return pairs.reshape(-1, 2)

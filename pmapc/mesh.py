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
import itertools
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
    """
    ids = np.arange(mesh.size, dtype=np.int64).reshape(mesh.axis_sizes)
    named = [mesh.axis_position(a) for a in axes]
    others = [p for p in range(len(mesh.axis_names)) if p not in named]
    groups = ids.transpose(others + named).reshape(-1, mesh.group_size(axes))
    if index_groups is None:
        return groups
    width = max(len(index_group) for index_group in index_groups)
    split = np.full((len(groups) * len(index_groups), width), -1, dtype=np.int64)
    for row, (group, index_group) in enumerate(itertools.product(groups, index_groups)):
        split[row, : len(index_group)] = group[list(index_group)]
    return split


GroupsKey = tuple[tuple[int, ...], ...]  # a replica-group matrix as nested tuples


def groups_key(groups: np.ndarray) -> GroupsKey:
    return tuple(tuple(int(device) for device in group) for group in groups)


def axes_by_groups(mesh: Mesh) -> dict[GroupsKey, tuple[str, ...]]:
    """Every ordered tuple of distinct mesh axes, by its replica groups: fewer axes
    first, then in mesh order, so that axes of size 1 (which change no group) are
    left out of the tuple a group matrix names."""
    names: dict[GroupsKey, tuple[str, ...]] = {}
    for count in range(1, len(mesh.axis_names) + 1):
        for axes in itertools.permutations(mesh.axis_names, count):
            names.setdefault(groups_key(replica_groups_for(mesh, axes)), axes)
    return names


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


def permutation_pairs(
    mesh: Mesh, axes: tuple[str, ...], perm: Sequence[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Expand a ppermute over group positions into (source, target) device pairs.

    Positions count the group's devices in increasing id (mesh) order, whatever
    the order of `axes`: JAX 0.4's `_ppermute_lowering` (unchanged in JAX 0.10)
    sorts each group before it reads `perm`, unlike every other collective.
    """
    pairs = []
    for group in replica_groups_for(mesh, axes):
        group = np.sort(group)
        pairs.extend((int(group[src]), int(group[dst])) for src, dst in perm)
    return pairs

"""The index arithmetic of folding a nest onto fewer devices (lowering/fold.py).

Pure functions of sizes and positions, no arrays: how a map's positions share
the devices left to it, whether a nest folds onto a device count, where a
position of a collective's group lies (its device, its place in the device's
block), and the tables the folded collectives read (index groups).
docs/ir.md, "Folding", states the layout.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def split(size: int, devices_left: int) -> tuple[int, int, int] | None:
    """(devices, positions per device, devices left for inner maps) of a map of
    `size` with `devices_left` devices to share out; None if neither divides the other."""
    if devices_left % size == 0:
        return size, 1, devices_left // size
    if size % devices_left == 0:
        return devices_left, size // devices_left, 1
    return None


def foldable(chains: Sequence[Sequence[int]], count: int) -> bool:
    """Whether a nest whose maps chain as `chains` (sizes, outermost first) folds onto
    `count` devices: every chain splits, and the longest uses all `count`."""
    products = []
    for chain in chains:
        left = count
        for size in chain:
            step = split(size, left)
            if step is None:
                return False
            left = step[2]
        products.append(count // left)
    return max(products) == count


def fold_count(chains: Sequence[Sequence[int]], positions: int, available: int) -> int | None:
    """The most devices, at most `available`, that a nest of `positions` folds onto
    (None: none folds it, which a nest always does onto one device)."""
    for count in range(min(available, positions), 0, -1):
        if positions % count == 0 and foldable(chains, count):
            return count
    return None


def device_and_place(
    position: int, devices: Sequence[int], local: Sequence[int]
) -> tuple[int, int]:
    """(device index, place in the device's block) of a position of a group whose axes
    have `devices` times `local` positions each: each row-major over the axes."""
    sizes = [d * n for d, n in zip(devices, local)]
    coordinates = np.unravel_index(position, sizes)
    device = np.ravel_multi_index([c // n for c, n in zip(coordinates, local)], devices)
    place = np.ravel_multi_index([c % n for c, n in zip(coordinates, local)], local)
    return int(device), int(place)


def permutation_classes(
    perm: Sequence[tuple[int, int]], devices: Sequence[int], local: Sequence[int]
) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """A permutation of a group's positions as (source place, target place) -> the
    (source device, target device) pairs that move a value between those places: each
    class is one permutation of the devices (a copy where the devices agree)."""
    classes: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for source, target in perm:
        source_device, source_place = device_and_place(source, devices, local)
        target_device, target_place = device_and_place(target, devices, local)
        pair = (source_device, target_device)
        classes.setdefault((source_place, target_place), []).append(pair)
    return classes


def index_group_tables(groups: Sequence[Sequence[int]], size: int) -> tuple[np.ndarray, ...]:
    """(the index group of each of a group's `size` positions, its rank in it)."""
    group_of = np.zeros(size, np.int32)
    rank_of = np.zeros(size, np.int32)
    for g, members in enumerate(groups):
        for r, position in enumerate(members):
            group_of[position], rank_of[position] = g, r
    return group_of, rank_of

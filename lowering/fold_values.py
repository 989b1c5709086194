"""Values of a folded nest: arrays batched over the positions each device holds.

A folded map's body runs every position of its block at once (lowering/fold.py).
A `Value` is one array for all of them, its leading dimensions the positions of
the folded axes it varies over (`batch`); `Positions` knows the axes of the
maps around a body and moves values between batches. The interpreter
(lowering/fold.py) and the collectives' rules (lowering/fold_rules.py) share
them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from pmapc.errors import SourceLoc
from pmapc.lowering import jax_frames


@dataclasses.dataclass(frozen=True)
class Axis:
    """A map's axis, folded: `size` positions, `devices` times `local` (positions per device)."""

    name: Hashable
    size: int
    devices: int
    local: int


@dataclasses.dataclass(frozen=True)
class Value:
    """A value of every folded position a device holds: `array`'s leading dimensions
    are the `local` positions of the axes `batch` (indices into the frame's axes, in
    order); the value is the same at every position of the other axes."""

    array: Any  # a jax.Array or a tracer of one
    batch: tuple[int, ...] = ()


class Positions:
    """The folded axes of the maps around a body (`axes`, outermost first)."""

    def __init__(self, axes: tuple[Axis, ...]) -> None:
        self.axes = axes

    def resolve(self, name) -> int | None:
        """The index of the innermost map binding `name` (None: no map binds it)."""
        for index in range(len(self.axes) - 1, -1, -1):
            if self.axes[index].name == name:
                return index
        return None

    def with_batch(self, value: Value, *indices: int) -> Value:
        """`value` with the folded axes `indices` among its batch (broadcast along
        those it does not vary over)."""
        missing = [i for i in indices if i not in value.batch and self.axes[i].local > 1]
        if not missing:
            return value
        batch = tuple(sorted({*value.batch, *missing}))
        array = value.array
        shape = np.shape(array)
        rest = shape[len(value.batch) :]
        expanded = jnp.reshape(
            array,
            tuple(shape[value.batch.index(i)] if i in value.batch else 1 for i in batch) + rest,
        )
        full = tuple(self.axes[i].local for i in batch) + rest
        return Value(jnp.broadcast_to(expanded, full), batch)

    def take_first(self, value: Value, index: int) -> Value:
        """`value` at the first of axis `index`'s positions (for a value the same at
        all of them: a map's unmapped result)."""
        if index not in value.batch:
            return value
        at = value.batch.index(index)
        return Value(jnp.take(value.array, 0, axis=at), tuple(i for i in value.batch if i != index))

    def position(self, index: int) -> Value:
        """Axis `index`'s position of each folded position a device holds."""
        axis = self.axes[index]
        device = lax.axis_index(axis.name) if axis.devices > 1 else 0
        if axis.local == 1:
            return Value(jnp.asarray(device, np.int32))
        local = jnp.arange(axis.local, dtype=np.int32)
        return Value(device * axis.local + local, (index,))

    def add(self, a: Value, b: Value) -> Value:
        batch = tuple(sorted({*a.batch, *b.batch}))
        a, b = self.with_batch(a, *batch), self.with_batch(b, *batch)
        return Value(a.array + b.array, batch)


def located(eqn, error):
    """`error` at the user's line of `eqn`, where known."""
    where = jax_frames.user_line(eqn)
    return error.at(SourceLoc(*where, 0)) if where is not None else error


def split_dim(array, at: int, devices: int, local: int):
    """Dimension `at` (devices times local positions) split in two, devices major."""
    if local == 1:
        return array
    shape = np.shape(array)
    return jnp.reshape(array, (*shape[:at], devices, local, *shape[at + 1 :]))


def merge_dims(array, at: int):
    """Dimensions `at` and `at + 1` merged, the first major."""
    shape = np.shape(array)
    return jnp.reshape(array, (*shape[:at], shape[at] * shape[at + 1], *shape[at + 2 :]))


def slice_in_dim(array, start, size: int, dim: int):
    """`size` entries of dimension `dim` from `start` (an int, or traced)."""
    if isinstance(start, int):
        return lax.slice_in_dim(array, start, start + size, axis=dim)
    return lax.dynamic_slice_in_dim(array, start, size, dim)

"""The fold's rule for each collective: what it computes over the positions a device holds.

In a folded nest (lowering/fold.py) a collective's group may lie within a
device's block, span devices, or both. Each kind's rule (`RULES`, keyed by its
`Collective` record, like lower-collectives' table) computes it from the
values of the group's positions: those on the device as batch dimensions,
those on other devices through a collective over the device factors of the
group's axes (`psum` over the device axes after a local sum; an `all_gather`
of the devices' blocks, then each position's result). Beside each rule is its
local computation: `members` (every position's value, in group order) and a
position's index in the group -> that position's result. `rule_for` reads
the table for a JAX primitive, through the tracer's table of collective
primitives (`primitives.collective_records`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pmapc import axis_labels, collectives, folding
from pmapc.collectives import Collective
from pmapc.errors import ShapeError, UnsupportedError
from pmapc.lowering import fold_ragged, jax_api, primitives
from pmapc.lowering.fold_values import Positions, Value, located, merge_dims, slice_in_dim

# A rule: (the body's positions, the equation, its operands) -> its results.
Rule = Callable[[Positions, object, list[Value]], list[Value]]
# A local computation: (members [group size, ...], a position's index in the group:
# an int where it is known while tracing, else traced) -> that position's result.
Local = Callable[[object, object], object]


# ----------------------------------------------------------------------------
# Groups: the axes a collective acts over, as the body's positions fold them


@dataclasses.dataclass(frozen=True)
class _Group:
    """The axes a collective acts over, as the frame folds them."""

    indices: tuple[int, ...]  # frame axes, in the order the collective names them
    external: tuple  # names no enclosing map binds (a jax.vmap's), reduced on devices

    def device_names(self, frame: Positions) -> tuple:
        return tuple(frame.axes[i].name for i in self.indices if frame.axes[i].devices > 1)

    def size(self, frame: Positions) -> int:
        return math.prod(frame.axes[i].size for i in self.indices)


def _group(frame: Positions, eqn, collective: Collective | None) -> _Group:
    indices, external = [], []
    for name in jax_api.named_axes(eqn.params):
        index = frame.resolve(name)
        if index is None:
            external.append(name)
        else:
            indices.append(index)
    if external and (collective is None or not collective.reduction):
        labels = ", ".join(f"'{axis_labels.axis_label(n)}'" for n in external)
        raise located(
            eqn,
            UnsupportedError(
                f"'{eqn.primitive.name}' over {labels} (no pmapc.pmap binds it) together with "
                "folded map axes cannot be folded; only psum, pmax and pmin may name such "
                "an axis in a folded nest"
            ),
        )
    return _Group(tuple(indices), tuple(external))


def _checked_params(frame: Positions, eqn, collective: Collective):
    """The collective's parameters, checked as the unfolded nest checks them (its
    tracer and verify-axes): an axis named twice, operand types, index groups and
    shapes, in the same typed errors at the user's line."""
    primitives.axes_of(eqn.params)
    primitives.check_operand_types(collective, [var.aval for var in eqn.invars])
    params = collective.params_from_jax(eqn.params)
    resolved = [frame.resolve(name) for name in jax_api.named_axes(eqn.params)]
    indices = [i for i in resolved if i is not None]
    if indices and len(indices) == len(resolved):  # (a jax.vmap's axes: no group to check)
        labels = tuple(axis_labels.axis_label(frame.axes[i].name) for i in indices)
        size = math.prod(frame.axes[i].size for i in indices)
        operands = [tuple(var.aval.shape) for var in eqn.invars]
        try:
            collective.result_shapes(params, operands, labels, size)
        except ShapeError as error:
            raise located(eqn, error) from None
    return params


def _positional_axes(params) -> tuple[int, ...]:
    names = params.get("axes", params.get("axis_name", ()))
    names = names if isinstance(names, (tuple, list)) else (names,)
    return tuple(n for n in names if isinstance(n, int) and not isinstance(n, bool))


def _group_index(frame: Positions, group: _Group) -> Value:
    """Each folded position's index in its group's row-major order of the axes."""
    total = Value(jnp.asarray(0, np.int32))
    for i in group.indices:
        position = frame.position(i)
        stride = math.prod(frame.axes[j].size for j in group.indices[group.indices.index(i) + 1 :])
        term = Value(position.array * np.int32(stride), position.batch)
        total = frame.add(total, term)
    return total


def _device_index(frame: Positions, group: _Group):
    """This device's index among the devices of the group (row-major over the device
    factors of its axes; 0 when the group lies within the device's block)."""
    index = jnp.asarray(0, np.int32)
    stride = 1
    for i in reversed(group.indices):
        axis = frame.axes[i]
        if axis.devices > 1:
            index = index + lax.axis_index(axis.name) * np.int32(stride)
            stride *= axis.devices
    return index


def _where_device(device, delivered: np.ndarray, value, otherwise):
    """`value` on the devices `delivered` marks, else `otherwise` (zeros if None)."""
    if otherwise is None:
        otherwise = jnp.zeros_like(value)
    if delivered.all():
        return value
    return jnp.where(jnp.asarray(delivered)[device], value, otherwise)


def _gathered(frame: Positions, group: _Group, value: Value, compute) -> Value:
    """A collective computed from every position's value in its group: the values of
    the group's positions on other devices gathered (none when the group lies within
    the device's block), then `compute(members, index in the group)` at each folded
    position."""
    return _gathered_many(frame, group, [value], lambda members, i: compute(members[0], i))


def _gathered_many(frame: Positions, group: _Group, values: list[Value], compute) -> Value:
    """`_gathered` of a collective of several operands (ragged_all_to_all's): each
    operand's members, `compute(list of members, index in the group)`."""
    folded = [i for i in group.indices if frame.axes[i].local > 1]
    batch = tuple(sorted({*folded, *(i for value in values for i in value.batch)}))
    values = [frame.with_batch(value, *batch) for value in values]
    members = [_members(frame, group, value) for value in values]
    others = tuple(i for i in batch if i not in folded)
    sizes = tuple(frame.axes[i].local for i in batch)
    static = _static_group_index(frame, group, batch)
    if static is not None:
        # a group within the device's block: each position's index in it is known, so
        # its result is slices of the members (no collective, no gather)
        flat = [jnp.reshape(m, (-1, *np.shape(m)[len(others) :])) for m in members]
        other_sizes = [frame.axes[i].local for i in others]
        outs = []
        for position in np.ndindex(*sizes):
            row = (
                np.ravel_multi_index([position[batch.index(i)] for i in others], other_sizes)
                if others
                else 0
            )
            outs.append(compute([f[row] for f in flat], int(static[position])))
        return Value(jnp.reshape(jnp.stack(outs), (*sizes, *np.shape(outs[0]))), batch)
    index = frame.with_batch(_group_index(frame, group), *batch)
    # the members (over the other axes' batch) at each position of the full batch
    spread = [frame.with_batch(Value(m, others), *batch).array for m in members]
    flat_members = [jnp.reshape(a, (-1, *np.shape(a)[len(batch) :])) for a in spread]
    flat_index = jnp.reshape(index.array, (-1,))
    out = jax.vmap(compute)(flat_members, flat_index)
    return Value(jnp.reshape(out, (*sizes, *np.shape(out)[1:])), batch)


def _static_group_index(frame: Positions, group: _Group, batch: tuple[int, ...]):
    """Each folded position's index in its group, over `batch`, as a numpy array when
    the group lies within every device's block (else None: it depends on the device)."""
    if any(frame.axes[i].devices > 1 for i in group.indices):
        return None
    sizes = tuple(frame.axes[i].local for i in batch)
    index = np.zeros(sizes, np.int64)
    coordinates = np.indices(sizes) if sizes else np.zeros((0,), np.int64)
    for i in group.indices:
        stride = math.prod(frame.axes[j].size for j in group.indices[group.indices.index(i) + 1 :])
        if frame.axes[i].local > 1:
            index = index + coordinates[batch.index(i)] * stride
    return index


def _members(frame: Positions, group: _Group, value: Value):
    """[other batch dims..., group size, value dims...]: every position of the group
    (row-major over its axes) for each of the value's other folded positions."""
    array = value.array
    device_axes = [i for i in group.indices if frame.axes[i].devices > 1]
    if device_axes:
        gathered = lax.all_gather(array, tuple(frame.axes[i].name for i in device_axes))
        array = jnp.reshape(
            gathered, (*[frame.axes[i].devices for i in device_axes], *np.shape(array))
        )
    # dimensions now: [device axes..., value.batch..., rest]
    nd = len(device_axes)
    nb = len(value.batch)
    others = [d for d, i in enumerate(value.batch) if i not in group.indices]
    order = [nd + d for d in others]
    for i in group.indices:
        if i in device_axes:
            order.append(device_axes.index(i))
        if frame.axes[i].local > 1:
            order.append(nd + value.batch.index(i))
    order += list(range(nd + nb, np.ndim(array)))
    array = jnp.transpose(array, order)
    shape = np.shape(array)
    return jnp.reshape(array, (*shape[: len(others)], group.size(frame), *shape[nd + nb :]))


def _index_group(groups, size: int):
    """(members, index) -> (the members of the position's index group, its rank
    there); every member and the index itself without index groups."""
    if groups is None:
        return lambda members, index: (members, index)
    group_of, rank_of = folding.index_group_tables(groups, size)

    def select(members, index):
        if isinstance(index, int):
            group = groups[group_of[index]]
            return jnp.stack([members[m] for m in group]), int(rank_of[index])
        table = np.asarray(groups, np.int32)  # groups of one size (all but reductions)
        group = jnp.asarray(table)[jnp.asarray(group_of)[index]]
        return members[group], jnp.asarray(rank_of)[index]

    return select


# ----------------------------------------------------------------------------
# psum, pmax, pmin

# What psum, pmax and pmin compute over the positions a device holds.
_LOCAL_REDUCTIONS = {"psum": jnp.sum, "pmax": jnp.max, "pmin": jnp.min}


def _reduction(collective: Collective):
    reduce_local = _LOCAL_REDUCTIONS[collective.kind]
    bind_device = {"psum": lax.psum, "pmax": lax.pmax, "pmin": lax.pmin}[collective.kind]

    def rule(frame: Positions, eqn, args: list[Value]) -> list[Value]:
        params = _checked_params(frame, eqn, collective)
        group = _group(frame, eqn, collective)
        positional = _positional_axes(eqn.params)
        if params.index_groups is not None:
            compute = _reduced_members(collective, params, group.size(frame))
            return [
                _gathered(frame, group, _reduced(value, positional, reduce_local), compute)
                for value in args
            ]
        folded = [i for i in group.indices if frame.axes[i].local > 1]
        device_names = (*group.device_names(frame), *group.external)
        results = []
        for value in args:
            value = frame.with_batch(value, *folded)
            array = value.array
            nb = len(value.batch)
            dims = [value.batch.index(i) for i in folded] + [nb + p for p in positional]
            if dims:
                array = reduce_local(array, axis=tuple(dims))
            batch = tuple(i for i in value.batch if i not in folded)
            if device_names:
                array = bind_device(array, device_names)
            results.append(Value(array, batch))
        return results

    return rule


def _reduced(value: Value, positional: tuple[int, ...], reduce_local) -> Value:
    """`value` reduced over a jax.vmap's positional axes of a reduction (locally)."""
    if not positional:
        return value
    nb = len(value.batch)
    return Value(reduce_local(value.array, axis=tuple(nb + p for p in positional)), value.batch)


def _reduced_members(collective: Collective, params, size: int) -> Local:
    """A reduction over the position's group: index groups of any sizes, the members
    outside the position's group counted as the reduction's identity."""
    reduce = _LOCAL_REDUCTIONS[collective.kind]
    groups = params.index_groups
    if groups is None:
        return lambda members, index: reduce(members, axis=0)
    group_of, _ = folding.index_group_tables(groups, size)
    same = np.equal.outer(group_of, group_of)

    def grouped_reduction(members, index):
        if isinstance(index, int):
            inside = [m for m in range(size) if same[index, m]]
            return reduce(jnp.stack([members[m] for m in inside]), axis=0)
        inside = jnp.asarray(same)[index].reshape((size,) + (1,) * (members.ndim - 1))
        return reduce(jnp.where(inside, members, _identity(collective.kind, members.dtype)), axis=0)

    return grouped_reduction


def _identity(kind: str, dtype):
    """The value that leaves a psum, pmax or pmin as it is."""
    if kind == "psum":
        return jnp.zeros((), dtype)
    if dtype == np.bool_:
        return jnp.asarray(kind == "pmin")
    if jnp.issubdtype(dtype, jnp.floating):
        return jnp.asarray(-np.inf if kind == "pmax" else np.inf, dtype)
    info = jnp.iinfo(dtype)
    return jnp.asarray(info.min if kind == "pmax" else info.max, dtype)


# ----------------------------------------------------------------------------
# all_gather, psum_scatter, all_to_all: each position's result from the group's
# members, or a form of the kind's own for a group that spans devices


def _members_rule(collective: Collective, members, across_devices=None) -> Rule:
    """The rule of `collective`: `across_devices(frame, group, value, params)` where
    given, without index groups, for a group that spans devices; else each position's
    result by `members(params, group size)` (its local computation) from the values
    of the group's positions."""

    def rule(frame: Positions, eqn, args: list[Value]) -> list[Value]:
        params = _checked_params(frame, eqn, collective)
        group = _group(frame, eqn, collective)
        spans = params.index_groups is None and _spans_devices(frame, group)
        if across_devices is not None and spans:
            return [across_devices(frame, group, value, params) for value in args]
        compute = members(params, group.size(frame))
        return [_gathered(frame, group, value, compute) for value in args]

    return rule


def _gathered_members(params, size: int) -> Local:
    select = _index_group(params.index_groups, size)
    dim, tiled = params.all_gather_dimension, params.tiled

    def all_gather(members, index):
        chosen = jnp.moveaxis(select(members, index)[0], 0, dim)
        return merge_dims(chosen, dim) if tiled else chosen

    return all_gather


# ----------------------------------------------------------------------------
# psum_scatter


def _scattered_members(params, size: int) -> Local:
    select = _index_group(params.index_groups, size)
    dim, tiled = params.scatter_dimension, params.tiled

    def psum_scatter(members, index):
        chosen, rank = select(members, index)
        total = jnp.sum(chosen, axis=0)
        chunk = np.shape(total)[dim] // np.shape(chosen)[0] if tiled else 1
        part = slice_in_dim(total, rank * chunk, chunk, dim)
        return part if tiled else jnp.squeeze(part, dim)

    return psum_scatter


def _psum_scattered(frame: Positions, group: _Group, value: Value, params) -> Value:
    """A psum_scatter whose group spans devices: the block's rows summed, then a
    psum_scatter over the device factors that leaves each device the chunks of its
    positions, and each position its own chunk."""
    axes = [frame.axes[i] for i in group.indices]
    folded = [i for i in group.indices if frame.axes[i].local > 1]
    value = frame.with_batch(value, *folded)
    partial = value.array
    if folded:
        partial = jnp.sum(partial, axis=tuple(value.batch.index(i) for i in folded))
    others = [i for i in value.batch if i not in folded]
    dim = len(others) + params.scatter_dimension
    shape = list(np.shape(partial))
    chunk = shape[dim] // group.size(frame)
    # the scattered dimension as (devices, local) per axis of the group, then the chunk
    factors = [n for axis in axes for n in (axis.devices, axis.local)]
    split = jnp.reshape(partial, (*shape[:dim], *factors, chunk, *shape[dim + 1 :]))
    devices_first = (
        [dim + 2 * k for k in range(len(axes))]
        + [dim + 2 * k + 1 for k in range(len(axes))]
        + [dim + 2 * len(axes)]
    )
    order = [*range(dim), *devices_first, *range(dim + 2 * len(axes) + 1, np.ndim(split))]
    arranged = jnp.reshape(jnp.transpose(split, order), (*shape[:dim], -1, *shape[dim + 1 :]))
    mine = lax.psum_scatter(arranged, group.device_names(frame), scatter_dimension=dim, tiled=True)
    # this device's chunks: (local place per folded axis, chunk) -> the batch
    locals_ = [frame.axes[i].local for i in folded]
    blocks = jnp.reshape(mine, (*shape[:dim], *locals_, chunk, *shape[dim + 1 :]))
    leading = [*range(dim, dim + len(folded)), *range(dim)]
    current = [*folded, *others]
    to_batch = [leading[current.index(i)] for i in value.batch]
    rest = [d for d in range(np.ndim(blocks)) if d not in to_batch]
    result = jnp.transpose(blocks, [*to_batch, *rest])
    if not params.tiled:
        result = jnp.squeeze(result, len(value.batch) + params.scatter_dimension)
    return Value(result, value.batch)


# ----------------------------------------------------------------------------
# all_to_all


def _all_to_all_members(params, size: int) -> Local:
    select = _index_group(params.index_groups, size)
    split_axis, concat_axis = params.split_axis, params.concat_axis

    def all_to_all(members, index):
        chosen, rank = select(members, index)
        count = np.shape(chosen)[0]
        chunk = np.shape(chosen)[1 + split_axis] // count
        mine = slice_in_dim(chosen, rank * chunk, chunk, 1 + split_axis)
        return merge_dims(jnp.moveaxis(mine, 0, concat_axis), concat_axis)

    return all_to_all


def _all_to_all(frame: Positions, group: _Group, value: Value, params) -> Value:
    """An all_to_all whose group spans devices: the chunks for each device's positions
    travel in one all_to_all of the devices, and each position concatenates the
    chunks it got, from every position of the group in order."""
    axes = [frame.axes[i] for i in group.indices]
    folded = [i for i in group.indices if frame.axes[i].local > 1]
    value = frame.with_batch(value, *folded)
    others = [i for i in value.batch if i not in folded]
    # [others..., folded (in the group's order)..., rest]
    array = jnp.transpose(
        value.array,
        [
            *(value.batch.index(i) for i in others),
            *(value.batch.index(i) for i in folded),
            *range(len(value.batch), np.ndim(value.array)),
        ],
    )
    lead = len(others) + len(folded)
    rest = list(np.shape(array)[lead:])
    split = lead + params.split_axis
    chunk = rest[params.split_axis] // group.size(frame)
    # the split dimension as (devices, local) per axis, then the chunk; devices first
    factors = [n for axis in axes for n in (axis.devices, axis.local)]
    shape = list(np.shape(array))
    array = jnp.reshape(array, (*shape[:split], *factors, chunk, *shape[split + 1 :]))
    k = len(axes)
    order = [
        *range(split),
        *(split + 2 * j for j in range(k)),
        *(split + 2 * j + 1 for j in range(k)),
        *range(split + 2 * k, np.ndim(array)),
    ]
    array = jnp.transpose(array, order)
    device_count = math.prod(axis.devices for axis in axes)
    local_sizes = [axis.local for axis in axes]
    array = jnp.reshape(
        array, (*shape[:split], device_count, *local_sizes, chunk, *shape[split + 1 :])
    )
    # [source device, others..., source places..., rest before, target places..., chunk, ...]
    received = lax.all_to_all(
        array, group.device_names(frame), split_axis=split, concat_axis=0, tiled=False
    )
    device_sizes = [axis.devices for axis in axes if axis.devices > 1]
    places = list(np.ndindex(*[frame.axes[i].local for i in folded]))
    outs = []
    for place in places:
        index: list = [slice(None)] * np.ndim(received)
        coordinates = dict(zip(folded, place))
        for j, i in enumerate(group.indices):
            index[1 + split + j] = coordinates.get(i, 0)
        mine = received[tuple(index)]
        # [source device, others..., source places..., rest (split dim: the chunk)]
        mine = jnp.reshape(mine, (*device_sizes, *np.shape(mine)[1:]))
        nd = len(device_sizes)
        source_dims = []  # (device dim, place dim) per axis of the group, in its order
        device_axes = [a for a in group.indices if frame.axes[a].devices > 1]
        for i in group.indices:
            axis = frame.axes[i]
            if axis.devices > 1:
                source_dims.append(device_axes.index(i))
            if axis.local > 1:
                source_dims.append(nd + len(others) + folded.index(i))
        other_dims = list(range(nd, nd + len(others)))
        rest_dims = list(range(nd + len(others) + len(folded), np.ndim(mine)))
        concat = params.concat_axis
        order = [*other_dims, *rest_dims[:concat], *source_dims, *rest_dims[concat:]]
        arranged = jnp.transpose(mine, order)
        at = len(other_dims) + concat
        outs.append(
            jnp.reshape(
                arranged,
                (*np.shape(arranged)[:at], -1, *np.shape(arranged)[at + len(source_dims) + 1 :]),
            )
        )
    if not folded:
        return Value(outs[0], value.batch)
    stacked = jnp.reshape(
        jnp.stack(outs), (*[frame.axes[i].local for i in folded], *np.shape(outs[0]))
    )
    current = [*folded, *others]
    order = [current.index(i) for i in value.batch]
    return Value(
        jnp.transpose(stacked, [*order, *range(len(current), np.ndim(stacked))]), value.batch
    )


# ----------------------------------------------------------------------------
# ppermute


def _ppermute_rule(frame: Positions, eqn, args: list[Value]) -> list[Value]:
    params = _checked_params(frame, eqn, collectives.PPERMUTE)
    group = _group(frame, eqn, collectives.PPERMUTE)
    # ppermute counts a group's positions in mesh order, whatever the order the axes
    # are named in (as JAX 0.4.30 does; shared/REFERENCE.md)
    group = dataclasses.replace(group, indices=tuple(sorted(group.indices)))
    assert isinstance(params, collectives.PpermuteParams)
    return [_ppermuted(frame, group, value, params.perm) for value in args]


def _ppermuted(frame: Positions, group: _Group, value: Value, perm) -> Value:
    """A ppermute folded: each pair splits into the positions' blocks (source and
    target device) and their places in the blocks (`folding.permutation_classes`).
    Pairs between the same two places of the blocks are one permutation of the
    devices: a ppermute over the device factors where it moves a value between
    devices, a copy where the devices agree. Each target place takes the value of
    the one permutation that delivers to it on its device (zeros where none does)."""
    axes = [frame.axes[i] for i in group.indices]
    folded = [i for i in group.indices if frame.axes[i].local > 1]
    value = frame.with_batch(value, *folded)
    device_sizes = [axis.devices for axis in axes]
    local_sizes = [axis.local for axis in axes]
    classes = folding.permutation_classes(perm, device_sizes, local_sizes)
    device = _device_index(frame, group)  # this device's index among the group's
    outs = []
    for place_coordinates in np.ndindex(*[frame.axes[i].local for i in folded]):
        coordinates = [
            place_coordinates[folded.index(i)] if i in folded else 0 for i in group.indices
        ]
        target_place = int(np.ravel_multi_index(coordinates, local_sizes))
        result = None
        for (source_place, to_place), pairs in classes.items():
            if to_place == target_place:
                part = _block_place(frame, group, value, source_place)
                result = _delivered(frame, group, device, pairs, part, result)
        outs.append(
            jnp.zeros_like(_block_place(frame, group, value, 0)) if result is None else result
        )
    if not folded:
        return Value(outs[0], value.batch)
    shape = [frame.axes[i].local for i in folded]
    array = jnp.reshape(jnp.stack(outs), (*shape, *np.shape(outs[0])))
    # dimensions [folded..., others..., rest] in the batch's order
    current = [*folded, *(i for i in value.batch if i not in folded)]
    order = [current.index(i) for i in value.batch]
    array = jnp.transpose(array, [*order, *range(len(current), np.ndim(array))])
    return Value(array, value.batch)


def _block_place(frame: Positions, group: _Group, value: Value, place: int):
    """The value at place `place` of the device's block of the group (over the other
    batch axes)."""
    local_sizes = [frame.axes[i].local for i in group.indices]
    coordinates = np.unravel_index(place, local_sizes)
    index: list[slice | int] = [slice(None)] * len(value.batch)
    for i, c in zip(group.indices, coordinates):
        if frame.axes[i].local > 1:
            index[value.batch.index(i)] = int(c)
    return value.array[tuple(index)]


def _delivered(frame: Positions, group: _Group, device, pairs, part, result):
    """`result` where the devices `pairs` (source, target) deliver `part` to a target:
    a ppermute of the device factors for those that move, `part` itself for those
    that stay."""
    device_count = math.prod(frame.axes[i].devices for i in group.indices)
    moved = [(s, t) for s, t in pairs if s != t]
    stays = [t for s, t in pairs if s == t]
    if moved:
        received = lax.ppermute(part, group.device_names(frame), moved)
        delivered = np.zeros(device_count, bool)
        delivered[[t for _, t in moved]] = True
        result = _where_device(device, delivered, received, result)
    if stays:
        delivered = np.zeros(device_count, bool)
        delivered[stays] = True
        result = _where_device(device, delivered, part, result)
    return result


# ----------------------------------------------------------------------------
# axis_index


def _axis_index_rule(frame: Positions, eqn, args: list[Value]) -> list[Value]:
    _checked_params(frame, eqn, collectives.AXIS_INDEX)
    group = _group(frame, eqn, collectives.AXIS_INDEX)
    return [_group_index(frame, group)]


def _ragged_rule(frame: Positions, eqn, args: list[Value]) -> list[Value]:
    """ragged_all_to_all: each position's writes from its group's operands
    (lowering/fold_ragged.py), the members on other devices gathered."""
    collective = collectives.RAGGED_ALL_TO_ALL
    params = _checked_params(frame, eqn, collective)
    group = _group(frame, eqn, collective)
    select = _index_group(params.index_groups, group.size(frame))

    def compute(members, index):
        chosen = [select(m, index) for m in members]
        return fold_ragged.receive([m for m, _ in chosen], chosen[0][1])

    return [_gathered_many(frame, group, args, compute)]


# ----------------------------------------------------------------------------
# Primitives that are no collective of pmapc's


def _pbroadcast_rule(frame: Positions, eqn, args: list[Value]) -> list[Value]:
    group = _group(frame, eqn, None)
    if len(args) == 2:  # 0.12's pbroadcast with a traced source
        value, source = args
        if source.batch:
            raise located(
                eqn,
                UnsupportedError(
                    "pbroadcast in a folded nest needs a source that is the same at every "
                    "position; compute it outside the map or from axes that are not folded"
                ),
            )
        index = source.array
    else:
        value, index = args[0], eqn.params["source"]
    return [_gathered(frame, group, value, lambda members, _: members[index])]


def _identity_rule(frame: Positions, eqn, args: list[Value]) -> list[Value]:
    return list(args)


# ----------------------------------------------------------------------------
# The tables


def _spans_devices(frame: Positions, group: _Group) -> bool:
    return any(frame.axes[i].devices > 1 for i in group.indices)


RULES: dict[Collective, Rule] = {
    collectives.PSUM: _reduction(collectives.PSUM),
    collectives.PMAX: _reduction(collectives.PMAX),
    collectives.PMIN: _reduction(collectives.PMIN),
    collectives.ALL_GATHER: _members_rule(collectives.ALL_GATHER, _gathered_members),
    collectives.PSUM_SCATTER: _members_rule(
        collectives.PSUM_SCATTER, _scattered_members, _psum_scattered
    ),
    collectives.ALL_TO_ALL: _members_rule(collectives.ALL_TO_ALL, _all_to_all_members, _all_to_all),
    collectives.RAGGED_ALL_TO_ALL: _ragged_rule,
    collectives.PPERMUTE: _ppermute_rule,
    collectives.AXIS_INDEX: _axis_index_rule,
}


def rule_for(primitive) -> Rule | None:
    """The fold's rule for a JAX primitive: its collective's, pbroadcast's, or an
    identity (asynchronous dones, layout marks); None for any other primitive."""
    return _primitive_rules().get(primitive)


@functools.cache
def _primitive_rules() -> dict:
    rules: dict = {p: RULES[c] for p, c in primitives.collective_records().items()}
    rules[jax_api.PBROADCAST] = _pbroadcast_rule
    if jax_api.PBROADCAST_DYNAMIC is not None:
        rules[jax_api.PBROADCAST_DYNAMIC] = _pbroadcast_rule
    _, dones = jax_api.async_collectives()
    rules.update((p, _identity_rule) for p in (*dones, *jax_api.IDENTITY_PRIMITIVES))
    return rules

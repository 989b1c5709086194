"""Folding a nest onto fewer devices than its mesh has positions.

A nest whose mesh has N positions runs on K devices, K dividing N, each device
running a block of N/K consecutive positions (row-major): the outer axes keep
their devices and the inner ones fold first. Going outermost first with the K
devices still to share out, a map of size S takes all S of them as devices
when S divides what is left, or what is left (which must divide S) and folds
the rest of its positions onto each device; a nest that cannot be laid out so
cannot be folded (`FoldError`). Each map of the nest becomes a map over its
device factor whose body runs its folded positions at once, batched:

- an ordinary equation runs batched over the folded positions its operands
  vary over, as nested `jax.vmap` runs it;
- a collective becomes a local computation over the positions a device holds
  and, where its groups span devices, a collective over the device axes
  (a `psum` over `('data', 'model')` with `model` folded: a sum over the
  device's model positions, then a `psum` over `data`).

The result is an ordinary nest over K devices, compiled as any other: what
lowers, runs and shows it (`jax.jit`, the passes, the plan) is unchanged.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pmapc import collectives, dialect
from pmapc.collectives import Collective
from pmapc.errors import DeviceError, ShapeError, SourceLoc, UnsupportedError
from pmapc.lowering import jax_api, primitives


class FoldError(DeviceError):
    """A nest that cannot be folded onto the devices asked for."""


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


@dataclasses.dataclass(frozen=True)
class Fold:
    """A nest folded onto `devices` (distinct, in mesh order)."""

    devices: tuple
    positions: int  # the mesh's positions, unfolded


# ----------------------------------------------------------------------------
# The folded program


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


def bind_folded(
    fold: Fold, operands, mesh_of_nest, *, jaxpr, axis_name, axis_size, in_axes, out_axes, name
):
    """Bind the outermost map of a nest folded onto `fold.devices`: the nest over the
    device factors, whose bodies run the folded positions batched. `mesh_of_nest`
    (placement's) places the folded nest on the devices."""
    folded: dict[str, int] = {}  # axis label -> positions per device, as maps fold
    frame = _Frame((), len(fold.devices), folded)
    values = [Value(x) for x in operands]

    def bind_device_map(device_operands, **params):
        mesh = mesh_of_nest(
            params["jaxpr"], axis_name, params["axis_size"], list(fold.devices), None
        )
        return primitives.bind_map(device_operands, mesh=mesh, fold=tuple(folded.items()), **params)

    outs = frame.map(jaxpr, values, axis_name, axis_size, in_axes, out_axes, name, bind_device_map)
    return [value.array for value in outs]


class _Frame:
    """Interprets a map body's jaxpr over the folded positions of `axes` (every
    enclosing map's, outermost first), `devices_left` devices left to inner maps."""

    def __init__(self, axes: tuple[Axis, ...], devices_left: int, folded: dict) -> None:
        self.axes = axes
        self.devices_left = devices_left
        self.folded = folded  # the nest's: axis label -> positions per device

    # -- maps --------------------------------------------------------------------

    def map(self, jaxpr, operands, axis_name, axis_size, in_axes, out_axes, name, outermost=None):
        """The map over `axis_name` of body `jaxpr` on `operands` (Values of this
        frame): a map over its device factor, bound by `outermost(device operands,
        **params)` for the outermost map (with its mesh), else as a nested map; a
        nested map on one device, inline."""
        devices, local, left = _split_or_refuse(axis_size, self.devices_left, axis_name)
        axis = Axis(axis_name, axis_size, devices, local)
        if local > 1:
            label = dialect.axis_label(axis_name)
            self.folded[label] = max(self.folded.get(label, 1), local)
        inner = _Frame((*self.axes, axis), left, self.folded)
        index = len(self.axes)
        device_operands, device_in_axes, arg_batches = [], [], []
        for value, in_axis in zip(operands, in_axes):
            array, batch = value.array, value.batch
            if in_axis is None:
                device_operands.append(array)
                device_in_axes.append(None)
                arg_batches.append((batch, None))
                continue
            at = len(batch) + in_axis
            array = _split_dim(array, at, devices, local)
            device_operands.append(array)
            device_in_axes.append(at)
            # in the body: the device's `local` positions at `at` (a dimension of
            # its own when local > 1), moved to the batch below
            arg_batches.append((batch, at if local > 1 else None))
        result_batches: list[tuple[int, ...]] = []

        def body(*blocks):
            values = []
            for block, (batch, local_at) in zip(blocks, arg_batches):
                if local_at is None:
                    values.append(Value(block, batch))
                else:
                    values.append(Value(jnp.moveaxis(block, local_at, len(batch)), (*batch, index)))
            results = inner.eval(jaxpr.jaxpr, jaxpr.consts, values)
            outs = []
            result_batches.clear()
            for value, out_axis in zip(results, out_axes):
                if out_axis is None:
                    value = inner.take_first(value, index)
                    outs.append(value.array)
                    result_batches.append(value.batch)
                    continue
                value = inner.with_batch(value, index) if local > 1 else value
                outer = tuple(i for i in value.batch if i != index)
                array = value.array
                if local > 1:
                    array = jnp.moveaxis(array, len(outer), len(outer) + out_axis)
                outs.append(array)
                result_batches.append(outer)
            return outs

        if devices == 1 and outermost is None:
            # a map all of whose positions are on each device: its body inline (no
            # collective names its axis on the devices: the frame's rules keep them local)
            blocks = [
                x if a is None else jnp.squeeze(x, a)
                for x, a in zip(device_operands, device_in_axes)
            ]
            outs = body(*blocks)
            device_out_axes = [
                None if out_axis is None else len(batch) + out_axis
                for out_axis, batch in zip(out_axes, result_batches)
            ]
            outs = [
                x if a is None else jnp.expand_dims(x, a) for x, a in zip(outs, device_out_axes)
            ]
        else:
            outs, device_out_axes = _bind_device_map(
                body,
                result_batches,
                (device_operands, device_in_axes),
                out_axes,
                (axis_name, devices, name),
                outermost or _bind_nested,
            )
        results = []
        for array, out_axis, batch in zip(outs, device_out_axes, result_batches):
            if out_axis is not None and local > 1:
                array = _merge_dims(array, out_axis)
            results.append(Value(array, batch))
        return results

    # -- equations -----------------------------------------------------------------

    def eval(self, jaxpr, consts, args: Sequence[Value]) -> list[Value]:
        env: dict = {}
        for var, value in zip(jaxpr.constvars, consts):
            env[var] = Value(value)
        for var, value in zip(jaxpr.invars, args):
            env[var] = value

        def read(atom) -> Value:
            return Value(atom.val) if isinstance(atom, jax_api.Literal) else env[atom]

        for eqn in jaxpr.eqns:
            outs = self.equation(eqn, [read(atom) for atom in eqn.invars])
            for var, value in zip(eqn.outvars, outs):
                if not isinstance(var, jax_api.DropVar):
                    env[var] = value
        return [read(atom) for atom in jaxpr.outvars]

    def equation(self, eqn, args: list[Value]) -> list[Value]:
        primitive = eqn.primitive
        if primitive is primitives.map_p:
            params = eqn.params
            with jax_api.at_equation(eqn):
                return self.map(
                    params["jaxpr"],
                    args,
                    params["axis_name"],
                    params["axis_size"],
                    params["in_axes"],
                    params["out_axes"],
                    params["name"],
                )
        rule = _rules().get(primitive)
        if rule is not None:
            with jax_api.at_equation(eqn):
                return rule(self, eqn, args)
        if self._holds_folded(eqn):
            control = _CONTROL_FLOW.get(primitive.name)
            if control is not None:
                with jax_api.at_equation(eqn):
                    return control(self, eqn, args)
            body = jax_api.call_body(eqn)
            if body is None:
                raise _at(eqn, self._unsupported(eqn))
            jaxpr, consts = body
            return self.eval(jaxpr, consts, args)
        return self.batched(eqn, args)

    # -- control flow holding folded collectives: every folded position runs each
    # trip or branch together, values batched over all of them (as jax.vmap runs a
    # loop whose predicate varies: trips continue while any position's holds)

    def full_batch(self) -> tuple[int, ...]:
        """Every folded axis of the frame."""
        return tuple(i for i, axis in enumerate(self.axes) if axis.local > 1)

    def run(self, closed, args: Sequence[Value]) -> list[Value]:
        return self.eval(closed.jaxpr, closed.consts, args)

    def arrays(self, values: Sequence[Value], batch: tuple[int, ...]) -> list:
        return [self.with_batch(value, *batch).array for value in values]

    def selected(self, predicate: Value, new: list, old: list, batch: tuple[int, ...]) -> list:
        """`new` where `predicate` holds at a folded position, else `old`."""
        mask = self.with_batch(predicate, *batch).array
        return [
            jnp.where(jnp.reshape(mask, np.shape(mask) + (1,) * (np.ndim(n) - len(batch))), n, o)
            for n, o in zip(new, old)
        ]

    def while_loop(self, eqn, args: list[Value]) -> list[Value]:
        params = eqn.params
        cond_count, body_count = params["cond_nconsts"], params["body_nconsts"]
        cond_consts, body_consts = args[:cond_count], args[cond_count : cond_count + body_count]
        batch = self.full_batch()

        def predicate(carry) -> Value:
            carried = [Value(c, batch) for c in carry]
            return self.run(params["cond_jaxpr"], [*cond_consts, *carried])[0]

        def cond(carry):
            holds = predicate(carry)
            return jnp.any(holds.array) if holds.batch else holds.array

        def body(carry):
            carried = [Value(c, batch) for c in carry]
            new = self.arrays(self.run(params["body_jaxpr"], [*body_consts, *carried]), batch)
            holds = predicate(carry)
            return self.selected(holds, new, list(carry), batch) if holds.batch else new

        init = self.arrays(args[cond_count + body_count :], batch)
        return [Value(out, batch) for out in lax.while_loop(cond, body, init)]

    def scan(self, eqn, args: list[Value]) -> list[Value]:
        params = eqn.params
        consts, init, xs = jax_api.scan_operands(params, args)
        carry_count = len(init)
        batch = self.full_batch()

        def body(carry, slices):
            carried = [Value(c, batch) for c in carry]
            sliced = [Value(x, value.batch) for x, value in zip(slices, xs)]
            outs = self.run(params["jaxpr"], [*consts, *carried, *sliced])
            return (
                self.arrays(outs[:carry_count], batch),
                self.arrays(outs[carry_count:], batch),
            )

        init = self.arrays(init, batch)
        scanned = [jnp.moveaxis(x.array, len(x.batch), 0) for x in xs]
        carry, ys = lax.scan(
            body,
            init,
            scanned,
            length=params["length"],
            reverse=params["reverse"],
            unroll=params["unroll"],
        )
        stacked = [Value(jnp.moveaxis(y, 0, len(batch)), batch) for y in ys]
        return [*(Value(c, batch) for c in carry), *stacked]

    def cond(self, eqn, args: list[Value]) -> list[Value]:
        index, operands = args[0], args[1:]
        batch = self.full_batch()

        def branch(closed):
            def run(*arrays):
                values = [Value(a, v.batch) for a, v in zip(arrays, operands)]
                return self.arrays(self.run(closed, values), batch)

            return run

        branches = [branch(closed) for closed in eqn.params["branches"]]
        arrays = [v.array for v in operands]
        if not index.batch:
            return [Value(out, batch) for out in lax.switch(index.array, branches, *arrays)]
        # an index that varies over the folded positions: every branch, then each
        # position's own
        results = [run(*arrays) for run in branches]
        outs = results[0]
        for k, result in enumerate(results[1:], start=1):
            chosen = Value(jnp.equal(index.array, k), index.batch)
            outs = self.selected(chosen, result, outs, batch)
        return [Value(out, batch) for out in outs]

    def batched(self, eqn, args: list[Value]) -> list[Value]:
        """`eqn` on every folded position its operands vary over, as nested `jax.vmap`s
        (one per folded axis, outermost first) run it."""
        batch = tuple(sorted({i for value in args for i in value.batch}))
        if not batch:
            return [Value(x) for x in jax_api.bind_equation(eqn, [v.array for v in args])]
        fun = lambda *xs: jax_api.bind_equation(eqn, xs)  # noqa: E731
        for axis in reversed(batch):
            fun = jax.vmap(fun, in_axes=tuple(0 if axis in v.batch else None for v in args))
        # each vmap strips its axis from the operands that have it
        return [Value(x, batch) for x in fun(*[v.array for v in args])]

    def _holds_folded(self, eqn) -> bool:
        """Whether a jaxpr inside `eqn` holds a map or names an axis folded here."""
        folded = self.folded_names()
        return any(_names_folded(inner, folded) for inner in jax_api.jaxprs_in(eqn.params))

    def _unsupported(self, eqn) -> UnsupportedError:
        folded = sorted(self.folded_names(), key=str)
        names = ", ".join(f"'{dialect.axis_label(name)}'" for name in folded)
        return UnsupportedError(
            f"'{eqn.primitive.name}' holds a map or a collective over {names}, which is "
            "folded (its positions share devices), and pmapc cannot fold inside it; give "
            "the nest one device per position, or call the collective outside it"
        )

    def folded_names(self) -> set:
        """The axis names whose innermost binding here is folded (or on one device:
        those are bound on no device map)."""
        innermost: dict = {}
        for axis in self.axes:
            innermost[axis.name] = axis
        return {name for name, axis in innermost.items() if axis.local > 1 or axis.devices == 1}

    # -- batch dimensions ----------------------------------------------------------

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

    def position(self, index: int):
        """Axis `index`'s position of each folded position a device holds: a Value."""
        axis = self.axes[index]
        device = lax.axis_index(axis.name) if axis.devices > 1 else 0
        if axis.local == 1:
            return Value(jnp.asarray(device, np.int32))
        local = jnp.arange(axis.local, dtype=np.int32)
        return Value(device * axis.local + local, (index,))


# Control flow whose bodies hold folded collectives, by primitive name.
_CONTROL_FLOW = {"while": _Frame.while_loop, "scan": _Frame.scan, "cond": _Frame.cond}


def _bind_device_map(body, result_batches, operands, out_axes, axis, bind):
    """The map over a device factor: `body` traced on the device's blocks of `operands`
    ((arrays, their in_axes)), bound by `bind` as the map over `axis` ((name, device
    count, function name)); (its results, their out_axes)."""
    device_operands, device_in_axes = operands
    axis_name, devices, name = axis
    avals = [
        jax.ShapeDtypeStruct(_drop(np.shape(x), a), x.dtype, weak_type=jax_api.is_weakly_typed(x))
        for x, a in zip(device_operands, device_in_axes)
    ]
    with jax_api.tracing_map_body():
        closed = jax.make_jaxpr(body, axis_env=[(axis_name, devices)])(*avals)
    body_jaxpr, constants = jax_api.closure_to_arguments(closed)
    device_out_axes = [
        None if out_axis is None else len(batch) + out_axis
        for out_axis, batch in zip(out_axes, result_batches)
    ]
    outs = bind(
        [*constants, *device_operands],
        jaxpr=body_jaxpr,
        axis_name=axis_name,
        axis_size=devices,
        in_axes=[*[None] * len(constants), *device_in_axes],
        out_axes=device_out_axes,
        name=name,
    )
    return outs, device_out_axes


def _bind_nested(device_operands, **params):
    return primitives.bind_map(device_operands, mesh=None, **params)


def _split_or_refuse(size: int, devices_left: int, axis_name) -> tuple[int, int, int]:
    step = split(size, devices_left)
    if step is None:
        raise FoldError(
            f"the map over '{dialect.axis_label(axis_name)}' has {size} positions, which "
            f"{devices_left} device(s) cannot share row-major (neither divides the other); "
            "fold onto a device count that divides the mesh axis by axis"
        )
    return step


def _names_folded(jaxpr, folded: set) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive is primitives.map_p:
            return True
        if any(name in folded for name in jax_api.named_axes(eqn.params)):
            return True
        if any(_names_folded(inner, folded) for inner in jax_api.jaxprs_in(eqn.params)):
            return True
    return False


def _at(eqn, error):
    where = jax_api.user_line(eqn)
    return error.at(SourceLoc(*where, 0)) if where is not None else error


def _drop(shape, axis):
    shape = tuple(shape)
    return shape if axis is None else shape[:axis] + shape[axis + 1 :]


def _split_dim(array, at: int, devices: int, local: int):
    """Dimension `at` (devices times local positions) split in two, devices major."""
    if local == 1:
        return array
    shape = np.shape(array)
    return jnp.reshape(array, (*shape[:at], devices, local, *shape[at + 1 :]))


def _merge_dims(array, at: int):
    """Dimensions `at` and `at + 1` merged, the first major."""
    shape = np.shape(array)
    return jnp.reshape(array, (*shape[:at], shape[at] * shape[at + 1], *shape[at + 2 :]))


# ----------------------------------------------------------------------------
# Collectives


@dataclasses.dataclass(frozen=True)
class _Group:
    """The axes a collective acts over, as the frame folds them."""

    indices: tuple[int, ...]  # frame axes, in the order the collective names them
    external: tuple  # names no enclosing map binds (a jax.vmap's), reduced on devices

    def device_names(self, frame: _Frame) -> tuple:
        return tuple(frame.axes[i].name for i in self.indices if frame.axes[i].devices > 1)

    def size(self, frame: _Frame) -> int:
        return math.prod(frame.axes[i].size for i in self.indices)


def _group(frame: _Frame, eqn, collective: Collective | None) -> _Group:
    indices, external = [], []
    for name in jax_api.named_axes(eqn.params):
        index = frame.resolve(name)
        if index is None:
            external.append(name)
        else:
            indices.append(index)
    if external and (collective is None or not collective.reduction):
        labels = ", ".join(f"'{dialect.axis_label(n)}'" for n in external)
        raise _at(
            eqn,
            UnsupportedError(
                f"'{eqn.primitive.name}' over {labels} (no pmapc.pmap binds it) together with "
                "folded map axes cannot be folded; only psum, pmax and pmin may name such "
                "an axis in a folded nest"
            ),
        )
    return _Group(tuple(indices), tuple(external))


# What psum, pmax and pmin compute over the positions a device holds.
_LOCAL_REDUCTIONS = {"psum": jnp.sum, "pmax": jnp.max, "pmin": jnp.min}


def _reduction(collective: Collective):
    reduce_local = _LOCAL_REDUCTIONS[collective.kind]
    bind_device = {"psum": lax.psum, "pmax": lax.pmax, "pmin": lax.pmin}[collective.kind]

    def rule(frame: _Frame, eqn, args: list[Value]) -> list[Value]:
        params = _checked_params(frame, eqn, collective)
        group = _group(frame, eqn, collective)
        positional = _positional_axes(eqn.params)
        if params.index_groups is not None:
            compute = _compute(collective, params, group.size(frame))
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


def _checked_params(frame: _Frame, eqn, collective: Collective):
    """The collective's parameters, checked as the unfolded nest checks them (its
    tracer and verify-axes): an axis named twice, operand types, index groups and
    shapes, in the same typed errors at the user's line."""
    primitives.axes_of(eqn.params)
    primitives.check_operand_types(collective, [var.aval for var in eqn.invars])
    params = collective.params_from_jax(eqn.params)
    resolved = [frame.resolve(name) for name in jax_api.named_axes(eqn.params)]
    indices = [i for i in resolved if i is not None]
    if indices and len(indices) == len(resolved):  # (a jax.vmap's axes: no group to check)
        labels = tuple(dialect.axis_label(frame.axes[i].name) for i in indices)
        size = math.prod(frame.axes[i].size for i in indices)
        for var in eqn.invars:
            try:
                collective.result_shape(params, tuple(var.aval.shape), labels, size)
            except ShapeError as error:
                raise _at(eqn, error) from None
    return params


def _positional_axes(params) -> tuple[int, ...]:
    names = params.get("axes", params.get("axis_name", ()))
    names = names if isinstance(names, (tuple, list)) else (names,)
    return tuple(n for n in names if isinstance(n, int) and not isinstance(n, bool))


def _axis_index_rule(frame: _Frame, eqn, args: list[Value]) -> list[Value]:
    _checked_params(frame, eqn, collectives.AXIS_INDEX)
    group = _group(frame, eqn, collectives.AXIS_INDEX)
    return [_group_index(frame, group)]


def _group_index(frame: _Frame, group: _Group) -> Value:
    """Each folded position's index in its group's row-major order of the axes."""
    total = Value(jnp.asarray(0, np.int32))
    for i in group.indices:
        position = frame.position(i)
        stride = math.prod(frame.axes[j].size for j in group.indices[group.indices.index(i) + 1 :])
        term = Value(position.array * np.int32(stride), position.batch)
        total = _add(frame, total, term)
    return total


def _add(frame: _Frame, a: Value, b: Value) -> Value:
    batch = tuple(sorted({*a.batch, *b.batch}))
    a, b = frame.with_batch(a, *batch), frame.with_batch(b, *batch)
    return Value(a.array + b.array, batch)


def _gathering(collective: Collective):
    def rule(frame: _Frame, eqn, args: list[Value]) -> list[Value]:
        params = _checked_params(frame, eqn, collective)
        group = _group(frame, eqn, collective)
        if collective is collectives.PPERMUTE:
            # ppermute counts a group's positions in mesh order, whatever the order
            # the axes are named in (as JAX 0.4.30 does; shared/REFERENCE.md)
            group = dataclasses.replace(group, indices=tuple(sorted(group.indices)))
            assert isinstance(params, collectives.PpermuteParams)
            return [_ppermuted(frame, group, value, params.perm) for value in args]
        spans_devices = any(frame.axes[i].devices > 1 for i in group.indices)
        if collective is collectives.PSUM_SCATTER and params.index_groups is None and spans_devices:
            return [_psum_scattered(frame, group, value, params) for value in args]
        if collective is collectives.ALL_TO_ALL and params.index_groups is None and spans_devices:
            return [_all_to_all(frame, group, value, params) for value in args]
        compute = _compute(collective, params, group.size(frame))
        return [_gathered(frame, group, value, compute) for value in args]

    return rule


def _all_to_all(frame: _Frame, group: _Group, value: Value, params) -> Value:
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


def _psum_scattered(frame: _Frame, group: _Group, value: Value, params) -> Value:
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


def _ppermuted(frame: _Frame, group: _Group, value: Value, perm) -> Value:
    """A ppermute folded: each pair splits into the positions' blocks (source and
    target device) and their places in the blocks. Pairs between the same two places
    of the blocks are one permutation of the devices: a ppermute over the device
    factors where it moves a value between devices, a copy where the devices agree.
    Each target place takes the value of the one permutation that delivers to it on
    its device (zeros where none does)."""
    axes = [frame.axes[i] for i in group.indices]
    folded = [i for i in group.indices if frame.axes[i].local > 1]
    value = frame.with_batch(value, *folded)
    device_sizes = [axis.devices for axis in axes]
    local_sizes = [axis.local for axis in axes]
    sizes = [axis.size for axis in axes]

    def split_position(position: int) -> tuple[int, int]:
        """(device index, place in the block) of a position of the group, each
        row-major over the group's axes."""
        coordinates = np.unravel_index(position, sizes)
        device = np.ravel_multi_index(
            [c // n for c, n in zip(coordinates, local_sizes)], device_sizes
        )
        place = np.ravel_multi_index([c % n for c, n in zip(coordinates, local_sizes)], local_sizes)
        return int(device), int(place)

    classes: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for source, target in perm:
        (source_device, source_place), (target_device, target_place) = map(
            split_position, (source, target)
        )
        classes.setdefault((source_place, target_place), []).append((source_device, target_device))
    device_names = group.device_names(frame)
    device_count = math.prod(device_sizes)
    device = _device_index(frame, group)  # this device's index among the group's
    places = list(np.ndindex(*[frame.axes[i].local for i in folded]))

    def block_place(place: int):
        """The value at place `place` of the block (over the other batch axes)."""
        coordinates = np.unravel_index(place, local_sizes)
        index: list[slice | int] = [slice(None)] * len(value.batch)
        for i, c in zip(group.indices, coordinates):
            if frame.axes[i].local > 1:
                index[value.batch.index(i)] = int(c)
        return value.array[tuple(index)]

    outs = []
    for place_coordinates in places:
        target_place = int(
            np.ravel_multi_index(
                [place_coordinates[folded.index(i)] if i in folded else 0 for i in group.indices],
                local_sizes,
            )
        )
        result = None
        for (source_place, to_place), pairs in classes.items():
            if to_place != target_place:
                continue
            moved = [(s, t) for s, t in pairs if s != t]
            stays = [t for s, t in pairs if s == t]
            part = block_place(source_place)
            delivered = np.zeros(device_count, bool)
            if moved:
                received = lax.ppermute(part, device_names, moved)
                delivered[[t for _, t in moved]] = True
                result = _where_device(device, delivered, received, result)
            if stays:
                delivered = np.zeros(device_count, bool)
                delivered[stays] = True
                result = _where_device(device, delivered, part, result)
        outs.append(jnp.zeros_like(block_place(0)) if result is None else result)
    if not folded:
        return Value(outs[0], value.batch)
    shape = [frame.axes[i].local for i in folded]
    array = jnp.reshape(jnp.stack(outs), (*shape, *np.shape(outs[0])))
    # dimensions [folded..., others..., rest] in the batch's order
    current = [*folded, *(i for i in value.batch if i not in folded)]
    order = [current.index(i) for i in value.batch]
    array = jnp.transpose(array, [*order, *range(len(current), np.ndim(array))])
    return Value(array, value.batch)


def _device_index(frame: _Frame, group: _Group):
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


def _gathered(frame: _Frame, group: _Group, value: Value, compute) -> Value:
    """A collective computed from every position's value in its group: the values of
    the group's positions on other devices gathered (none when the group lies within
    the device's block), then `compute(members, index in the group)` at each folded
    position."""
    folded = [i for i in group.indices if frame.axes[i].local > 1]
    value = frame.with_batch(value, *folded)
    members = _members(frame, group, value)
    others = tuple(i for i in value.batch if i not in folded)
    batch = tuple(sorted({*others, *folded}))
    sizes = tuple(frame.axes[i].local for i in batch)
    static = _static_group_index(frame, group, batch)
    if static is not None:
        # a group within the device's block: each position's index in it is known, so
        # its result is slices of the members (no collective, no gather)
        flat = jnp.reshape(members, (-1, *np.shape(members)[len(others) :]))
        other_sizes = [frame.axes[i].local for i in others]
        outs = []
        for position in np.ndindex(*sizes):
            row = (
                np.ravel_multi_index([position[batch.index(i)] for i in others], other_sizes)
                if others
                else 0
            )
            outs.append(compute(flat[row], int(static[position])))
        return Value(jnp.reshape(jnp.stack(outs), (*sizes, *np.shape(outs[0]))), batch)
    index = frame.with_batch(_group_index(frame, group), *batch)
    # the members (over the other axes' batch) at each position of the full batch
    spread = frame.with_batch(Value(members, others), *batch)
    flat_members = jnp.reshape(spread.array, (-1, *np.shape(spread.array)[len(batch) :]))
    flat_index = jnp.reshape(index.array, (-1,))
    out = jax.vmap(compute)(flat_members, flat_index)
    return Value(jnp.reshape(out, (*sizes, *np.shape(out)[1:])), batch)


def _static_group_index(frame: _Frame, group: _Group, batch: tuple[int, ...]):
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


def _members(frame: _Frame, group: _Group, value: Value):
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


def _compute(collective: Collective, params, size: int):
    """(members [size, ...], this position's index in the group) -> its result. The
    index is a Python int where it is known while tracing (a group within the device's
    block): the result is then slices of the members."""
    groups = params.index_groups
    group_of = np.zeros(size, np.int32)
    rank_of = np.zeros(size, np.int32)
    for g, members in enumerate(groups or ()):
        for r, position in enumerate(members):
            group_of[position], rank_of[position] = g, r

    def select(members, index):
        """(the members of this position's index group, its rank there)."""
        if groups is None:
            return members, index
        if isinstance(index, int):
            group = groups[group_of[index]]
            return jnp.stack([members[m] for m in group]), int(rank_of[index])
        table = np.asarray(groups, np.int32)  # groups of one size (all but reductions)
        group = jnp.asarray(table)[jnp.asarray(group_of)[index]]
        return members[group], jnp.asarray(rank_of)[index]

    kind = collective.kind
    if kind in ("psum", "pmax", "pmin"):
        reduce = _LOCAL_REDUCTIONS[kind]
        if groups is None:
            return lambda members, index: reduce(members, axis=0)
        # groups of any sizes: the members outside this position's group count as
        # the reduction's identity
        same = np.equal.outer(group_of, group_of)

        def grouped_reduction(members, index):
            if isinstance(index, int):
                inside = [m for m in range(size) if same[index, m]]
                return reduce(jnp.stack([members[m] for m in inside]), axis=0)
            inside = jnp.asarray(same)[index].reshape((size,) + (1,) * (members.ndim - 1))
            return reduce(jnp.where(inside, members, _identity(kind, members.dtype)), axis=0)

        return grouped_reduction
    if kind == "all_gather":
        dim, tiled = params.all_gather_dimension, params.tiled

        def all_gather(members, index):
            chosen = jnp.moveaxis(select(members, index)[0], 0, dim)
            return _merge_dims(chosen, dim) if tiled else chosen

        return all_gather
    if kind == "psum_scatter":
        dim, tiled = params.scatter_dimension, params.tiled

        def psum_scatter(members, index):
            chosen, rank = select(members, index)
            total = jnp.sum(chosen, axis=0)
            chunk = np.shape(total)[dim] // np.shape(chosen)[0] if tiled else 1
            part = _slice_in_dim(total, rank * chunk, chunk, dim)
            return part if tiled else jnp.squeeze(part, dim)

        return psum_scatter
    if kind == "all_to_all":
        split_axis, concat_axis = params.split_axis, params.concat_axis

        def all_to_all(members, index):
            chosen, rank = select(members, index)
            count = np.shape(chosen)[0]
            chunk = np.shape(chosen)[1 + split_axis] // count
            mine = _slice_in_dim(chosen, rank * chunk, chunk, 1 + split_axis)
            return _merge_dims(jnp.moveaxis(mine, 0, concat_axis), concat_axis)

        return all_to_all
    if kind == "ppermute":
        source = np.full(size, -1, np.int32)
        for src, dst in params.perm:
            source[dst] = src

        def ppermute(members, index):
            if isinstance(index, int):
                src = int(source[index])
                return members[src] if src >= 0 else jnp.zeros_like(members[0])
            src = jnp.asarray(source)[index]
            got = members[jnp.maximum(src, 0)]
            return jnp.where(src >= 0, got, jnp.zeros_like(got))

        return ppermute
    raise AssertionError(f"no fold rule computes '{kind}'")


def _slice_in_dim(array, start, size: int, dim: int):
    """`size` entries of dimension `dim` from `start` (an int, or traced)."""
    if isinstance(start, int):
        return lax.slice_in_dim(array, start, start + size, axis=dim)
    return lax.dynamic_slice_in_dim(array, start, size, dim)


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


def _pbroadcast_rule(frame: _Frame, eqn, args: list[Value]) -> list[Value]:
    group = _group(frame, eqn, None)
    if len(args) == 2:  # 0.12's pbroadcast with a traced source
        value, source = args
        if source.batch:
            raise _at(
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


def _identity_rule(frame: _Frame, eqn, args: list[Value]) -> list[Value]:
    return list(args)


def _rules():
    """primitive -> fold rule (made once per process)."""
    global _RULES
    if _RULES is None:
        rules = {}
        for collective in collectives.ALL:
            if collective.kind == "axis_index":
                rule = _axis_index_rule
            elif collective.kind in ("psum", "pmax", "pmin"):
                rule = _reduction(collective)
            else:
                rule = _gathering(collective)
            rules[jax_api.collective_primitive(collective)] = rule
        for invariant, collective in jax_api.invariant_collectives().items():
            rules[invariant] = rules[jax_api.collective_primitive(collective)]
        rules[jax_api.PBROADCAST] = _pbroadcast_rule
        if jax_api.PBROADCAST_DYNAMIC is not None:
            rules[jax_api.PBROADCAST_DYNAMIC] = _pbroadcast_rule
        starts, dones = jax_api.async_collectives()
        rules.update((start, rules[sync]) for start, sync in starts.items() if sync in rules)
        rules.update((p, _identity_rule) for p in (*dones, *jax_api.IDENTITY_PRIMITIVES))
        _RULES = rules
    return _RULES


_RULES: dict | None = None

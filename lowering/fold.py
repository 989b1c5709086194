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

This module is the interpreter (maps, equations, control flow), as JAX keeps its
batching interpreter apart from its rules: each collective's rule is in
lowering/fold_rules.py (one table keyed by `Collective`), the batched values and
their positions in lowering/fold_values.py, the index arithmetic (how positions
share devices) in pmapc/folding.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from pmapc import axis_labels, folding
from pmapc.errors import FoldError, UnsupportedError
from pmapc.lowering import fold_rules, jax_api, primitives
from pmapc.lowering.fold_values import Axis, Positions, Value, located, merge_dims, split_dim


@dataclasses.dataclass(frozen=True)
class Fold:
    """A nest folded onto `devices` (distinct, in mesh order)."""

    devices: tuple
    positions: int  # the mesh's positions, unfolded


# ----------------------------------------------------------------------------
# The folded program


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


class _Frame(Positions):
    """Interprets a map body's jaxpr over the folded positions of `axes` (every
    enclosing map's, outermost first), `devices_left` devices left to inner maps."""

    def __init__(self, axes: tuple[Axis, ...], devices_left: int, folded: dict) -> None:
        super().__init__(axes)
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
            label = axis_labels.axis_label(axis_name)
            self.folded[label] = max(self.folded.get(label, 1), local)
        inner = _Frame((*self.axes, axis), left, self.folded)
        device_operands, device_in_axes, arg_batches = _device_operands(operands, in_axes, axis)
        result_batches: list[tuple[int, ...]] = []
        body = inner.body(jaxpr, arg_batches, out_axes, result_batches)
        if devices == 1 and outermost is None:
            # a map all of whose positions are on each device: its body inline (no
            # collective names its axis on the devices: the frame's rules keep them local)
            blocks = [
                x if a is None else jnp.squeeze(x, a)
                for x, a in zip(device_operands, device_in_axes)
            ]
            outs = body(*blocks)
            device_out_axes = _device_out_axes(out_axes, result_batches)
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
        return [
            Value(merge_dims(array, out_axis) if out_axis is not None and local > 1 else array, b)
            for array, out_axis, b in zip(outs, device_out_axes, result_batches)
        ]

    def body(self, jaxpr, arg_batches, out_axes, result_batches: list):
        """The device map's body: the device's blocks (`arg_batches`: each one's batch,
        and where its local positions are, if any) as Values of this frame, the map's
        jaxpr evaluated on them, its results laid out for `out_axes` (their batches
        left in `result_batches` as it is traced)."""
        index = len(self.axes) - 1
        local = self.axes[index].local

        def body(*blocks):
            values = [
                Value(block, batch)
                if local_at is None
                else Value(jnp.moveaxis(block, local_at, len(batch)), (*batch, index))
                for block, (batch, local_at) in zip(blocks, arg_batches)
            ]
            results = self.eval(jaxpr.jaxpr, jaxpr.consts, values)
            outs = []
            result_batches.clear()
            for value, out_axis in zip(results, out_axes):
                if out_axis is None:
                    value = self.take_first(value, index)
                    outs.append(value.array)
                    result_batches.append(value.batch)
                    continue
                value = self.with_batch(value, index) if local > 1 else value
                outer = tuple(i for i in value.batch if i != index)
                array = value.array
                if local > 1:
                    array = jnp.moveaxis(array, len(outer), len(outer) + out_axis)
                outs.append(array)
                result_batches.append(outer)
            return outs

        return body

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
        rule = fold_rules.rule_for(primitive)
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
                raise located(eqn, self._unsupported(eqn))
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
        if eqn.primitive in jax_api.BATCH_EVERY_OPERAND:
            return self._batched_once(eqn, args, batch)
        fun = lambda *xs: jax_api.bind_equation(eqn, xs)  # noqa: E731
        for axis in reversed(batch):
            fun = jax.vmap(fun, in_axes=tuple(0 if axis in v.batch else None for v in args))
        # each vmap strips its axis from the operands that have it
        return [Value(x, batch) for x in fun(*[v.array for v in args])]

    def _batched_once(self, eqn, args: list[Value], batch: tuple[int, ...]) -> list[Value]:
        """`batched` for a primitive whose batching rule takes only operands all batched
        at dimension 0, once (ragged_dot's: nested vmaps of it fail in JAX 0.10 to
        0.12): every operand over all of `batch`, its positions flattened, one vmap."""
        arrays = [self.with_batch(value, *batch).array for value in args]
        sizes = tuple(self.axes[i].local for i in batch)
        flat = [jnp.reshape(a, (-1, *np.shape(a)[len(batch) :])) for a in arrays]
        outs = jax.vmap(lambda *xs: jax_api.bind_equation(eqn, xs))(*flat)
        return [Value(jnp.reshape(out, (*sizes, *np.shape(out)[1:])), batch) for out in outs]

    def _holds_folded(self, eqn) -> bool:
        """Whether a jaxpr inside `eqn` holds a map or names an axis folded here."""
        folded = self.folded_names()
        return any(_names_folded(inner, folded) for inner in jax_api.jaxprs_in(eqn.params))

    def _unsupported(self, eqn) -> UnsupportedError:
        folded = sorted(self.folded_names(), key=str)
        names = ", ".join(f"'{axis_labels.axis_label(name)}'" for name in folded)
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


# Control flow whose bodies hold folded collectives, by primitive name.
_CONTROL_FLOW = {"while": _Frame.while_loop, "scan": _Frame.scan, "cond": _Frame.cond}


def _device_operands(operands: Sequence[Value], in_axes, axis: Axis):
    """(device operands, their in_axes, each one's (batch, where its local positions
    are in the body's block, if anywhere)) of a map over `axis` on `operands`."""
    device_operands, device_in_axes, arg_batches = [], [], []
    for value, in_axis in zip(operands, in_axes):
        array, batch = value.array, value.batch
        if in_axis is None:
            device_operands.append(array)
            device_in_axes.append(None)
            arg_batches.append((batch, None))
            continue
        at = len(batch) + in_axis
        device_operands.append(split_dim(array, at, axis.devices, axis.local))
        device_in_axes.append(at)
        # in the body: the device's `local` positions at `at` (a dimension of its own
        # when local > 1), moved to the batch there
        arg_batches.append((batch, at if axis.local > 1 else None))
    return device_operands, device_in_axes, arg_batches


def _device_out_axes(out_axes, result_batches) -> list[int | None]:
    return [
        None if out_axis is None else len(batch) + out_axis
        for out_axis, batch in zip(out_axes, result_batches)
    ]


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
    device_out_axes = _device_out_axes(out_axes, result_batches)
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
    step = folding.split(size, devices_left)
    if step is None:
        raise FoldError(
            f"the map over '{axis_labels.axis_label(axis_name)}' has {size} positions, which "
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


def _drop(shape, axis):
    shape = tuple(shape)
    return shape if axis is None else shape[:axis] + shape[axis + 1 :]

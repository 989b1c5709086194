"""Control flow that would part a collective's devices, traced as nested `jax.vmap` runs it.

A `cond` whose predicate differs between the devices of a collective in its
branches would send them into different collectives, and a `while_loop` whose
condition does would leave some of them waiting in one: XLA pairs the wrong
collectives or waits until it aborts. Nested `jax.vmap`, which defines what a
map's named axes mean, batches such a `cond` into every branch and a select,
each branch's floating operands cut from the gradient where it is not taken
(`stop_gradient`), and such a loop into one that runs while any position
continues, keeping finished positions' carries. This module does the same to the
body of an outermost map as it is bound, before any transformation (`grad`,
`vmap`, the fold) sees it, so their values are vmap's too:

    cond(i, x) {A} {B}    ->  select_n(i, A(x if i == 0 else stop_gradient(x)),
                                          B(x if i == 1 else stop_gradient(x)))
    while c: p(c) {f(c)}  ->  while pmax(p(c)) over the axes: select(p(c), f(c), c)

What differs between devices is `_Variance`'s analysis of the nest's jaxpr: a map's
mapped operands and `axis_index` vary over its axis, what each device computes on
its own (`lax.rng_uniform`, host callbacks) over every axis; collectives, control
flow and loops follow the rules passes/variance.py follows on IR
(pmapc/variance_rules.py): a collective whose result agrees over its group no
longer varies over the axes it acts over, the others add them; control flow adds
its predicate's variance to its results; loops iterate to a fixed point. A `cond`
or loop is converted where its predicate varies over an axis along which a
collective in it meets (its axes, or every axis for one XLA runs over the whole
mesh, `Collective.spans_mesh`). Everything else keeps its control flow, and a nest
without such control flow is bound as traced.

passes/predicate-divergent does the same to pmapc IR (for modules written by
hand), by the same collective records; on a traced program it finds nothing
left to do.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from pmapc import variance_rules as rules
from pmapc.collectives import Collective
from pmapc.errors import UnsupportedError
from pmapc.lowering import jax_api, primitives
from pmapc.lowering.fold_values import located

UNIFORM: frozenset = frozenset()


def converted(closed: jax_api.ClosedJaxpr, leaf_axes: Sequence, axis_name, axis_size):
    """The body `closed` of an outermost map over `axis_name`, with its divergent
    control flow converted (see the module docstring); `closed` itself when it has
    none. `leaf_axes`: the mapped dimension of each argument, None if broadcast."""
    variance = _analysed(closed, leaf_axes, axis_name)
    if not variance.divergent:
        return closed
    rewrite = _Rewrite(variance)
    avals = [jax_api.shape_dtype(aval) for aval in closed.in_avals]
    run = lambda *args: rewrite.eval(closed, args)  # noqa: E731
    return jax.make_jaxpr(run, axis_env=[(axis_name, axis_size)])(*avals)


def predicate_axes(closed: jax_api.ClosedJaxpr, leaf_axes: Sequence, axis_name) -> list:
    """(primitive name, the axes its predicate varies over, as depths in the nest, 0
    the outermost) of each `cond` and `while` in the body `closed` of an outermost map
    (as `converted` takes it), in pre-order: what the conversion decides by, and what
    passes/variance.py must find on the IR (tests/py/test_variance_rules.py)."""
    variance = _analysed(closed, leaf_axes, axis_name)
    return [(eqn.primitive.name, axes) for eqn, axes in variance.predicates.values()]


def _analysed(closed: jax_api.ClosedJaxpr, leaf_axes: Sequence, axis_name) -> _Variance:
    variance = _Variance()
    arguments = [UNIFORM if axis is None else frozenset([0]) for axis in leaf_axes]
    variance.jaxpr(closed.jaxpr, arguments, (axis_name,))
    return variance


@functools.cache
def _named_axis_primitives() -> frozenset:
    return frozenset(jax_api.named_axis_primitives())


class _Variance:
    """Which axes each value of a nest's jaxpr may vary over, and the control flow
    whose predicate varies along an axis its collectives meet along. An axis is
    its map's depth in the nest (0 the outermost): a name an inner map binds again
    is another axis."""

    def __init__(self) -> None:
        # id(eqn) -> (the eqn, the axes its predicate diverges over, outermost first)
        self.divergent: dict[int, tuple[object, tuple]] = {}
        # id(eqn) -> (a cond or while eqn, the axes its predicate varies over), in the
        # order found
        self.predicates: dict[int, tuple[Any, frozenset]] = {}

    def jaxpr(self, jaxpr, arguments: Sequence[frozenset], bound: tuple) -> list[frozenset]:
        """The variance of `jaxpr`'s outputs, its inputs' `arguments` (constants are
        uniform) inside maps over `bound` (their names, outermost first); records
        what diverges."""
        env = dict(zip(jaxpr.invars, arguments))

        def read(var) -> frozenset:
            return UNIFORM if isinstance(var, jax_api.Literal) else env.get(var, UNIFORM)

        for eqn in jaxpr.eqns:
            env.update(zip(eqn.outvars, self.eqn(eqn, [read(var) for var in eqn.invars], bound)))
        return [read(var) for var in jaxpr.outvars]

    def eqn(self, eqn, ins: list[frozenset], bound: tuple) -> list[frozenset]:
        joined = UNIFORM.union(*ins)
        count = len(eqn.outvars)
        primitive = eqn.primitive
        record = primitives.collective_records().get(primitive)
        if primitive is primitives.map_p:
            return self.map(eqn, ins, bound)
        if record is not None:
            return [self.collective(record, eqn.params, joined, bound)] * count
        if primitive in _named_axis_primitives():  # pbroadcast, pvary, a done: conservative
            return [joined | _depths(bound, jax_api.named_axes(eqn.params))] * count
        if primitive.name in rules.PER_DEVICE_PRIMITIVES:
            return [joined | frozenset(range(len(bound)))] * count
        control = _CONTROL_FLOW.get(primitive.name)
        if control is not None:
            return control(self, eqn, ins, bound)
        body = jax_api.call_body(eqn)
        if body is not None:
            return self.jaxpr(body[0], ins, bound)
        return [joined] * count

    @staticmethod
    def collective(record: Collective, params: dict, joined: frozenset, bound) -> frozenset:
        axes = _depths(bound, jax_api.named_axes(params))
        grouped = params.get("axis_index_groups") is not None
        return rules.collective_result(record, grouped, joined, axes)

    def map(self, eqn, ins: list[frozenset], bound: tuple) -> list[frozenset]:
        params = eqn.params
        depth = len(bound)  # the inner map's axis
        inner = [
            axes if axis is None else axes | {depth} for axes, axis in zip(ins, params["in_axes"])
        ]
        outs = self.jaxpr(params["jaxpr"].jaxpr, inner, (*bound, params["axis_name"]))
        return [axes - {depth} for axes in outs]

    def cond(self, eqn, ins: list[frozenset], bound: tuple) -> list[frozenset]:
        predicate, operands = ins[0], ins[1:]
        self._predicate(eqn, predicate)
        branches = eqn.params["branches"]
        returned = (self.jaxpr(branch.jaxpr, operands, bound) for branch in branches)
        outs = rules.branch_results(predicate, returned, len(eqn.outvars))
        if len(branches) > 1:
            self._diverges(eqn, predicate, [b.jaxpr for b in branches], bound)
        return outs

    def while_loop(self, eqn, ins: list[frozenset], bound: tuple) -> list[frozenset]:
        params = eqn.params
        cond_count, body_count = params["cond_nconsts"], params["body_nconsts"]
        cond_consts = ins[:cond_count]
        body_consts = ins[cond_count : cond_count + body_count]
        cond_jaxpr, body_jaxpr = params["cond_jaxpr"].jaxpr, params["body_jaxpr"].jaxpr

        def trip(carried: list[frozenset]) -> tuple[frozenset, list[frozenset]]:
            (predicate,) = self.jaxpr(cond_jaxpr, [*cond_consts, *carried], bound)
            return predicate, self.jaxpr(body_jaxpr, [*body_consts, *carried], bound)

        self._predicate(eqn, UNIFORM)  # found here, before what its body holds
        carried, predicate = rules.loop_fixpoint(ins[cond_count + body_count :], trip)
        self._predicate(eqn, predicate)
        self._diverges(eqn, predicate, [cond_jaxpr, body_jaxpr], bound)
        return carried

    def scan(self, eqn, ins: list[frozenset], bound: tuple) -> list[frozenset]:
        consts, carried, scanned = jax_api.scan_operands(eqn.params, ins)
        body = eqn.params["jaxpr"].jaxpr
        outs: list[frozenset] = []

        def trip(carried: list[frozenset]) -> tuple[frozenset, list[frozenset]]:
            outs[:] = self.jaxpr(body, [*consts, *carried, *scanned], bound)
            return UNIFORM, outs[: len(carried)]  # a scan's trip count is static

        carried, _ = rules.loop_fixpoint(list(carried), trip)
        return [*carried, *outs[len(carried) :]]

    def _predicate(self, eqn, predicate: frozenset) -> None:
        """Record what `eqn`'s predicate varies over, in the order the eqns are first
        found: the union of every visit (a loop is analysed until it settles, a body
        JAX shares between calls once per call)."""
        known = self.predicates.get(id(eqn), (eqn, UNIFORM))[1]
        self.predicates[id(eqn)] = (eqn, known | predicate)

    def _diverges(self, eqn, predicate: frozenset, jaxprs: list, bound: tuple) -> None:
        diverging = rules.diverging(predicate, _meeting_axes(jaxprs, bound))
        if diverging:
            known = self.divergent.get(id(eqn), (eqn, ()))[1]
            # by name, each once (a collective names the innermost axis of a name)
            names = dict.fromkeys([*known, *(bound[d] for d in sorted(diverging))])
            self.divergent[id(eqn)] = (eqn, tuple(names))


_CONTROL_FLOW = {"cond": _Variance.cond, "while": _Variance.while_loop, "scan": _Variance.scan}


def _depths(bound: tuple, names) -> frozenset:
    """The axes `names` name inside maps over `bound` (names, outermost first), by
    depth: the innermost map of each name (names no map binds, a `jax.vmap`'s, left
    out)."""
    depths = set()
    for name in names:
        found = [d for d, bound_name in enumerate(bound) if bound_name == name]
        if found:
            depths.add(found[-1])
    return frozenset(depths)


def _meeting_axes(jaxprs: list, bound: tuple) -> frozenset:
    """The axes (depths in `bound`) along which the devices of the collectives in `jaxprs` (in the
    jaxprs they run too, inner maps' bodies included) must all reach them."""
    axes: set[int] = set()
    for jaxpr in jaxprs:
        for eqn in jaxpr.eqns:
            record = primitives.collective_records().get(eqn.primitive)
            if record is not None:
                named = _depths(bound, jax_api.named_axes(eqn.params))
                axes |= rules.meeting_axes(record, named, frozenset(range(len(bound))))
            elif eqn.primitive in _named_axis_primitives():
                axes.update(_depths(bound, jax_api.named_axes(eqn.params)))
            inner_bound = bound
            if eqn.primitive is primitives.map_p:
                inner_bound = (*bound, eqn.params["axis_name"])
            inner = [getattr(j, "jaxpr", j) for j in jax_api.jaxprs_in(eqn.params)]
            axes |= _meeting_axes(inner, inner_bound)
    return frozenset(axes)


class _Rewrite:
    """Re-traces a jaxpr with the divergent control flow `_Variance` found converted."""

    def __init__(self, variance: _Variance) -> None:
        self.divergent = variance.divergent
        self._holds: dict[int, bool] = {}  # id(jaxpr) -> whether it holds divergent flow

    def holds(self, eqn) -> bool:
        """Whether a body `eqn` runs holds divergent control flow, at any depth."""
        return any(self._jaxpr_holds(getattr(j, "jaxpr", j)) for j in jax_api.jaxprs_in(eqn.params))

    def _jaxpr_holds(self, jaxpr) -> bool:
        key = id(jaxpr)
        if key not in self._holds:
            self._holds[key] = any(
                id(eqn) in self.divergent or self.holds(eqn) for eqn in jaxpr.eqns
            )
        return self._holds[key]

    def eval(self, closed: jax_api.ClosedJaxpr, args) -> list:
        env = dict(zip(closed.jaxpr.constvars, closed.consts))
        env.update(zip(closed.jaxpr.invars, args))

        def read(var):
            return var.val if isinstance(var, jax_api.Literal) else env[var]

        for eqn in closed.jaxpr.eqns:
            operands = [read(var) for var in eqn.invars]
            if id(eqn) in self.divergent:
                outs = self.convert(eqn, operands, self.divergent[id(eqn)][1])
            elif self.holds(eqn):
                outs = self.within(eqn, operands)
            else:
                outs = jax_api.bind_equation(eqn, operands)
            env.update(zip(eqn.outvars, outs))
        return [read(var) for var in closed.jaxpr.outvars]

    def retraced(self, closed: jax_api.ClosedJaxpr, axis_env=()) -> jax_api.ClosedJaxpr:
        avals = [jax_api.shape_dtype(aval) for aval in closed.in_avals]
        run = lambda *args: self.eval(closed, args)  # noqa: E731
        return jax.make_jaxpr(run, axis_env=list(axis_env))(*avals)

    def within(self, eqn, operands: list) -> list:
        """`eqn`, which holds divergent control flow in a body, with its bodies converted."""
        params = dict(eqn.params)
        if eqn.primitive is primitives.map_p:
            body = self.retraced(params["jaxpr"], [(params["axis_name"], params["axis_size"])])
            jaxpr, constants = jax_api.closure_to_arguments(body)
            params["jaxpr"] = jaxpr
            params["in_axes"] = (*([None] * len(constants)), *params["in_axes"])
            with jax_api.at_equation(eqn):
                return list(primitives.map_p.bind(*constants, *operands, **params))
        for key, value in params.items():
            if isinstance(value, jax_api.ClosedJaxpr):
                params[key] = self.retraced(value)
            elif isinstance(value, tuple) and value and isinstance(value[0], jax_api.ClosedJaxpr):
                params[key] = tuple(self.retraced(v) for v in value)
        return jax_api.bind_equation(eqn.replace(params=params), operands)

    def convert(self, eqn, operands: list, axes: tuple) -> list:
        """`eqn` run on every device; its results noted for the plan."""
        _refuse_effects(eqn, axes)
        with jax_api.at_equation(eqn):
            if eqn.primitive.name == "cond":
                outs = self.every_branch(eqn, operands)
            else:
                outs = self.until_all_done(eqn, operands, axes)
            kind = "cond" if eqn.primitive.name == "cond" else "while"
            return list(primitives.predicated_p.bind(*outs, kind=kind, axes=axes)) if outs else []

    def every_branch(self, eqn, operands: list) -> list:
        """Every branch, each on its operands cut from the gradient where it is not
        taken (as JAX's batching rule for `cond` does), then each device's own."""
        index, values = operands[0], operands[1:]
        results = []
        for k, branch in enumerate(eqn.params["branches"]):
            taken = index == k
            cut = [lax.select(taken, x, lax.stop_gradient(x)) if _inexact(x) else x for x in values]
            results.append(self.eval(branch, cut))
        return [lax.select_n(index, *cases) for cases in zip(*results)]

    def until_all_done(self, eqn, operands: list, axes: tuple) -> list:
        """The loop while any device of the group over `axes` continues; a device's
        carries stay once its own condition fails."""
        params = eqn.params
        cond_count, body_count = params["cond_nconsts"], params["body_nconsts"]
        cond_consts = operands[:cond_count]
        body_consts = operands[cond_count : cond_count + body_count]

        def still(carry):
            return self.eval(params["cond_jaxpr"], [*cond_consts, *carry])[0]

        def anyone(carry):
            return lax.pmax(still(carry).astype(jnp.int32), axes) > 0

        def step(carry):
            advanced = self.eval(params["body_jaxpr"], [*body_consts, *carry])
            own = still(carry)
            return [lax.select(own, new, old) for new, old in zip(advanced, carry)]

        return list(lax.while_loop(anyone, step, list(operands[cond_count + body_count :])))


def _inexact(value) -> bool:
    return jnp.issubdtype(jax_api.typeof(value).dtype, jnp.inexact)


def _refuse_effects(eqn, axes: tuple) -> None:
    """Refuse converting control flow with effects (a host callback inside): every
    device would run them, also where the branch or loop was not taken (jax.vmap
    refuses an IO effect in a batched `cond`)."""
    jaxprs = [getattr(j, "jaxpr", j) for j in jax_api.jaxprs_in(eqn.params)]
    if not any(jax_api.side_effects(jaxpr) for jaxpr in jaxprs):
        return
    what = "cond" if eqn.primitive.name == "cond" else "while_loop"
    where = ", ".join(f"'{axis}'" for axis in axes)
    error = UnsupportedError(
        f"a host callback (or another effect) inside a {what} whose predicate differs "
        f"between the devices of {where}, around a collective over {where}: every device "
        f"must run such a {what}, as jax.vmap runs a batched one, which would run the "
        f"callback where the {what} was not taken; move it out of the {what}, or make "
        f"the predicate the same on every device of {where}"
    )
    raise located(eqn, error)

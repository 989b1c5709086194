"""The `pmapc_map` primitive and the lowering of JAX collectives to pmapc IR.

Every `pmapc.pmap` call, outermost or nested, binds `map_p` with the traced
body as a parameter. The outermost map also carries `mesh`: the devices the
whole nest runs on (nested maps have `mesh=None`).

Two lowerings exist:
- into pmapc IR (`pmapc_ir_rules`, used while tracing a program for the
  passes): `map_p` becomes `@pmapc.map` calling the body lowered as a private
  function, and each JAX collective its `@pmapc.<kind>` op (docs/ir.md);
- inside `jax.jit`: an outermost map goes through pmapc's passes and is
  embedded in JAX's module, by the rule the compiler registers
  (`compiler/embed.py`); the one registered here only refuses a nested map
  lowered on its own.

Autodiff and batching rules live in `lowering/map_rules.py`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import numpy as np
from jax import lax

from pmapc import axis_labels, collectives, dialect, hlo, ir, shapes
from pmapc.collectives import Collective
from pmapc.errors import ArgumentError, AxisError, PmapcError, SourceLoc, UnsupportedError
from pmapc.lowering import jax_api, jax_frames, jax_lowering
from pmapc.rewriter import unobserved

map_p = jax_api.Primitive("pmapc_map")
map_p.multiple_results = True


def bind_map(
    operands,
    *,
    jaxpr,
    axis_name,
    axis_size,
    in_axes,
    out_axes,
    name,
    mesh=None,
    fold=(),
    placement=None,
):
    """Bind `map_p`; `jaxpr` is the body, closed over nothing (constants are operands).

    An outermost map (`mesh` given) carries in `placement` a jaxpr from which
    `jax.jit` reads the mesh's devices (`jax_api.placement_jaxpr`; made from
    `mesh` when not given). The outermost map of a nest folded onto fewer devices
    (lowering/fold.py) says how in `fold`: the (axis label, positions per device)
    of each folded axis.
    """
    if mesh is not None and placement is None:
        placement = jax_api.placement_jaxpr(mesh)
    return map_p.bind(
        *operands,
        jaxpr=jaxpr,
        axis_name=axis_name,
        axis_size=axis_size,
        in_axes=tuple(in_axes),
        out_axes=tuple(out_axes),
        name=name,
        mesh=mesh,
        fold=tuple(fold),
        placement=placement,
    )


def _map_abstract_eval(
    *avals, jaxpr, axis_name, axis_size, in_axes, out_axes, name, mesh, fold, placement
):
    """The stacked results, and the body's effects (a map that only prints is kept)."""
    outs = []
    for aval, out_axis in zip(jaxpr.out_avals, out_axes):
        shape = shapes.mapped_result_shape(aval.shape, out_axis, axis_size, axis_name)
        outs.append(jax_api.ShapedArray(shape, aval.dtype, weak_type=aval.weak_type))
    return outs, jax_api.map_effects(jaxpr, axis_name)


def check_in_its_program(mesh, axis_name) -> None:
    """Refuse to lower a nested map (no mesh) inside `jax.jit` on its own, outside
    the outermost map it belongs to."""
    if mesh is None:
        raise AxisError(
            f"the map over '{axis_name}' is lowered outside the "
            "pmapc.pmap program it belongs to; call it inside its outer map"
        )


def _map_lowering(ctx, *operands, mesh, **params):
    """Lowering inside `jax.jit` until the compiler registers the rule that runs
    an outermost map through pmapc's passes (`compiler/embed.py`, when imported:
    `import pmapc` imports it). The compiler depends on this module, not back."""
    check_in_its_program(mesh, params["axis_name"])
    raise AssertionError(
        f"the outermost map over '{params['axis_name']}' is lowered before "
        "pmapc.compiler.embed registered its lowering rule; import pmapc first"
    )


map_p.def_effectful_abstract_eval(_map_abstract_eval)
map_p.def_impl(jax_api.compiled_impl(map_p))
jax_lowering.register_lowering(map_p, _map_lowering)


# A note that the values it passes through come from control flow the tracer ran on
# every device (lowering/divergence.py): an identity, which pmapc IR keeps as
# `@pmapc_predicated` for predicate-divergent to record (for the plan) and drop.
predicated_p = jax_api.Primitive("pmapc_predicated")
predicated_p.multiple_results = True
predicated_p.def_abstract_eval(lambda *avals, kind, axes: list(avals))
jax_api.register_identity_rules(predicated_p)


def _predicated_to_pmapc_ir(ctx, *operands, kind, axes):
    b = unobserved(ir.current_insertion_point(), ir.current_location())
    labels = tuple(axis_labels.axis_label(axis) for axis in axes)
    result_types = [jax_lowering.ir_type_of(ctx, aval) for aval in ctx.avals_out]
    return dialect.create_predicated_note(b, _flatten(operands), result_types, kind, labels).results


# ----------------------------------------------------------------------------
# pmapc IR: maps -> @pmapc.map, JAX collectives -> @pmapc.<kind>


def _map_to_pmapc_ir(
    ctx, *operands, jaxpr, axis_name, axis_size, in_axes, out_axes, name, mesh, fold, placement
):
    # The body's axis is bound while it lowers: rules written as JAX functions of
    # collectives (pbroadcast's) name it.
    with jax_api.axis_env(axis_name, axis_size):
        callee = jax_lowering.lower_body(ctx, name, jaxpr)
    result_types = [jax_lowering.ir_type_of(ctx, aval) for aval in ctx.avals_out]
    attributes = {
        "call_target_name": ir.string_attr(dialect.MAP_TARGET),
        "called_computations": ir.array_attr([ir.symbol_ref_attr(callee)]),
    }
    attributes.update(
        dialect.map_config(axis_labels.axis_label(axis_name), axis_size, in_axes, out_axes, fold)
    )
    b = unobserved(ir.current_insertion_point(), ir.current_location())
    return b.create(dialect.CUSTOM_CALL, _flatten(operands), result_types, attributes).results


def axes_of(params) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(named axes, positional axes) of a collective's parameters.

    Positional axes appear when `jax.vmap` batches a collective over its own
    axis name: they name array dimensions reduced locally.
    """
    names = params["axes"] if "axes" in params else params["axis_name"]
    names = names if isinstance(names, (tuple, list)) else (names,)
    positional = tuple(n for n in names if isinstance(n, int) and not isinstance(n, bool))
    named = tuple(axis_labels.axis_label(n) for n in names if n not in positional)
    if len(set(named)) != len(named):
        repeated = next(n for n in named if named.count(n) > 1)
        # JAX raises a ValueError for a repeated axis; ArgumentError is one.
        raise _at_user_line(
            ArgumentError(
                f"axis '{repeated}' is named twice in {tuple(named)}; name each axis once"
            )
        )
    return named, positional


def _collective_rule(collective: Collective):
    def rule(ctx, *operands, **params):
        b = unobserved(ir.current_insertion_point(), ir.current_location())
        operands = _flatten(operands)
        check_operand_types(collective, ctx.avals_in)
        named, positional = axes_of(params)
        if positional:
            if not collective.reduction:
                raise _at_user_line(
                    AxisError(
                        f"'{collective.kind}' over a positional axis {positional} is not "
                        "supported; name the axis with pmapc.pmap or jax.vmap"
                    )
                )
            operands = [hlo.reduce_dims(b, v, positional, collective.combiner) for v in operands]
        if not named:
            return operands
        result_types = [jax_lowering.ir_type_of(ctx, aval) for aval in ctx.avals_out]
        op = dialect.create_collective(
            b, collective.kind, operands, result_types, named, collective.params_from_jax(params)
        )
        return op.results

    return rule


def check_operand_types(collective: Collective, avals) -> None:
    """Refuse bool operands of a collective that does not take them, and data operands
    of two element types where one is written into the other (ragged_all_to_all's)."""
    if not collective.takes_bool and any(aval.dtype == np.bool_ for aval in avals):
        raise _at_user_line(
            ArgumentError(
                f"'{collective.kind}' does not take bool operands (JAX's reduction refuses "
                "them too); convert to an integer type first, e.g. x.astype(jnp.int32)"
            )
        )
    if collective.operands and avals[0].dtype != avals[1].dtype:
        first, second = collective.operands[:2]
        raise _at_user_line(
            ArgumentError(
                f"'{collective.kind}' writes {first} of {avals[0].dtype} into {second} of "
                f"{avals[1].dtype}; give them one dtype, e.g. {second}.astype({first}.dtype)"
            )
        )


def _at_user_line(error: PmapcError) -> PmapcError:
    """`error` at the user's line whose equation is being lowered, if known."""
    where = jax_frames.lowered_user_line()
    return error.at(SourceLoc(*where, 0)) if where is not None else error


def _identity_rule(ctx, *operands, **params):
    return operands


def _broadcast_from(x, source, axis_name):
    """`x` of the device at index `source` of the axes, on each of them: a psum of
    `x` kept on the source alone (XLA:CPU has no collective-broadcast)."""
    here = lax.axis_index(axis_name) == source
    if x.dtype == np.bool_:
        return lax.psum(jnp.where(here, x, False).astype(np.int32), axis_name).astype(np.bool_)
    return lax.psum(jnp.where(here, x, jnp.zeros_like(x)), axis_name)


def _pbroadcast(x, *, axis_name, source):
    return _broadcast_from(x, source, axis_name)


def _pbroadcast_dynamic(x, source, *, axis_name):
    return _broadcast_from(x, source, axis_name)


def _start_rule(rule):
    """The rule of an asynchronous collective's start: the synchronous collective,
    whose value its done (an identity) hands on."""

    def start(ctx, *operands, **params):
        avals_out = [jax_api.future_value(aval) for aval in ctx.avals_out]
        return rule(ctx.replace(avals_out=avals_out), *operands, **params)

    return start


@functools.cache
def pmapc_ir_rules() -> tuple[tuple[jax_api.Primitive, Callable[..., Any]], ...]:
    """(primitive, rule) pairs that lower a traced program to pmapc IR (made once per
    process: the rules hold no state).

    Maps become `@pmapc.map`, collectives `@pmapc.<kind>` (their asynchronous forms
    the synchronous op), `pbroadcast` a psum of a select; primitives that only mark
    how values vary or are laid out are identities.
    """
    rules: dict[jax_api.Primitive, Callable[..., Any]] = {
        map_p: _map_to_pmapc_ir,
        predicated_p: _predicated_to_pmapc_ir,
    }
    collective_rules = {c: _collective_rule(c) for c in collectives.ALL}
    starts, dones = jax_api.async_collectives()
    for primitive, collective in collective_records().items():
        rule = collective_rules[collective]
        rules[primitive] = _start_rule(rule) if primitive in starts else rule
    rules[jax_api.PBROADCAST] = jax_lowering.lower_fun(_pbroadcast, multiple_results=False)
    if jax_api.PBROADCAST_DYNAMIC is not None:
        rules[jax_api.PBROADCAST_DYNAMIC] = jax_lowering.lower_fun(
            _pbroadcast_dynamic, multiple_results=False
        )
    rules.update((p, _identity_rule) for p in (*dones, *jax_api.IDENTITY_PRIMITIVES))
    return tuple(rules.items())


@functools.cache
def collective_records() -> dict[jax_api.Primitive, Collective]:
    """JAX's primitive -> pmapc's collective record, for every primitive that runs one:
    each kind's own, its `*_invariant` form, its asynchronous start. The one table
    the tracer's lowering rules, the fold (lowering/fold_rules.py) and the analysis
    of divergent control flow (lowering/divergence.py) read."""
    records = {jax_api.collective_primitive(c): c for c in collectives.ALL}
    records.update(jax_api.invariant_collectives())
    starts, _ = jax_api.async_collectives()
    records.update((start, records[sync]) for start, sync in starts.items() if sync in records)
    return records


@functools.cache
def lowered_primitives() -> frozenset:
    """The primitives pmapc lowers to pmapc IR itself (made once: every map body's
    check reads it)."""
    return frozenset(p for p, _ in pmapc_ir_rules())


# What to write instead of a named-axis primitive pmapc does not lower, by name.
_ALTERNATIVES = {
    "psend": "use jax.lax.ppermute, which sends and receives in one op",
    "precv": "use jax.lax.ppermute, which sends and receives in one op",
}
COLLECTIVES_PMAPC_LOWERS = (
    "use psum, pmean, pmax, pmin, all_gather, psum_scatter, all_to_all, "
    "ragged_all_to_all, ppermute, pbroadcast or axis_index, which pmapc lowers"
)


def check_supported(jaxpr, bound_axes) -> None:
    """Refuse what pmapc cannot lower in a map body `jaxpr` (and the jaxprs inside it)
    whose enclosing maps bind `bound_axes`, at the user's line that used it: a
    primitive that names a bound axis and has no pmapc rule, and a `jax.pmap` or
    `jax.shard_map`, which run on devices of their own."""
    lowered = lowered_primitives()
    _check_equations(jaxpr, frozenset(bound_axes), lowered)


def _check_equations(jaxpr, bound_axes: frozenset, lowered: frozenset) -> None:
    for eqn in jaxpr.eqns:
        if eqn.primitive is map_p:
            continue  # a nested map's body was checked when it was traced
        error = _refusal(eqn, bound_axes, lowered)
        if error is not None:
            where = jax_frames.user_line(eqn)
            raise error.at(SourceLoc(*where, 0)) if where is not None else error
        for inner in jax_api.jaxprs_in(eqn.params):
            _check_equations(inner, bound_axes, lowered)


def _refusal(eqn, bound_axes: frozenset, lowered: frozenset) -> UnsupportedError | None:
    if eqn.primitive is jax_api.SHARD_MAP:
        return UnsupportedError(
            "a jax.pmap (or jax.shard_map) inside a pmapc.pmap body runs on devices of its "
            "own, which JAX 0.10 and later cannot nest in the map's; use pmapc.pmap for the "
            "inner map as well"
        )
    if eqn.primitive in lowered:
        return None
    axes = [name for name in jax_api.named_axes(eqn.params) if name in bound_axes]
    if not axes:
        return None
    named = ", ".join(f"'{axis_labels.axis_label(name)}'" for name in axes)
    name = eqn.primitive.name
    advice = _ALTERNATIVES.get(name, COLLECTIVES_PMAPC_LOWERS)
    return UnsupportedError(f"'{name}' over {named} is not supported inside pmapc.pmap; {advice}")


def _flatten(values) -> list:
    flat = []
    for value in values:
        if isinstance(value, (tuple, list)):
            flat.extend(value)
        else:
            flat.append(value)
    return flat

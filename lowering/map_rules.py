"""Autodiff and batching of `pmapc_map`: each rule maps a transformed body.

The body of a map is a jaxpr over one index of the axis; transforming the map
transforms the body with the map's axis bound (its collectives name it) and
binds a new map of the result:

- JVP: the map of the body's JVP; tangents are mapped like their primals.
- partial evaluation (what `grad`/`linearize` split into known and unknown):
  a known map that also returns the residuals, stacked along a new leading
  axis, and an unknown map that takes them back along that axis.
- transpose: the map of the body's transpose; an output's cotangent comes in
  at its `out_axes`, an input's leaves at its `in_axes`. An unmapped input is
  fanned out to every index, so its cotangent is summed over the axis: mapped
  out along a new leading axis and summed outside the map, JAX 0.4 pmap's rule.
  (A `psum` inside would return a replicated value, whose cotangent in a
  second transpose reaches every index and is counted once per index.) An
  unmapped output (`out_axes=None`) is one value: each index gets its n-th
  part of the cotangent (JAX 0.4.30 refused to transpose such a map).
- batching: batched operands carry the batch at dimension 0, inside the body
  too; `jax.vmap`'s own axis name stays usable by the body's collectives.
- checkify: the map of the checked body, which takes the error unmapped and
  returns one per index (stacked at 0); the map's error is the last index's
  that has one, as JAX 0.4.30's pmap chose.

A transformed outermost map stays outermost: it keeps the `mesh`.
"""

from __future__ import annotations

import jax
import numpy as np

from pmapc.lowering import jax_api
from pmapc.lowering.primitives import bind_map, map_p


def _trace_body(fun, avals, axis_name, axis_size):
    """(closed body jaxpr, constants it captured) of `fun` on one index of the axis."""
    closed = jax.make_jaxpr(fun, axis_env=[(axis_name, axis_size)])(
        *[jax_api.shape_dtype(aval) for aval in avals]
    )
    return jax_api.closure_to_arguments(closed)


def _bind_with_constants(constants, operands, *, jaxpr, in_axes, out_axes, **params):
    return bind_map(
        [*constants, *operands],
        jaxpr=jaxpr,
        in_axes=[None] * len(constants) + list(in_axes),
        out_axes=out_axes,
        **params,
    )


# ----------------------------------------------------------------------------
# JVP


def _map_jvp(primals, tangents, *, jaxpr, in_axes, out_axes, **params):
    nonzeros = [type(t) is not jax_api.Zero for t in tangents]
    with jax_api.axis_env(params["axis_name"], params["axis_size"]):
        jvp_closed, out_nonzeros = jax_api.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    body, constants = jax_api.closure_to_arguments(jvp_closed)
    tangents_in = [t for t, nz in zip(tangents, nonzeros) if nz]
    tangent_in_axes = [a for a, nz in zip(in_axes, nonzeros) if nz]
    tangent_out_axes = [a for a, nz in zip(out_axes, out_nonzeros) if nz]
    outs = _bind_with_constants(
        constants,
        [*primals, *tangents_in],
        jaxpr=body,
        in_axes=[*in_axes, *tangent_in_axes],
        out_axes=[*out_axes, *tangent_out_axes],
        **params,
    )
    primals_out, nonzero_tangents = outs[: len(out_axes)], iter(outs[len(out_axes) :])
    tangents_out = [
        next(nonzero_tangents) if nz else jax_api.tangent_zero(p)
        for p, nz in zip(primals_out, out_nonzeros)
    ]
    return primals_out, tangents_out


# ----------------------------------------------------------------------------
# Partial evaluation


def _map_partial_eval(trace, *tracers, jaxpr, in_axes, out_axes, **params):
    unknowns = [not t.pval.is_known() for t in tracers]
    with jax_api.axis_env(params["axis_name"], params["axis_size"]):
        known_closed, unknown_closed, out_unknowns, residual_avals = (
            jax_api.partial_eval_jaxpr_nounits(jaxpr, unknowns, instantiate=False)
        )
    residual_count = len(residual_avals)

    known_body, known_constants = jax_api.closure_to_arguments(known_closed)
    known_values = [t.pval.get_known() for t, uk in zip(tracers, unknowns) if not uk]
    known_outs = _bind_with_constants(
        known_constants,
        known_values,
        jaxpr=known_body,
        in_axes=[a for a, uk in zip(in_axes, unknowns) if not uk],
        out_axes=[*[a for a, uk in zip(out_axes, out_unknowns) if not uk], *[0] * residual_count],
        **params,
    )
    split = len(known_outs) - residual_count
    known_outs, residuals = known_outs[:split], known_outs[split:]

    unknown_body, unknown_constants = jax_api.closure_to_arguments(unknown_closed)
    in_tracers = [
        *map(trace.new_instantiated_const, [*unknown_constants, *residuals]),
        *[trace.instantiate_const(t) for t, uk in zip(tracers, unknowns) if uk],
    ]
    unknown_params = dict(
        params,
        jaxpr=unknown_body,
        in_axes=(
            *[None] * len(unknown_constants),
            *[0] * residual_count,
            *[a for a, uk in zip(in_axes, unknowns) if uk],
        ),
        out_axes=tuple(a for a, uk in zip(out_axes, out_unknowns) if uk),
    )
    out_avals = map_p.abstract_eval(*[t.aval for t in in_tracers], **unknown_params)[0]
    out_tracers = [
        jax_api.JaxprTracer(trace, jax_api.PartialVal.unknown(aval), None) for aval in out_avals
    ]
    recipe = jax_api.new_eqn_recipe(
        trace,
        in_tracers,
        out_tracers,
        map_p,
        unknown_params,
        unknown_body.effects,
        jax_api.current_source_info(),
    )
    for tracer in out_tracers:
        tracer.recipe = recipe
    known, unknown = iter(known_outs), iter(out_tracers)
    return [next(unknown) if uk else next(known) for uk in out_unknowns]


def _map_partial_eval_staged(saveable, unknowns, instantiate, eqn):
    """The rule above for a map equation already in a jaxpr: a known equation that
    also returns the residuals (stacked at 0) and a staged one that takes them."""
    params = eqn.params
    in_axes, out_axes = params["in_axes"], params["out_axes"]
    with jax_api.axis_env(params["axis_name"], params["axis_size"]):
        known, staged, out_unknowns, out_instantiated, residual_count = (
            jax_api.partial_eval_jaxpr_custom(
                params["jaxpr"].jaxpr, unknowns, True, False, True, saveable
            )
        )
    residuals = [
        jax_api.Var(_stacked(v.aval, params["axis_size"])) for v in staged.invars[:residual_count]
    ]
    known_eqn = jax_api.new_jaxpr_eqn(
        [v for v, uk in zip(eqn.invars, unknowns) if not uk],
        [*[v for v, uk in zip(eqn.outvars, out_unknowns) if not uk], *residuals],
        map_p,
        dict(
            params,
            jaxpr=jax_api.ClosedJaxpr(known, ()),
            in_axes=tuple(a for a, uk in zip(in_axes, unknowns) if not uk),
            out_axes=(
                *[a for a, uk in zip(out_axes, out_unknowns) if not uk],
                *[0] * residual_count,
            ),
        ),
        known.effects,
        eqn.source_info,
        eqn.ctx,
    )
    staged_eqn = jax_api.new_jaxpr_eqn(
        [*residuals, *eqn.invars],
        [v for v, inst in zip(eqn.outvars, out_instantiated) if inst],
        map_p,
        dict(
            params,
            jaxpr=jax_api.ClosedJaxpr(staged, ()),
            in_axes=(*[0] * residual_count, *in_axes),
            out_axes=tuple(a for a, inst in zip(out_axes, out_instantiated) if inst),
        ),
        staged.effects,
        eqn.source_info,
        eqn.ctx,
    )
    newly_instantiated = [
        v for v, inst in zip(eqn.invars, instantiate) if isinstance(v, jax_api.Var) and not inst
    ]
    return known_eqn, staged_eqn, out_unknowns, out_instantiated, [*newly_instantiated, *residuals]


def _stacked(aval, axis_size):
    return jax_api.ShapedArray((axis_size, *aval.shape), aval.dtype, weak_type=aval.weak_type)


# ----------------------------------------------------------------------------
# Transpose


def _map_transpose(cotangents, *args, jaxpr, in_axes, out_axes, **params):
    axis_name, axis_size = params["axis_name"], params["axis_size"]
    linear = [jax_api.is_undefined_primal(x) for x in args]
    residuals = [x for x, lin in zip(args, linear) if not lin]
    residual_avals = [aval for aval, lin in zip(jaxpr.in_avals, linear) if not lin]
    cotangents = [
        _fan_out(jax_api.instantiate_zeros(ct), axis, axis_size)
        for ct, axis in zip(cotangents, out_axes)
    ]

    def transposed_body(*values):
        given = iter(values[: len(residuals)])
        primals = [
            jax_api.UndefinedPrimal(aval) if lin else next(given)
            for aval, lin in zip(jaxpr.in_avals, linear)
        ]
        input_cts = jax_api.backward_pass(jaxpr, primals, list(values[len(residuals) :]))
        return [jax_api.instantiate_zeros(ct) for ct, lin in zip(input_cts, linear) if lin]

    body, constants = _trace_body(
        transposed_body, [*residual_avals, *jaxpr.out_avals], axis_name, axis_size
    )
    linear_in_axes = [a for a, lin in zip(in_axes, linear) if lin]
    outs = iter(
        _bind_with_constants(
            constants,
            [*residuals, *cotangents],
            jaxpr=body,
            in_axes=[*[a for a, lin in zip(in_axes, linear) if not lin], *out_axes],
            out_axes=[0 if a is None else a for a in linear_in_axes],
            **params,
        )
    )
    cts = [_fan_in(next(outs), axis) for axis in linear_in_axes]
    cts = iter(cts)
    return [next(cts) if lin else None for lin in linear]


def _fan_out(ct, out_axis, axis_size):
    """The cotangent each index gets of an output: an unmapped one (`out_axes=None`)
    is one value, the same at every index, so each index gets its n-th part (as
    `jax.shard_map` transposes a replicated output; counting it once per index
    would multiply the derivative by the axis size)."""
    if out_axis is not None or not jax.numpy.issubdtype(ct.dtype, jax.numpy.inexact):
        return ct
    return ct / axis_size


def _fan_in(ct, in_axis):
    """The cotangent of an input: an unmapped one's per-index parts summed."""
    if in_axis is not None or np.dtype(ct.dtype) == jax.dtypes.float0:
        return ct
    return jax.numpy.sum(ct, axis=0)


# ----------------------------------------------------------------------------
# Batching


def _map_batch(axis_data, args, dims, *, jaxpr, in_axes, out_axes, **params):
    operands, body_in_axes, batched = [], [], []
    for value, dim, axis in zip(args, dims, in_axes):
        if dim is None:
            operands.append(value)
            body_in_axes.append(axis)
            batched.append(False)
            continue
        operands.append(jax.numpy.moveaxis(value, dim, 0))
        body_in_axes.append(None if axis is None else axis + 1)
        batched.append(True)
    with jax_api.axis_env(params["axis_name"], params["axis_size"]):
        batched_closed, out_batched = jax_api.batch_jaxpr(jaxpr, axis_data, batched, False)
    body, constants = jax_api.closure_to_arguments(batched_closed)
    outs = _bind_with_constants(
        constants,
        operands,
        jaxpr=body,
        in_axes=body_in_axes,
        out_axes=[None if axis is None else axis + b for axis, b in zip(out_axes, out_batched)],
        **params,
    )
    return outs, [0 if b else None for b in out_batched]


# ----------------------------------------------------------------------------
# checkify


def _map_checkify(checkify_body, error, *operands, jaxpr, in_axes, out_axes, **params):
    error_leaves, error_tree = jax.tree_util.tree_flatten(error)
    avals = [*map(jax_api.typeof, error_leaves), *jaxpr.in_avals]
    with jax_api.axis_env(params["axis_name"], params["axis_size"]):
        checked, out_tree = checkify_body(jaxpr, error_tree, *avals)
    body, constants = jax_api.closure_to_arguments(checked)
    error_outputs = out_tree.num_leaves - len(out_axes)
    outs = _bind_with_constants(
        constants,
        [*error_leaves, *operands],
        jaxpr=body,
        in_axes=[*[None] * len(error_leaves), *in_axes],
        out_axes=(*[0] * error_outputs, *out_axes),
        **params,
    )
    errors, outs = jax.tree_util.tree_unflatten(out_tree, outs)
    return jax_api.any_error(errors), outs


jax_api.register_checkify_rule(map_p, _map_checkify)
jax_api.register_map_rules(
    map_p,
    jvp=_map_jvp,
    transpose=_map_transpose,
    partial_eval=_map_partial_eval,
    partial_eval_staged=_map_partial_eval_staged,
    batch=_map_batch,
)

"""The `pmapc_map` primitive and the lowering of JAX collectives to pmapc IR.

Every `pmapc.pmap` call, outermost or nested, binds `map_p` with the traced
body as a parameter. The outermost map also carries `mesh`: the devices the
whole nest runs on (nested maps have `mesh=None`).

Two lowerings exist:
- into pmapc IR (`pmapc_ir_rules`, used while tracing a program for the
  passes): `map_p` becomes `@pmapc.map` calling the body lowered as a private
  function, and each JAX collective its `@pmapc.<kind>` op (docs/ir.md);
- inside `jax.jit` (the registered rule): an outermost map goes through
  pmapc's passes and is embedded in JAX's module (`compiler/embed.py`).

Autodiff and batching rules live in `lowering/map_rules.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pmapc import collectives, dialect, hlo, ir, shapes
from pmapc.collectives import Collective
from pmapc.errors import ArgumentError, AxisError, PmapcError, SourceLoc
from pmapc.lowering import jax_api
from pmapc.passes.rewriter import unobserved

map_p = jax_api.Primitive("pmapc_map")
map_p.multiple_results = True


def bind_map(operands, *, jaxpr, axis_name, axis_size, in_axes, out_axes, name, mesh=None):
    """Bind `map_p`; `jaxpr` is the body, closed over nothing (constants are operands).

    An outermost map (`mesh` given) first marks its operands as values on the
    mesh, so `jax.jit` places the program on the mesh's devices.
    """
    if mesh is not None:
        operands = jax_api.place_on_mesh(operands, mesh)
    return map_p.bind(
        *operands,
        jaxpr=jaxpr,
        axis_name=axis_name,
        axis_size=axis_size,
        in_axes=tuple(in_axes),
        out_axes=tuple(out_axes),
        name=name,
        mesh=mesh,
    )


def _map_abstract_eval(*avals, jaxpr, axis_name, axis_size, in_axes, out_axes, name, mesh):
    outs = []
    for aval, out_axis in zip(jaxpr.out_avals, out_axes):
        shape = shapes.mapped_result_shape(aval.shape, out_axis, axis_size, axis_name)
        outs.append(jax_api.ShapedArray(shape, aval.dtype, weak_type=aval.weak_type))
    return outs


def _map_lowering(ctx, *operands, mesh, **params):
    """Lowering inside `jax.jit`: the outermost map through pmapc's passes."""
    if mesh is None:
        raise AxisError(
            f"the map over '{params['axis_name']}' is lowered outside the "
            "pmapc.pmap program it belongs to; call it inside its outer map"
        )
    from pmapc.compiler import embed  # the compiler depends on this module, not back

    return embed.lower_outermost(ctx, operands, mesh=mesh, **params)


map_p.def_abstract_eval(_map_abstract_eval)
map_p.def_impl(jax_api.compiled_impl(map_p))
jax_api.register_lowering(map_p, _map_lowering)


# ----------------------------------------------------------------------------
# pmapc IR: maps -> @pmapc.map, JAX collectives -> @pmapc.<kind>


def _map_to_pmapc_ir(ctx, *operands, jaxpr, axis_name, axis_size, in_axes, out_axes, name, mesh):
    callee = jax_api.lower_body(ctx, name, jaxpr)
    result_types = [jax_api.ir_type_of(ctx, aval) for aval in ctx.avals_out]
    attributes = {
        "call_target_name": ir.string_attr(dialect.MAP_TARGET),
        "called_computations": ir.array_attr([ir.symbol_ref_attr(callee)]),
    }
    attributes.update(
        dialect.map_config(dialect.axis_label(axis_name), axis_size, in_axes, out_axes)
    )
    b = unobserved(ir.current_insertion_point(), ir.current_location())
    return b.create(dialect.CUSTOM_CALL, _flatten(operands), result_types, attributes).results


def _axes_of(params) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(named axes, positional axes) of a collective's parameters.

    Positional axes appear when `jax.vmap` batches a collective over its own
    axis name: they name array dimensions reduced locally.
    """
    names = params["axes"] if "axes" in params else params["axis_name"]
    names = names if isinstance(names, (tuple, list)) else (names,)
    positional = tuple(n for n in names if isinstance(n, int) and not isinstance(n, bool))
    named = tuple(dialect.axis_label(n) for n in names if n not in positional)
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
        if not collective.takes_bool and any(aval.dtype == np.bool_ for aval in ctx.avals_in):
            raise _at_user_line(
                ArgumentError(
                    f"'{collective.kind}' does not take bool operands (JAX's reduction refuses "
                    "them too); convert to an integer type first, e.g. x.astype(jnp.int32)"
                )
            )
        named, positional = _axes_of(params)
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
        result_types = [jax_api.ir_type_of(ctx, aval) for aval in ctx.avals_out]
        op = dialect.create_collective(
            b, collective.kind, operands, result_types, named, collective.params_from_jax(params)
        )
        return op.results

    return rule


def _at_user_line(error: PmapcError) -> PmapcError:
    """`error` at the user's line whose equation is being lowered, if known."""
    where = jax_api.lowered_user_line()
    return error.at(SourceLoc(*where, 0)) if where is not None else error


def _identity_rule(ctx, *operands, **params):
    return operands


def pmapc_ir_rules() -> list[tuple[jax_api.Primitive, Callable[..., Any]]]:
    """(primitive, rule) pairs that lower a traced program to pmapc IR.

    Maps become `@pmapc.map`, collectives `@pmapc.<kind>`; primitives that only
    mark how values vary or are laid out are identities.
    """
    rules: list[tuple[jax_api.Primitive, Callable[..., Any]]] = [(map_p, _map_to_pmapc_ir)]
    rules.extend(
        (jax_api.collective_primitive(collective), _collective_rule(collective))
        for collective in collectives.ALL
    )
    rules.extend((p, _identity_rule) for p in jax_api.IDENTITY_PRIMITIVES)
    return rules


def check_supported(jaxpr) -> None:
    """Refuse primitives pmapc cannot lower (in `jaxpr` and the jaxprs inside it),
    at the user's line that used them."""
    for eqn in jaxpr.eqns:
        advice = jax_api.UNSUPPORTED_PRIMITIVES.get(eqn.primitive)
        if advice is not None:
            error = PmapcError(f"'{eqn.primitive.name}' is not supported by pmapc yet; {advice}")
            where = jax_api.user_line(eqn)
            raise error.at(SourceLoc(*where, 0)) if where is not None else error
        for inner in jax_api.jaxprs_in(eqn.params):
            check_supported(inner)


def _flatten(values) -> list:
    flat = []
    for value in values:
        if isinstance(value, (tuple, list)):
            flat.extend(value)
        else:
            flat.append(value)
    return flat

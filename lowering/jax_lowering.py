"""JAX's lowering to MLIR, as pmapc uses it: lowering rules, the parameters that
replace JAX's rules with pmapc's, and what a rule of pmapc's lowers where it
stands: a jaxpr as a module of its own in the enclosing lowering's MLIR context,
or a function's blocks on a mesh as JAX's `shard_map` lowers them.
(lowering/jax_api.py says which JAX releases, and why one adapter.)"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, NamedTuple

from jax._src import core as _core
from jax._src import linear_util as _lu
from jax._src import sharding_impls as _sharding_impls
from jax._src import source_info_util as _source_info
from jax._src.interpreters import mlir as _mlir_private
from jax._src.shard_map import _shard_map_lowering
from jax.interpreters import mlir as _mlir_public

from pmapc import ir
from pmapc.lowering.jax_api import (
    JAX_VERSION,
    SINCE_0_11,
    ClosedJaxpr,
    Jaxpr,
    Var,
    current_source_info,
    new_jaxpr_eqn,
)

# How JAX's lowering looks up a hoisted constant (a captured array, with
# `jax_use_simplified_jaxpr_constants`) among a function's lowered ones: by the
# array's id and abstract value up to 0.12.0.1, by its id alone from 0.12.1. A key
# of the other form is never found, and the constant is lowered again where used.
CONSTANTS_KEYED_BY_ID = JAX_VERSION >= (0, 12, 1)


def _const_key(value, aval) -> Any:
    return id(value) if CONSTANTS_KEYED_BY_ID else (id(value), aval)


def register_lowering(primitive, rule, *, cacheable: bool = True) -> None:
    """`rule` lowers `primitive`. A cacheable rule's lowering JAX emits as a private
    function once per equal equation in a module, and clones into each place the
    equation stands; an uncacheable one it runs in place each time."""
    _mlir_public.register_lowering(primitive, rule, cacheable=cacheable)


def lowering_parameters(override_rules) -> _mlir_public.LoweringParameters:
    """Lowering parameters that replace the rules of the given primitives."""
    return _mlir_public.LoweringParameters(override_lowering_rules=tuple(override_rules))


def stablehlo_module(lowered):
    """The StableHLO module of a `jax.jit(...).trace(...).lower(...)` result."""
    return lowered.compiler_ir("stablehlo")


def host_callbacks(lowered) -> tuple:
    """The Python functions the host-callback ops of a `jax.jit(...).trace(...).lower(...)`
    result call (`jax.debug.print`, `pure_callback`, `io_callback`): an op's `index`
    (in its `mhlo.backend_config`) is a position in this tuple, which XLA is given
    when it compiles the module."""
    return tuple(lowered._lowering.compile_args["host_callbacks"])


def ir_type_of(ctx, aval):
    return _mlir_public.aval_to_ir_type(ctx.module_context, aval)


def lower_body(ctx, name: str, jaxpr: ClosedJaxpr) -> str:
    """Lower `jaxpr` to a private function of the module being built; its symbol."""
    return ir.symbol_name(lower_function(ctx.module_context, name, jaxpr))


def lower_function(module_context, name: str, closed: ClosedJaxpr, main: bool = False):
    """`closed`, a jaxpr whose effects need no tokens, as a function of the module
    `module_context` builds: `@main` (public) if `main`, else a private function
    named `name` (made unique). What JAX's `lower_jaxpr_to_fun` makes of it, its
    locations included, without that function's attributes of arguments and
    results, shardings, layouts, memory kinds, donations and tokens, which it
    works out for every function (benchmarks/new_programs.py); a module
    that takes dimension variables (JAX's platform index, lowering for several
    platforms at once) goes through JAX's."""
    ctx = module_context
    if ctx.shape_poly_state.dim_vars:
        return jaxs_function(ctx, name, closed, main)
    _mlir_private.check_jaxpr_constants(closed)
    inputs = [_mlir_public.aval_to_ir_type(ctx, aval) for aval in closed.in_avals]
    results = [_mlir_public.aval_to_ir_type(ctx, aval) for aval in closed.out_avals]
    function, entry = ir.new_function(
        "main" if main else name,
        inputs,
        results,
        public=main,
        loc=ir.current_location(),
        ip=ctx.ip,
    )
    ctx.symbol_table.insert(function)
    # The main function's name stack and traceback head every location in it, as
    # in JAX's: it has no caller.
    name_stack = _source_info.new_name_stack(name) if main else _source_info.new_name_stack()
    traceback = _source_info.current().traceback if main else None
    loc = _mlir_private.source_info_to_location(ctx, None, name_stack, traceback)
    jaxpr = closed.jaxpr
    with ir.InsertionPoint(entry), loc:
        const_lowering: dict[Any, Any] = {
            _const_key(value, aval): _mlir_public.ir_constant(value, aval=aval)
            for value, aval in _core.jaxpr_const_args(jaxpr)
        }
        # A constant of the closed jaxpr that JAX hoists is the same value (one op).
        constants = {
            id(value): const_lowering.get(_const_key(value, var.aval))
            or _mlir_public.ir_constant(value, aval=var.aval)
            for value, var in zip(closed.consts, jaxpr.constvars)
        }
        outputs, _ = _mlir_private.jaxpr_subcomp(
            ctx,
            jaxpr,
            name_stack,
            _mlir_public.TokenSet.create([]),
            [constants[id(value)] for value in closed.consts],
            *entry.arguments,
            dim_var_values=[],
            const_lowering=const_lowering,
            outer_traceback=traceback,
        )
        flat = [
            v for output in outputs for v in (output if isinstance(output, tuple) else [output])
        ]
        ir.create_op("func.return", flat, [], loc=loc, ip=ir.current_insertion_point())
    return function


def jaxs_function(module_context, name: str, closed: ClosedJaxpr, main: bool = False):
    """What `lower_function` makes, as JAX's `lower_jaxpr_to_fun` makes it."""
    since_0_11: dict[str, Any] = {"out_avals": closed.out_avals} if SINCE_0_11 else {}
    function = _mlir_public.lower_jaxpr_to_fun(
        module_context,
        name,
        closed,
        effects=(),
        num_const_args=0,
        main_function=main,
        in_avals=closed.in_avals,
        **since_0_11,
    )
    if not main:
        function.attributes["sym_visibility"] = ir.string_attr("private")
    return function


def one_equation(primitive, params: dict, avals: list, traced_for: str) -> ClosedJaxpr:
    """The closed jaxpr of one `primitive` equation on `avals`, to lower: what
    `jax_api.trace_flat` makes of a function that binds it, without the trace (its
    debug information and the jaxpr made from it: benchmarks/new_programs.py).
    `traced_for` names it as `trace_flat`'s does."""
    avals_out, effects = primitive.abstract_eval(*avals, **params)
    if not primitive.multiple_results:
        avals_out = [avals_out]
    invars = [Var(aval) for aval in avals]
    outvars = [Var(aval) for aval in avals_out]
    eqn = new_jaxpr_eqn(invars, outvars, primitive, params, effects, current_source_info())
    debug = _lu.DebugInfo(traced_for, "<pmapc>", None, None)
    return ClosedJaxpr(Jaxpr([], invars, outvars, [eqn], effects, debug_info=debug), ())


def lower_on_mesh(ctx, operands, body: ClosedJaxpr, mesh, in_specs, out_specs) -> Sequence:
    """Lower, where the rule context `ctx` stands, what `jax.shard_map(f, mesh=mesh,
    in_specs=in_specs, out_specs=out_specs, check_vma=False)(*operands)` lowers to,
    every axis of `mesh` manual, for a function `f` whose jaxpr on the blocks is
    `body` (without constants): by JAX's own lowering rule of `shard_map`, given
    the parameters its tracing stages (0.10 to 0.12), without tracing the
    `shard_map` and lowering it through a jaxpr of its own (a new program's first
    call, benchmarks/new_programs.py)."""
    assert not body.consts, "lower_on_mesh takes a body without constants"
    return _shard_map_lowering(
        ctx,
        *operands,
        jaxpr=body.jaxpr,
        mesh=mesh,
        in_specs=tuple(in_specs),
        out_specs=tuple(out_specs),
        check_vma=False,
        newly_manual_axes=frozenset(mesh.axis_names),
    )


def lower_fun(fun, multiple_results: bool = True):
    """A lowering rule that lowers the JAX function `fun` in place."""
    return _mlir_public.lower_fun(fun, multiple_results=multiple_results)


class LoweredModule(NamedTuple):
    """A jaxpr lowered to a module of its own (in the MLIR context of the lowering it
    was lowered inside), and the Python functions its host-callback ops call (an
    op's `index` is a position in `host_callbacks`)."""

    module: ir.Module
    host_callbacks: tuple


def lower_inside(ctx, name: str, closed: ClosedJaxpr, override_rules) -> LoweredModule:
    """`closed` (a jaxpr without constants, on one device) as a module of its own,
    lowered with `override_rules` in place of JAX's, inside the lowering `ctx` is a
    rule context of: for its platforms and backend, in its MLIR context, sharing its
    cache of source locations.

    What `jax.jit(f).trace(...).lower(...)` makes of the same jaxpr, without the
    jit's own costs (tracing it again, resolving shardings and devices: a large
    part of a new program's first call on this path), none of which a one-device function has
    use for; nor those of JAX's `lower_jaxpr_to_module` (its verifier: the passes
    check the pmapc ops on entry and MLIR verifies what they make; and Shardy's
    pass that lifts meshes into symbols, where a one-device function names none
    but the maximal sharding of a host callback, which pmapc drops)."""
    assert not closed.consts, "lower_inside takes a jaxpr without constants"
    module_context = inner_module_context(ctx, override_rules)
    with ir.building(module_context.module):
        lower_function(module_context, name, closed, main=True)
    return LoweredModule(module_context.module, tuple(module_context.host_callbacks))


def inner_module_context(ctx, override_rules):
    """A module context for a module of its own inside the lowering `ctx` is a rule
    context of (`lower_inside`'s), lowering with `override_rules`."""
    enclosing = ctx.module_context
    platforms = enclosing.platforms
    return _mlir_private.ModuleContext(
        platforms=platforms,
        backend=enclosing.backend,
        axis_context=_sharding_impls.ShardingContext(1),
        keepalives=[],
        channel_iterator=itertools.count(_mlir_private.COLLECTIVE_CHANNEL_ID + 1),
        host_callbacks=[],
        lowering_parameters=lowering_parameters(override_rules),
        context=enclosing.context,
        traceback_caches=enclosing.traceback_caches,
        shape_poly_state=_mlir_private.ShapePolyLoweringState((), platforms),
    )

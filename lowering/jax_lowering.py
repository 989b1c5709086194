"""JAX's lowering to MLIR, as pmapc uses it: lowering rules, the parameters that
replace JAX's rules with pmapc's, the module of a jaxpr lowered inside the
lowering of the jitted function that holds it, and the MLIR context it is built
in. (lowering/jax_api.py says which JAX releases, and why one adapter.)"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

from jax._src import sharding_impls as _sharding_impls
from jax._src.interpreters import mlir as _mlir_private
from jax.interpreters import mlir as _mlir_public

from pmapc import ir
from pmapc.lowering.jax_api import SINCE_0_11, ClosedJaxpr


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
    since_0_11: dict[str, Any] = {"out_avals": jaxpr.out_avals} if SINCE_0_11 else {}
    func = _mlir_public.lower_jaxpr_to_fun(
        ctx.module_context,
        name,
        jaxpr,
        effects=(),
        num_const_args=0,
        in_avals=jaxpr.in_avals,
        **since_0_11,
    )
    func.attributes["sym_visibility"] = ir.string_attr("private")
    return ir.symbol_name(func)


class _EnclosingLowering(threading.local):
    context: Any = None  # the MLIR context of the lowering this thread is inside


_enclosing_lowering = _EnclosingLowering()


@contextlib.contextmanager
def lowering_inside(ctx) -> Iterator[None]:
    """JAX's lowerings started inside (pmapc's of a map, inside JAX's lowering of
    the jitted function that holds it) build their modules in the enclosing
    lowering's MLIR context. 0.10 made a context, with every dialect loaded, per
    lowering (5 ms); from 0.11 on a thread reuses one for 10 lowerings, then makes
    a new one (3 ms), and a map's inner lowering is not one of the 10."""
    previous = _enclosing_lowering.context
    _enclosing_lowering.context = ctx.module_context.context
    try:
        yield
    finally:
        _enclosing_lowering.context = previous


def _make_ir_context(make=_mlir_private.make_ir_context):
    return _enclosing_lowering.context or make()


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
    rule context of: for its platforms and backend, in its MLIR context.

    What `jax.jit(f).trace(...).lower(...)` makes of the same jaxpr, without the
    jit's own costs (tracing it again, resolving shardings and devices: 1.2 ms of
    a new program's 3.2 on this path), none of which a one-device function has
    use for."""
    assert not closed.consts, "lower_inside takes a jaxpr without constants"
    module_context = ctx.module_context
    jaxpr: Any = closed.jaxpr if SINCE_0_11 else closed  # 0.11: the open jaxpr
    since_0_11: dict[str, Any] = {"out_avals": closed.out_avals} if SINCE_0_11 else {}
    with lowering_inside(ctx):
        result = _mlir_public.lower_jaxpr_to_module(
            name,
            jaxpr,
            num_const_args=0,
            in_avals=closed.in_avals,
            ordered_effects=[],
            platforms=module_context.platforms,
            backend=module_context.backend,
            axis_context=_sharding_impls.ShardingContext(1),
            donated_args=[False] * len(closed.in_avals),
            lowering_parameters=lowering_parameters(override_rules),
            **since_0_11,
        )
    return LoweredModule(result.module, tuple(result.host_callbacks))


# The module-level name JAX's ModuleContext and lower_jaxpr_to_module call.
_mlir_private.make_ir_context = _make_ir_context

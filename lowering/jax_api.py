"""The one adapter over JAX's tracing and lowering internals the tracer uses.

pmapc traces bodies with public `jax.make_jaxpr`, defines its map primitive
with `jax.extend.core.Primitive`, and lowers with `jax.jit(...).trace(...)
.lower(...)`; what it needs beyond that (the collective primitives, the
lowering-rule context, jaxpr helpers) is imported here and nowhere else.
"""

from __future__ import annotations

import os

from jax._src import core as _core
from jax._src import source_info_util as _source_info
from jax._src.interpreters import mlir as _mlir
from jax._src.interpreters import partial_eval as _pe
from jax._src.lax import parallel as _parallel
from jax.extend.core import Primitive

from pmapc import ir

__all__ = ["Primitive"]

ClosedJaxpr = _core.ClosedJaxpr
ShapedArray = _core.ShapedArray
Tracer = _core.Tracer

# JAX's named-axis collective primitives, by pmapc collective kind.
COLLECTIVE_PRIMITIVES = {
    "psum": _parallel.psum_p,
    "pmax": _parallel.pmax_p,
    "pmin": _parallel.pmin_p,
    "all_gather": _parallel.all_gather_p,
    "psum_scatter": _parallel.reduce_scatter_p,
    "all_to_all": _parallel.all_to_all_p,
    "ppermute": _parallel.ppermute_p,
    "axis_index": _parallel.axis_index_p,
}

# Primitives that only mark a value as varying over axes: identities here.
IDENTITY_PRIMITIVES = tuple(
    p for p in (getattr(_parallel, "pbroadcast_p", None), getattr(_core, "pvary_p", None)) if p
)


def register_lowering(primitive, rule) -> None:
    _mlir.register_lowering(primitive, rule)


def lowering_parameters(override_rules) -> _mlir.LoweringParameters:
    """Lowering parameters that replace the rules of the given primitives."""
    return _mlir.LoweringParameters(override_lowering_rules=tuple(override_rules))


def stablehlo_module(lowered):
    """The StableHLO module of a `jax.jit(...).trace(...).lower(...)` result."""
    return lowered.compiler_ir("stablehlo")


def ir_type_of(ctx, aval):
    return _mlir.aval_to_ir_type(ctx.module_context, aval)


def lower_body(ctx, name: str, jaxpr: ClosedJaxpr) -> str:
    """Lower `jaxpr` to a private function of the module being built; its symbol."""
    func = _mlir.lower_jaxpr_to_fun(
        ctx.module_context, name, jaxpr, effects=(), num_const_args=0,
        in_avals=jaxpr.in_avals,
    )
    func.attributes["sym_visibility"] = ir.string_attr("private")
    return ir.as_string(func.attributes["sym_name"])


def closure_to_arguments(closed: ClosedJaxpr) -> tuple[ClosedJaxpr, list]:
    """Turn a jaxpr's captured constants into leading arguments: (jaxpr, constants)."""
    jaxpr = _pe.convert_constvars_jaxpr(closed.jaxpr)
    return ClosedJaxpr(jaxpr, ()), list(closed.consts)


def is_tracer(value) -> bool:
    return isinstance(value, Tracer)


def hide_from_locations(*modules) -> None:
    """Leave pmapc's own frames out of the source locations JAX records.

    Ops then carry the user's file and line, not the tracer's.
    """
    for module in modules:
        _source_info.register_exclusion(os.path.dirname(module.__file__) + os.sep)


def is_user_file(filename: str) -> bool:
    """Whether a frame in `filename` is the user's (not JAX's, pmapc's or Python's)."""
    return _source_info.is_user_filename(filename) and not filename.startswith("<frozen")


def raised_by_collective(tb) -> bool:
    """Whether a traceback went through JAX's collective primitives (a user's bad call)."""
    collectives_file = _parallel.__file__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == collectives_file:
            return True
        tb = tb.tb_next
    return False

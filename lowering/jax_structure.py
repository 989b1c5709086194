"""What a map's structure reads of JAX's jaxprs (lowering/structure.py), from JAX's
internals: literals and fresh variables, the surgery that hoists literals into
arguments, and the trace context.

(lowering/jax_api.py says which JAX releases, and why one adapter per area.)
"""

from __future__ import annotations

from jax._src import config as _config
from jax._src import core as _core


def is_literal(atom) -> bool:
    """Whether a jaxpr equation's operand is a literal (a scalar written in the
    jaxpr, as `mul b 0.001:f32[]`) rather than a variable."""
    return isinstance(atom, _core.Literal)


def new_var(aval):
    """A fresh jaxpr variable of abstract value `aval`."""
    return _core.Var(aval)


def with_operands(jaxpr, invars: list, eqns: list):
    """`jaxpr` (open) with these arguments and equations: JAX renames arguments it
    cannot name any more (`debug_info`) when `invars` changes."""
    return jaxpr.replace(invars=invars, eqns=eqns)


def trace_context() -> tuple:
    """The configuration that decides how JAX traces and lowers (what its own caches
    of jitted functions are keyed on besides the function and its arguments)."""
    return _config.trace_context()

"""A map's structure: what decides the per-device program pmapc compiles for it.

A sweep, a notebook or a test suite makes programs that differ in a constant:
the learning rate of a step, the scale of a loss, a temperature. To `jax.jit`
each is a new function, and so, inside it, a new outermost map for pmapc to
lower, run through its passes and embed (compiler/embed.py), though all of
them compile to one per-device module but for that constant.

`shared_map` tells the two apart. The floating-point literals of the map's
bodies (the top-level equations of each nested map's body; not those of the
jaxprs inside equations, a `jit`'s or a `cond`'s branches), scalars all, become leading
arguments of the outermost map, one per distinct value (its abstract value and
bits), unmapped, passed down to the maps that use them. What is left is the
map's *structure*, a hashable key that equal maps share:

- each equation's primitive and parameters (a jaxpr by its own structure, a float
  or a complex by its bits, other values by value, or by identity where that is
  their equality; not a custom derivative's rules, which the lowering leaves
  alone: `jax_structure.lowered_params`), which values it reads (a hoisted
  literal: which hoisted argument) and defines and their abstract values, its
  source location (the user's file and line, which the program's metadata
  names) and its context;
- the literals that stay, by value: integers and booleans index, size and
  select (a slice's start, a loop's bound, a mask), and pmapc's passes read
  them as constants where a float is a value to compute with; and arrays, which
  JAX writes as literals when `jax_use_simplified_jaxpr_constants` is on (the
  default from jax 0.12.1): a captured array is data, not a sweep's constant.

Equal keys give one per-device module, whose hoisted arguments the embedding
replaces with constants of each program's values (compiler/embed.py `Literals`),
which XLA folds in as it folds literals. Literals equal in one program and not
in another make two structures (one argument, or two). A map whose structure
cannot be told is not shared: one with ordered effects, an unhashable
parameter, or a jaxpr with constants. Nor is a program that calls back to
Python (compiler/embed.py): what it calls is its function's.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from pmapc.lowering import jax_api, jax_structure, primitives


class SharedMap(NamedTuple):
    """An outermost map's parameters with its bodies' float literals hoisted."""

    params: dict[str, Any]  # the map's, the literals its leading (unmapped) operands
    constants: tuple[np.ndarray, ...]  # the literals' values, in operand order
    key: tuple  # the map's structure: equal for maps that share a program


class _Unshared(Exception):
    """The map's structure cannot be told by value (see the module docstring)."""


def shared_map(params: dict[str, Any]) -> SharedMap | None:
    """The map of `map_p`'s parameters `params` (the mesh aside) with its float
    literals hoisted, and its structure; None for a map that cannot be shared."""
    try:
        hoisted, constants, key = _hoisted_map(params)
    except _Unshared:
        return None
    return SharedMap(hoisted, tuple(constants), key)


class _Hoisted:
    """The float literals a body hoists: one argument per distinct value (abstract
    value and bits), in the order first met. A step's learning rate, used once a
    parameter array, is one argument, not hundreds."""

    def __init__(self) -> None:
        self.arguments: list = []
        self.constants: list[np.ndarray] = []
        self._positions: dict[tuple, int] = {}

    def position(self, aval, value: np.ndarray) -> int:
        """The position of the argument that holds `value`, made if new."""
        key = (aval, value.tobytes())
        position = self._positions.get(key)
        if position is None:
            position = self._positions[key] = len(self.arguments)
            self.arguments.append(jax_structure.new_var(aval))
            self.constants.append(value)
        return position


def _body(jaxpr, hoist: bool) -> tuple[Any, list[np.ndarray], tuple]:
    """(`jaxpr` with its float literals as leading arguments if `hoist`, their
    values, its structure). A nested map's equation takes the literals hoisted
    from its body as leading operands, which become arguments here in turn."""
    if jaxpr.constvars or jax_api.ordered_effects(jaxpr):
        raise _Unshared
    numbers: dict[Any, int] = {var: n for n, var in enumerate(jaxpr.invars)}
    hoisted = _Hoisted()
    eqns = []
    keys = []
    for eqn in jaxpr.eqns:
        operands, reads = [], []
        replaced = False
        for atom in eqn.invars:
            if not jax_structure.is_literal(atom):
                operands.append(atom)
                reads.append(numbers[atom])
            elif hoist and _hoistable(atom):
                position = hoisted.position(atom.aval, _literal_value(atom))
                operands.append(hoisted.arguments[position])
                reads.append(("hoisted", position))
                replaced = True
            else:
                operands.append(atom)
                reads.append(_literal(atom))
        if hoist and eqn.primitive is primitives.map_p:
            inner, inner_constants, inner_key = _hoisted_map(eqn.params)
            hoisted_avals = inner["jaxpr"].in_avals[: len(inner_constants)]
            positions = tuple(
                hoisted.position(aval, value) for aval, value in zip(hoisted_avals, inner_constants)
            )
            passed = [hoisted.arguments[position] for position in positions]
            eqn = eqn.replace(invars=passed + operands, params=inner)
            params_key = (inner_key, positions)
        else:
            params_key = _value(tuple(jax_structure.lowered_params(eqn).items()))
            if replaced:
                eqn = eqn.replace(invars=operands)
        for var in eqn.outvars:
            numbers[var] = len(numbers)
        source = eqn.source_info
        keys.append(
            (
                eqn.primitive,
                params_key,
                tuple(reads),
                tuple(var.aval for var in eqn.outvars),
                source.traceback,
                source.name_stack,
                _hashable(eqn.ctx),
                _hashable(frozenset(eqn.effects)),  # the named axes it uses, say
            )
        )
        eqns.append(eqn)
    results = tuple(
        _literal(atom) if jax_structure.is_literal(atom) else numbers[atom]
        for atom in jaxpr.outvars
    )
    arguments = (tuple(var.aval for var in jaxpr.invars), tuple(v.aval for v in hoisted.arguments))
    key = (*arguments, tuple(keys), results)
    if not hoist:
        return jaxpr, [], key
    operands = hoisted.arguments + list(jaxpr.invars)
    return jax_structure.with_operands(jaxpr, operands, eqns), hoisted.constants, key


def _hoisted_map(params: dict[str, Any]) -> tuple[dict[str, Any], list[np.ndarray], tuple]:
    """(a map's parameters with its bodies' float literals hoisted, their values, its
    structure)."""
    body, constants, body_key = _body(params["jaxpr"].jaxpr, hoist=True)
    # The placement is made from the mesh, which the key holds (`placement_jaxpr`).
    others = _value(
        tuple((name, v) for name, v in params.items() if name not in ("jaxpr", "placement"))
    )
    hoisted = dict(
        params,
        jaxpr=jax_api.ClosedJaxpr(body, ()),
        in_axes=(None,) * len(constants) + tuple(params["in_axes"]),
    )
    return hoisted, constants, (body_key, others)


# Parameter values compared by value as they are.
_PLAIN = (type(None), bool, int, str, bytes, np.dtype, np.generic, enum.Enum)
# Parameter values compared by their bits, as literals are: Python's == makes -0.0
# and 0.0 one value (`symmetric_product(alpha=-0.0)` would get the program of
# `alpha=0.0`) and a NaN no value at all.
_INEXACT = (float, complex, np.inexact)


# Values that stand for themselves in a key: no value of another type equals one
# (a bool does equal an int, so bools are tagged with their type). Most
# parameters are of these types and tuples of them (shapes, axes, flags): a
# 300-array step's 3,600 equations hold 25,000 values.
_BARE = frozenset([type(None), int, str])


def _value(value) -> Any:
    """A parameter's value as part of a key: None, ints and strings as they are,
    other plain values with their type (1, 1.0, True and int32(1) are equal in
    Python), floating-point ones by their bits, tuples item by item (a tagged
    value is a pair whose first item is a class, which no such tuple holds), other
    sequences with their type, jaxprs by their structure."""
    kind = type(value)
    if kind in _BARE:
        return value
    if kind is tuple:
        return tuple([_value(item) for item in value])
    if isinstance(value, _INEXACT):
        return (type(value), np.asarray(value).tobytes())
    if isinstance(value, _PLAIN):
        return (type(value), value)
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_value(item) for item in value))
    if isinstance(value, jax_api.ClosedJaxpr):
        if value.consts:
            raise _Unshared
        return (jax_api.ClosedJaxpr, _body(value.jaxpr, hoist=False)[2])
    if isinstance(value, jax_api.Jaxpr):
        return (jax_api.Jaxpr, _body(value, hoist=False)[2])
    # Other values compare by value or by identity (jit's UNSPECIFIED, a remat's
    # policy function); the key holds them, so an identity is never another object's.
    return (type(value), _hashable(value))


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        raise _Unshared from None
    return value


def _hoistable(atom) -> bool:
    """Whether a literal becomes an argument: a floating-point scalar. An array
    literal (a captured array, under `jax_use_simplified_jaxpr_constants`) stays,
    by value: its bits are its program's, not a constant of a sweep."""
    aval = atom.aval
    return aval.shape == () and jnp.issubdtype(aval.dtype, jnp.floating)


def _literal_value(atom) -> np.ndarray:
    return np.asarray(atom.val, dtype=atom.aval.dtype)


def _literal(atom) -> tuple:
    """A literal that stays, by its abstract value and bytes."""
    return (atom.aval, _literal_value(atom).tobytes())

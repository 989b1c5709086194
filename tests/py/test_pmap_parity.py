"""`pmapc.pmap` where a code base swaps it in for every `jax.pmap`, single-level maps
included: methods, axis names of any hashable type, typed PRNG keys. Values are
checked against numpy or nested `jax.vmap`."""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import numpy as np
from jax import lax

import pmapc

X = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)


# -- methods -----------------------------------------------------------------------


class Scaler:
    def __init__(self, scale: float):
        self.scale = scale

    @partial(pmapc.pmap, axis_name="i", static_broadcasted_argnums=0)
    def total(self, x):
        return lax.psum(x, "i") * self.scale


def test_a_method_binds_self_and_static_argnums_count_it():
    scaler = Scaler(3.0)
    expected = np.broadcast_to(X.sum(axis=0) * 3.0, X.shape)
    np.testing.assert_array_equal(np.asarray(scaler.total(X)), expected)
    np.testing.assert_array_equal(np.asarray(Scaler.total(scaler, X)), expected)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Shift:
    offset: jax.Array

    @partial(pmapc.pmap, axis_name="i", in_axes=(None, 0))
    def apply(self, x):
        return x + self.offset + lax.axis_index("i")


def test_a_method_of_a_pytree_maps_self_by_in_axes():
    shift = Shift(np.float32(0.5))
    expected = X + 0.5 + np.arange(8, dtype=np.float32)[:, None]
    np.testing.assert_array_equal(np.asarray(shift.apply(X)), expected)


# -- axis names by equality and hash, not by their text ------------------------------


class SameRepr:
    """Distinct names (equality by identity) that print alike."""

    def __repr__(self) -> str:
        return "SameRepr()"


@dataclasses.dataclass(frozen=True)
class Named:
    """Equal names that are different objects."""

    text: str


def nested(mapper, outer, inner):
    body = lambda x: lax.psum(x, (outer, inner)) * 10 + lax.axis_index(inner)  # noqa: E731
    return mapper(mapper(body, axis_name=inner), axis_name=outer)


def vmap_mapper(fun, axis_name):
    return jax.vmap(fun, axis_name=axis_name)


def test_distinct_names_that_print_alike_stay_distinct():
    outer, inner = SameRepr(), SameRepr()
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    expected = nested(vmap_mapper, outer, inner)(x)
    np.testing.assert_array_equal(np.asarray(nested(pmapc.pmap, outer, inner)(x)), expected)
    text = nested(pmapc.pmap, outer, inner).lower(x).as_text("pmapc")
    assert "SameRepr:SameRepr()" in text and "SameRepr:SameRepr()#2" in text


def test_equal_names_are_one_axis_whatever_object_names_it():
    # The psum names the outer axis with an object of its own, equal to the map's.
    f = pmapc.pmap(pmapc.pmap(lambda x: lax.psum(x, Named("i")), axis_name=Named("j")),
                   axis_name=Named("i"))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(np.asarray(f(x)), np.broadcast_to(x.sum(0), x.shape))

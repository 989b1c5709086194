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

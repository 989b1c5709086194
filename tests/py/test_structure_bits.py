"""A map's structure compares float and complex parameters by their bits, as it compares
literals (lowering/structure.py): Python's `-0.0 == 0.0` must not give a program the
compiled value of another. A sweep over `alpha = 0.0, -0.0` of
`lax.linalg.symmetric_product` gets each its own value (against numpy) and shares
what has equal bits (`embed.SHARED_PROGRAMS`' counters)."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest
from jax import lax

import pmapc
from pmapc.compiler import embed
from pmapc.lowering import primitives, structure

# Captured constants trace as literals or as constants (conftest.jaxpr_constants).
pytestmark = pytest.mark.usefixtures("jaxpr_constants")

A = np.ones((4, 2, 3), np.float32)
C = np.full((4, 2, 2), -0.0, np.float32)  # beta * C adds -0.0, which keeps alpha's sign


def program(alpha: float):
    """A new function for each alpha (a sweep: each a new program to jax.jit)."""

    def body(a, c):
        return lax.linalg.symmetric_product(a, c, alpha=alpha, beta=0.0)

    return jax.jit(pmapc.pmap(body, axis_name="i"))


def expected(alpha: float) -> np.ndarray:
    return alpha * (A @ A.transpose(0, 2, 1)) + 0.0 * C


def map_params(alpha: float) -> dict:
    """The parameters of the outermost map `program(alpha)` binds."""
    jaxpr = jax.make_jaxpr(program(alpha))(A, C)
    (found,) = [e for e in _equations(jaxpr.jaxpr) if e.primitive is primitives.map_p]
    params = dict(found.params)
    del params["mesh"]  # the embedding keys the map by the rest (compiler/embed.py)
    return params


def _equations(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for param in eqn.params.values():
            inner = getattr(param, "jaxpr", None)
            if inner is not None:
                yield from _equations(getattr(inner, "jaxpr", inner))


@pytest.mark.parametrize("order", [(0.0, -0.0, 0.0, -0.0), (-0.0, 0.0, -0.0, 0.0)])
def test_a_sweep_over_the_sign_of_zero_gets_each_value(order):
    misses = embed.SHARED_PROGRAMS.misses
    for alpha in order:
        got = np.asarray(program(alpha)(A, C))
        want = expected(alpha)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    # 0.0 and -0.0 are two programs, each compiled once (kept from an earlier order
    # when this runs second)
    assert embed.SHARED_PROGRAMS.misses - misses <= 2


@pytest.mark.parametrize(
    "one, other, equal",
    [
        (0.0, -0.0, False),
        (0.0, 0.0, True),
        (math.nan, math.nan, True),
        (np.float32(-0.0), np.float32(0.0), False),
        (np.float32(0.0), np.float64(0.0), False),
        (complex(0.0, -0.0), complex(0.0, 0.0), False),
        (1.0, 1, False),
        (True, 1, False),
        (np.int32(1), 1, False),
        ((1, "a", None), (1, "a", None), True),
        ((1, 2), [1, 2], False),
        ((True,), (1,), False),
        ((int, 1), 1, False),
    ],
)
def test_parameters_compare_by_bits(one, other, equal):
    assert (structure._value(one) == structure._value(other)) is equal


def test_maps_that_differ_in_the_sign_of_a_parameter_differ_in_structure():
    keys = [structure.shared_map(map_params(alpha)) for alpha in (0.0, -0.0, 0.0)]
    assert all(key is not None for key in keys)
    assert keys[0].key != keys[1].key
    assert keys[0].key == keys[2].key

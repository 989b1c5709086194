"""Complex numbers through every collective that takes them, in both target forms, and
their gradients, against nested `jax.vmap` (complex64; complex128 with x64 on).

pmax and pmin are left out: JAX defines no order on complex numbers (XLA refuses
them too).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pmapc

ROWS, COLUMNS = 2, 4


def ring(n):
    return [(k, (k + 1) % n) for k in range(n)]


# One body per kind, over the inner axis, the outer one or both.
BODIES = {
    "psum": lambda v: lax.psum(v, ("data", "model")),
    "pmean": lambda v: lax.pmean(v, "model"),
    "all_gather": lambda v: lax.all_gather(v, "model", tiled=True),
    "psum_scatter": lambda v: lax.psum_scatter(v, "model", tiled=True),
    "all_to_all": lambda v: lax.all_to_all(v, "model", 0, 0, tiled=True),
    "ppermute": lambda v: lax.ppermute(v, "model", ring(COLUMNS)),
    "axis_index": lambda v: v * lax.axis_index(("data", "model")),
    "outer_psum": lambda v: lax.psum(v, "data"),
}


def nest(mapper, body):
    return mapper(mapper(body, axis_name="model"), axis_name="data")


def vmap_mapper(fun, axis_name):
    return jax.vmap(fun, axis_name=axis_name)


def complex_input(dtype=np.complex64):
    real = np.arange(ROWS * COLUMNS * 8, dtype=np.float64).reshape(ROWS, COLUMNS, 8)
    return (real - 3j * real[::-1] + 1j).astype(dtype)


@pytest.mark.parametrize("target", ["partitions", "replicas"])
@pytest.mark.parametrize("kind", BODIES)
def test_every_collective_on_complex64_in_both_forms(kind, target):
    x = complex_input()
    expected = np.asarray(nest(vmap_mapper, BODIES[kind])(x))
    assert expected.dtype == np.complex64
    compiled = pmapc.lower(nest(pmapc.pmap, BODIES[kind]), x, target=target).compile()
    np.testing.assert_allclose(np.asarray(compiled(x)), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(nest(pmapc.pmap, BODIES[kind])(x)), expected, rtol=1e-6)


@pytest.mark.parametrize("kind", BODIES)
def test_gradients_through_complex_collectives(kind):
    """The gradient of a real loss of a complex program (JAX's convention: the
    conjugate of the derivative) against nested vmap's."""
    x = complex_input()
    shape = jax.eval_shape(nest(vmap_mapper, BODIES[kind]), x).shape
    weights = (np.arange(np.prod(shape)).reshape(shape) % 5 - 2).astype(np.complex64)

    def loss(mapper):
        return lambda v: jnp.real(jnp.sum(nest(mapper, BODIES[kind])(v) * weights))

    expected = np.asarray(jax.grad(loss(vmap_mapper))(x))
    np.testing.assert_allclose(np.asarray(jax.grad(loss(pmapc.pmap))(x)), expected, rtol=1e-6)


def test_complex128_with_x64():
    with jax.enable_x64(True):
        x = complex_input(np.complex128)
        body = BODIES["psum"]
        expected = np.asarray(nest(vmap_mapper, body)(x))
        result = np.asarray(nest(pmapc.pmap, body)(x))
    assert result.dtype == expected.dtype == np.complex128
    np.testing.assert_allclose(result, expected, rtol=1e-12)

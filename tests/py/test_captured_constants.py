"""Captured constants, with `jax_use_simplified_jaxpr_constants` off and on.

The flag (on by default from jax 0.12.1, off before; a user may set it either
way on every admitted release) decides how a trace holds an array the body
closes over: as a constant of the closed jaxpr (off) or as a literal written in
the equation that reads it (on). pmapc shares a per-device program between maps
whose structure differs only in their float scalar literals
(lowering/structure.py); an array literal is data, and stays in its program.

Every program here is checked against nested `jax.vmap` (oracle.py), in every
execution form, with the flag each way.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from support.oracle import check_against_vmap, nest
from support.oracle import vmap_mapper as oracle_mapper

import pmapc

pytestmark = pytest.mark.usefixtures("jaxpr_constants")

X = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
NAMES = ("data", "model")


def captured(values, dtype=np.float32) -> jax.Array:
    """A device array of `values`, as a user's closure captures it."""
    return jnp.asarray(np.asarray(values, dtype))


CAPTURED = {
    "vector": captured([0.5, 1.0, 1.5]),
    "uniform_vector": captured([0.5, 0.5, 0.5]),
    "scalar": captured(0.25),
    "matrix": captured(np.arange(12).reshape(4, 3) / 7),
}


@pytest.mark.parametrize("name", list(CAPTURED))
def test_a_captured_float_array_is_read_whole(name: str):
    constant = CAPTURED[name]

    def build(mapper):
        return nest(mapper, lambda y: lax.psum(y * constant, "model"), NAMES)

    x = X if constant.ndim < 2 else np.arange(2 * 4 * 4 * 3, dtype=np.float32).reshape(2, 4, 4, 3)
    check_against_vmap(build, x)


def test_the_issues_repro_gives_each_element_its_own_product():
    """A captured [0.5, 1, 1.5] once computed as [0.5, 0.5, 0.5] with the flag on."""
    vec = captured([0.5, 1.0, 1.5])
    f = pmapc.pmap(
        pmapc.pmap(lambda y: lax.psum(y * vec, "model"), axis_name="model"), axis_name="data"
    )
    np.testing.assert_array_equal(np.asarray(f(X))[0, 0], [9.0, 22.0, 39.0])


def test_captured_integer_and_boolean_arrays():
    offsets = captured([3, -1, 7], np.int32)
    mask = captured([True, False, True], np.bool_)

    def build(mapper):
        def body(y):
            shifted = y.astype(jnp.int32) + offsets
            return lax.psum(jnp.where(mask, shifted, -shifted), "data")

        return nest(mapper, body, NAMES)

    check_against_vmap(build, X)


def test_a_captured_vector_inside_cond():
    vec = captured([2.0, -1.0, 0.5])

    def build(mapper):
        def body(y):
            index = lax.axis_index("model")
            scaled = lax.cond(index % 2 == 0, lambda v: v * vec, lambda v: v - vec, y)
            return lax.psum(scaled, ("data", "model"))

        return nest(mapper, body, NAMES)

    check_against_vmap(build, X)


def test_a_captured_vector_inside_scan():
    vec = captured([1.0, 0.5, 0.25])

    def build(mapper):
        def body(y):
            def step(carry, _):
                carry = carry * vec + lax.pmean(carry, "model")
                return carry, carry.sum()

            final, sums = lax.scan(step, y, None, length=3)
            return final, sums

        return nest(mapper, body, NAMES)

    check_against_vmap(build, X / 16)


def test_a_captured_vector_under_grad():
    vec = captured([1.0, 2.0, 3.0])

    def build(mapper):
        def body(y):
            def loss(w):
                return lax.psum(jnp.sum(jnp.sin(w) * vec), "model")

            return jax.grad(loss)(y)

        return nest(mapper, body, NAMES)

    check_against_vmap(build, X / 8, rtol=1e-5)


def _scaled(vec):
    @partial(pmapc.pmap, axis_name="data")
    def step(x):
        return pmapc.pmap(lambda y: lax.psum(y * vec * 2.0, "model"), axis_name="model")(x)

    return step


@pytest.mark.parametrize("called", ["called", "inside_jit"])
def test_programs_of_one_structure_keep_their_own_arrays(called: str):
    """Programs that differ only in a captured array (and share a float literal) each
    compute with their own array, however they are called."""
    vectors = [captured([1.0, 2.0, 3.0]), captured([1.0, 1.0, 1.0]), captured([-3.0, 0.0, 5.0])]
    for vec in vectors:
        step = _scaled(vec)
        run = step if called == "called" else jax.jit(step)
        expected = X.sum(axis=1, keepdims=True).repeat(4, axis=1) * np.asarray(vec) * 2.0
        np.testing.assert_array_equal(np.asarray(run(X)), expected)


def test_a_sweep_over_captured_scalars_gets_each_value():
    """Captured 0-d arrays are float literals with the flag on: a sweep's programs
    share one structure and each computes with its own value."""
    for scale in (0.5, 2.0, -1.25):
        step = _scaled(captured(scale))
        expected = X.sum(axis=1, keepdims=True).repeat(4, axis=1) * scale * 2.0
        np.testing.assert_array_equal(np.asarray(step(X)), expected)


@pytest.mark.parametrize("count", [1, 2, 4])
def test_a_captured_vector_folded_onto_fewer_devices(count: int):
    """Folded (lowering/fold.py reads literals as values), each element stays its own."""
    vec = captured([0.5, 1.0, 1.5])

    def build(mapper):
        return nest(mapper, lambda y: lax.psum(y * vec, ("data", "model")), NAMES)

    expected = build(oracle_mapper)(X)
    with pmapc.fold_onto(jax.devices()[:count]):
        actual = build(pmapc.pmap)(X)
    np.testing.assert_array_equal(np.asarray(actual), np.asarray(expected))


def test_captured_float64_arrays_and_scalars_under_x64():
    """With `jax_enable_x64` a captured float64 array keeps its type; a float64 scalar
    literal is hoisted like a float32 one."""
    with jax.enable_x64(True):
        vec = jnp.asarray(np.array([0.5, 1.0, 1.5]))
        scale = jnp.asarray(np.float64(1 / 3))

        def build(mapper):
            return nest(mapper, lambda y: lax.psum(y * vec * scale, "model"), NAMES)

        check_against_vmap(build, X.astype(np.float64), rtol=1e-12, atol=1e-12)

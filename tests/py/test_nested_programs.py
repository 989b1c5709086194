"""Classic nested-pmap programs run with `pmapc.pmap`, checked against nested `jax.vmap`.

The tutorial nest, `normalize` over rows and columns, a data- and model-parallel
MLP training step, and a ring all-reduce built from `ppermute`. Each program is
written once as a function of a mapper (see `oracle.py`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from support.oracle import assert_tree_equal, check_against_vmap, nest, small_ints, vmap_mapper

import pmapc

# ----------------------------------------------------------------------------
# (a) The tutorial: an outer map over 'data' calling an inner map over 'model'


def tutorial(mapper):
    def outer(x):
        inner = mapper(lambda y: lax.psum(y, "model"), "model")
        row_sums = inner(x)
        return row_sums, lax.psum(row_sums, "data")

    return mapper(outer, "data")


@pytest.mark.parametrize("shape", [(2, 2), (2, 2, 2, 2)], ids=str)
def test_tutorial_nest_sums_over_model_then_data(shape, rng):
    x = small_ints(rng, shape)
    row_sums, total = check_against_vmap(tutorial, x)
    assert_tree_equal(row_sums, np.broadcast_to(x.sum(axis=1, keepdims=True), shape))
    assert_tree_equal(total, np.broadcast_to(x.sum(axis=(0, 1)), shape))


def test_tutorial_function_runs_with_a_second_shape(rng):
    step, oracle = tutorial(pmapc.pmap), tutorial(vmap_mapper)
    for shape in [(2, 2), (2, 2, 2, 2)]:
        x = small_ints(rng, shape)
        assert_tree_equal(jax.tree_util.tree_map(np.asarray, step(x)), oracle(x))


# ----------------------------------------------------------------------------
# (b) normalize over rows and columns


def normalize(mapper):
    @functools.partial(mapper, axis_name="rows")
    @functools.partial(mapper, axis_name="cols")
    def normalized(x):
        row_normed = x / lax.psum(x, "rows")
        col_normed = x / lax.psum(x, "cols")
        doubly_normed = x / lax.psum(x, ("rows", "cols"))
        return row_normed, col_normed, doubly_normed

    return normalized


@pytest.mark.parametrize("shape", [(2, 4), (4, 2, 3)], ids=str)
def test_normalize_over_rows_and_cols(shape, rng):
    x = rng.uniform(1.0, 2.0, size=shape).astype(np.float32)
    row_normed, col_normed, doubly_normed = check_against_vmap(normalize, x)
    ones = np.ones(shape[2:], np.float32)
    np.testing.assert_allclose(row_normed.sum(axis=0), np.ones(shape[1:]), rtol=1e-6)
    np.testing.assert_allclose(col_normed.sum(axis=1), np.ones(shape[:1] + shape[2:]), rtol=1e-6)
    np.testing.assert_allclose(doubly_normed.sum(axis=(0, 1)), ones, rtol=1e-6)


# ----------------------------------------------------------------------------
# (c) A data- and model-parallel training step of a small MLP
#
# Each model device holds a column block of W1 (and of b1) and the matching row block
# of W2; b2 is replicated. Partial products are psum'd over 'model'; gradients are
# pmean'd over 'data'. The transpose of psum is psum, so gradients of the model-split
# weights come out 'model'-size times the true gradient; the step divides them back.

IN, HIDDEN, OUT, BATCH = 3, 8, 2, 4
LEARNING_RATE = 0.1
SPLIT = {"w1": 0, "b1": 0, "w2": 0, "b2": None}  # in/out axes of the params over 'model'


def train_step(mapper):
    def device_step(params, x, y):
        def loss_fn(params):
            hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
            out = lax.psum(hidden @ params["w2"], "model") + params["b2"]
            return jnp.mean((out - y) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        model_size = lax.psum(1, "model")
        grads = {k: g if SPLIT[k] is None else g / model_size for k, g in grads.items()}
        grads = lax.pmean(grads, "data")
        updated = jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)
        return updated, lax.pmean(loss, "data")

    def data_step(params, x, y):
        return mapper(device_step, "model", in_axes=(SPLIT, None, None), out_axes=(SPLIT, None))(
            params, x, y
        )

    return mapper(data_step, "data", in_axes=(None, 0, 0), out_axes=None)


def initial_params(rng, model: int) -> dict:
    def normal(*shape):
        return (0.5 * rng.standard_normal(shape)).astype(np.float32)

    return {
        "w1": normal(model, IN, HIDDEN // model),
        "b1": normal(model, HIDDEN // model),
        "w2": normal(model, HIDDEN // model, OUT),
        "b2": normal(OUT),
    }


def mlp_batch(rng, data: int) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((data, BATCH, IN)).astype(np.float32)
    y = rng.standard_normal((data, BATCH, OUT)).astype(np.float32)
    return x, y


MLP_MESHES = [pytest.param(2, 4, id="2x4"), pytest.param(4, 2, id="4x2")]


@pytest.mark.parametrize(("data", "model"), MLP_MESHES)
def test_mlp_training_steps_match_vmap(data, model, rng):
    step, oracle = train_step(pmapc.pmap), train_step(vmap_mapper)
    params = expected_params = initial_params(rng, model)
    x, y = mlp_batch(rng, data)
    for _ in range(3):
        params, loss = jax.tree_util.tree_map(np.asarray, step(params, x, y))
        expected_params, expected_loss = oracle(expected_params, x, y)
        assert_tree_equal(params, expected_params)
        assert_tree_equal(loss, expected_loss)


def unsplit(params: dict) -> dict:
    """The MLP's whole parameters from the per-model-device blocks."""
    return {
        "w1": np.concatenate(list(params["w1"]), axis=1),
        "b1": params["b1"].reshape(-1),
        "w2": params["w2"].reshape(-1, params["w2"].shape[-1]),
        "b2": params["b2"],
    }


@pytest.mark.parametrize(("data", "model"), MLP_MESHES)
def test_mlp_training_step_equals_the_unsplit_model(data, model, rng):
    params = initial_params(rng, model)
    x, y = mlp_batch(rng, data)
    updated, loss = jax.tree_util.tree_map(np.asarray, train_step(pmapc.pmap)(params, x, y))

    def loss_fn(whole):
        out = jax.nn.relu(x @ whole["w1"] + whole["b1"]) @ whole["w2"] + whole["b2"]
        return jnp.mean((out - y) ** 2)

    whole = unsplit(params)
    expected_loss, grads = jax.value_and_grad(loss_fn)(whole)
    expected = jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, whole, grads)
    assert_tree_equal(unsplit(updated), expected)
    assert_tree_equal(loss, expected_loss)


# ----------------------------------------------------------------------------
# (d) A ring all-reduce: n - 1 ppermute steps around the ring, in a fori_loop


def ring_all_reduce(x, axes, n: int):
    ring = [(j, (j + 1) % n) for j in range(n)]

    def step(_, carry):
        passing, total = carry
        passing = lax.ppermute(passing, axes, ring)
        return passing, total + passing

    return lax.fori_loop(0, n - 1, step, (x, x))[1]


def test_ring_all_reduce_over_eight_devices(rng):
    x = small_ints(rng, (8, 3))
    total = check_against_vmap(lambda mapper: mapper(lambda v: ring_all_reduce(v, "i", 8), "i"), x)
    assert_tree_equal(total, np.broadcast_to(x.sum(axis=0), x.shape))


@pytest.mark.parametrize(("data", "model"), MLP_MESHES)
def test_ring_all_reduce_over_the_inner_axis(data, model, rng):
    x = small_ints(rng, (data, model, 3))
    body = functools.partial(ring_all_reduce, axes="model", n=model)
    total = check_against_vmap(lambda mapper: nest(mapper, body, ("data", "model")), x)
    assert_tree_equal(total, np.broadcast_to(x.sum(axis=1, keepdims=True), x.shape))


@pytest.mark.parametrize("axes", [("data", "model"), ("model", "data")], ids=str)
def test_ring_all_reduce_over_both_axes_equals_the_total(axes, rng):
    # vmap cannot ppermute over a tuple of axes: numpy gives the expected total.
    x = small_ints(rng, (2, 4, 3))
    body = functools.partial(ring_all_reduce, axes=axes, n=8)
    total = np.asarray(nest(pmapc.pmap, body, ("data", "model"))(x))
    assert_tree_equal(total, np.broadcast_to(x.sum(axis=(0, 1)), x.shape))

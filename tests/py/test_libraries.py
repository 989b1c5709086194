"""Flax (linen and NNX) and Optax training steps in nested maps, checked against nested vmap.

A data x model step as people write it with nested `pmap`: a small MLP whose hidden
layer is split over the inner 'model' axis (each model device holds a column slice
of W1 and b1 and the matching row slice of W2; the partial products are psum'd over
'model'), a loss, `jax.grad`, gradients pmean'd over 'data', and an Optax optimizer.
Parameters and optimizer states carry both mesh axes in front, replicated over
'data', as `pmap` users stack them. The oracle is the same program with nested named
`jax.vmap` (oracle.py); the linen step is also checked against the unsplit MLP
trained on the whole batch. Needs the `libs` extra (`pip install -e '.[test,libs]'`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from support.oracle import assert_tree_equal, check_against_vmap, vmap_mapper

import pmapc

nn = pytest.importorskip("flax.linen")
nnx = pytest.importorskip("flax.nnx")
optax = pytest.importorskip("optax")

DATA, MODEL = 2, 4  # the mesh: 'data' outermost
IN, HIDDEN, OUT, BATCH = 3, 8, 2, 4  # BATCH examples per data device
STEPS = 3
RTOL, ATOL = 1e-5, 1e-6


def data_by_model(mapper, body, *, data_in_axes, model_in_axes):
    """`body` on each device of the 'data' x 'model' mesh; every result has both axes in front."""

    def per_data_device(*args):
        return mapper(body, "model", in_axes=model_in_axes)(*args)

    return mapper(per_data_device, "data", in_axes=data_in_axes)


def undo_model_psum_transpose(grads):
    """The true gradients of the parameters split over 'model'.

    The loss is the same on every model device, and the transpose of psum is psum:
    a split parameter's gradient comes out 'model'-size times the true one. The
    output bias (top-level `bias`) is replicated and its gradient is already right.
    """
    model_size = lax.psum(1, "model")

    def true_gradient(path, grad):
        return grad if path[0].key == "bias" else grad / model_size

    return jax.tree_util.tree_map_with_path(true_gradient, grads)


def batch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets, shape (DATA, BATCH, features): one slice of the batch per data row."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((DATA, BATCH, IN)).astype(np.float32)
    y = rng.standard_normal((DATA, BATCH, OUT)).astype(np.float32)
    return x, y


def model_keys(seed: int) -> jax.Array:
    """One initialization key per model device (the data rows share them: replicated)."""
    return jax.random.split(jax.random.key(seed), MODEL)


def train_both_ways(build_init, build_step, keys, x, y) -> list[float]:
    """Initialize and run STEPS steps with `pmapc.pmap` and with nested vmap, comparing the
    state and the loss after each, then one more step in each of pmapc's forms
    (`check_against_vmap`); pmapc's loss after each of the STEPS steps."""
    state = jax.tree_util.tree_map(np.asarray, build_init(pmapc.pmap)(keys, x))
    expected_state = build_init(vmap_mapper)(keys, x)
    assert_tree_equal(state, expected_state, rtol=RTOL, atol=ATOL)
    step, oracle_step = build_step(pmapc.pmap), build_step(vmap_mapper)
    losses = []
    for _ in range(STEPS):
        state, loss = jax.tree_util.tree_map(np.asarray, step(state, x, y))
        expected_state, expected_loss = oracle_step(expected_state, x, y)
        assert_tree_equal((state, loss), (expected_state, expected_loss), rtol=RTOL, atol=ATOL)
        losses.append(float(loss[0, 0]))
    check_against_vmap(build_step, state, x, y, rtol=RTOL, atol=ATOL)
    return losses


# ----------------------------------------------------------------------------
# Flax linen, SGD with momentum


class LinenShardedMLP(nn.Module):
    """This model device's part of the MLP: `hidden` of its hidden units."""

    hidden: int

    @nn.compact
    def __call__(self, x):
        hidden = nn.relu(nn.Dense(self.hidden, name="up")(x))  # column slice of W1, b1
        partial = nn.Dense(OUT, use_bias=False, name="down")(hidden)  # row slice of W2
        bias = self.param("bias", nn.initializers.zeros_init(), (OUT,))
        return lax.psum(partial, "model") + bias


class LinenMLP(nn.Module):
    """The same MLP unsplit, on one device: the independent oracle."""

    @nn.compact
    def __call__(self, x):
        hidden = nn.relu(nn.Dense(HIDDEN, name="up")(x))
        bias = self.param("bias", nn.initializers.zeros_init(), (OUT,))
        return nn.Dense(OUT, use_bias=False, name="down")(hidden) + bias


LINEN_MODEL = LinenShardedMLP(HIDDEN // MODEL)
LINEN_OPTIMIZER = optax.sgd(0.1, momentum=0.9)


def mse(out, y):
    return jnp.mean((out - y) ** 2)


def linen_init(mapper):
    def init(key, x):
        params = LINEN_MODEL.init(key, x)["params"]
        return params, LINEN_OPTIMIZER.init(params)

    return data_by_model(mapper, init, data_in_axes=(None, 0), model_in_axes=(0, None))


def linen_step(mapper):
    def step(state, x, y):
        params, opt_state = state

        def loss_fn(params):
            return mse(LINEN_MODEL.apply({"params": params}, x), y)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        grads = lax.pmean(undo_model_psum_transpose(grads), "data")
        updates, opt_state = LINEN_OPTIMIZER.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), lax.pmean(loss, "data")

    return data_by_model(mapper, step, data_in_axes=0, model_in_axes=(0, None, None))


def test_linen_data_by_model_training_matches_vmap():
    x, y = batch(0)
    losses = train_both_ways(linen_init, linen_step, model_keys(0), x, y)
    assert losses[-1] < losses[0], f"the loss did not go down: {losses}"


def unsplit(params, row: int) -> dict:
    """LinenMLP's parameters from the sharded parameters that data row `row` holds."""
    up, down = params["up"], params["down"]
    return {
        "up": {
            "kernel": np.concatenate(list(up["kernel"][row]), axis=1),
            "bias": up["bias"][row].reshape(-1),
        },
        "down": {"kernel": down["kernel"][row].reshape(HIDDEN, OUT)},
        "bias": params["bias"][row, 0],
    }


def test_linen_data_by_model_training_equals_the_unsplit_model():
    x, y = batch(1)
    all_x, all_y = x.reshape(-1, IN), y.reshape(-1, OUT)

    def whole_loss(params):
        return mse(LinenMLP().apply({"params": params}, all_x), all_y)

    state = jax.tree_util.tree_map(np.asarray, linen_init(pmapc.pmap)(model_keys(1), x))
    whole = unsplit(state[0], row=0)
    whole_state = LINEN_OPTIMIZER.init(whole)
    step = linen_step(pmapc.pmap)
    for _ in range(STEPS):
        state, loss = jax.tree_util.tree_map(np.asarray, step(state, x, y))
        expected_loss, grads = jax.value_and_grad(whole_loss)(whole)
        updates, whole_state = LINEN_OPTIMIZER.update(grads, whole_state, whole)
        whole = optax.apply_updates(whole, updates)
        assert_tree_equal(loss, np.full((DATA, MODEL), expected_loss), rtol=RTOL, atol=ATOL)
        for row in range(DATA):
            assert_tree_equal(unsplit(state[0], row), whole, rtol=RTOL, atol=ATOL)


# ----------------------------------------------------------------------------
# Flax NNX, Adam through nnx.Optimizer; the state crosses the maps as nnx.split's pytree


class NnxShardedMLP(nnx.Module):
    """This model device's part of the MLP, as LinenShardedMLP."""

    def __init__(self, hidden: int, *, rngs: nnx.Rngs):
        self.up = nnx.Linear(IN, hidden, rngs=rngs)
        self.down = nnx.Linear(hidden, OUT, use_bias=False, rngs=rngs)
        self.bias = nnx.Param(jnp.zeros((OUT,)))

    def __call__(self, x):
        partial = self.down(nnx.relu(self.up(x)))
        return lax.psum(partial, "model") + self.bias[...]


def nnx_model_and_optimizer(key):
    model = NnxShardedMLP(HIDDEN // MODEL, rngs=nnx.Rngs(key))
    return model, nnx.Optimizer(model, optax.adam(0.05), wrt=nnx.Param)


NNX_GRAPH = nnx.split(nnx.eval_shape(lambda: nnx_model_and_optimizer(jax.random.key(0))))[0]


def nnx_init(mapper):
    def init(key, _x):  # x only gives the 'data' map its size, as in linen_init
        return nnx.split(nnx_model_and_optimizer(key))[1]

    return data_by_model(mapper, init, data_in_axes=(None, 0), model_in_axes=(0, None))


def nnx_step(mapper):
    def step(state, x, y):
        model, optimizer = nnx.merge(NNX_GRAPH, state)
        loss, grads = nnx.value_and_grad(lambda model: mse(model(x), y))(model)
        optimizer.update(model, lax.pmean(undo_model_psum_transpose(grads), "data"))
        return nnx.state((model, optimizer)), lax.pmean(loss, "data")

    return data_by_model(mapper, step, data_in_axes=0, model_in_axes=(0, None, None))


def test_nnx_data_by_model_training_matches_vmap():
    x, y = batch(2)
    losses = train_both_ways(nnx_init, nnx_step, model_keys(2), x, y)
    assert losses[-1] < losses[0], f"the loss did not go down: {losses}"

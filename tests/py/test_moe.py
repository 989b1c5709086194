"""examples/moe.py's mixture-of-experts layer (ragged_all_to_all dispatch and combine,
ragged_dot experts) against the dense computation on one device: every token times
its experts' weights, forward and gradient, under jit and folded onto fewer
devices."""

from __future__ import annotations

import itertools
import pathlib
import sys
from functools import partial

import jax
import numpy as np
import pytest

import pmapc

ROOT = pathlib.Path(__file__).resolve().parents[2]


sys.path.insert(0, str(ROOT / "benchmarks"))
from example_modules import load_example  # noqa: E402

moe = load_example("moe")


@partial(pmapc.pmap, axis_name="data", in_axes=(None, None, None, 0))
def layer(router, w1, w2, x):
    inner = pmapc.pmap(moe.moe_layer, axis_name="expert", in_axes=(None, 0, 0, 0))
    return inner(router, w1, w2, x)


def dense_outputs(router, w1, w2, x):
    flat = x.reshape(-1, moe.D_MODEL)
    return np.asarray(moe.dense_layer(router, w1, w2, flat)).reshape(x.shape)


def test_layer_agrees_with_the_dense_computation():
    router, w1, w2, x, _ = moe.initial(seed=1)
    got = layer(router, moe.by_device(w1), moe.by_device(w2), x)
    np.testing.assert_allclose(np.asarray(got), dense_outputs(router, w1, w2, x), atol=1e-5)


def check_step(step, seed: int) -> None:
    """One training step of `step` against the dense one: losses and updated weights."""
    router, w1, w2, x, y = moe.initial(seed)
    *updated, loss = step(router, moe.by_device(w1), moe.by_device(w2), x, y)
    flat = (x.reshape(-1, moe.D_MODEL), y.reshape(-1, moe.D_MODEL))
    *dense, dense_loss = moe.dense_step(router, w1, w2, *flat)
    np.testing.assert_allclose(float(loss), float(dense_loss), rtol=1e-5)
    want = (dense[0], moe.by_device(dense[1]), moe.by_device(dense[2]))
    for got, expected in zip(updated, want):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-5)


def test_training_step_agrees_with_the_dense_gradient():
    check_step(moe.train_step, seed=2)


def test_training_step_under_jit():
    check_step(jax.jit(moe.train_step), seed=3)


@pytest.mark.parametrize("count", [1, 2])
def test_training_step_folded(count):
    with pmapc.fold_onto(jax.devices()[:count]):
        check_step(moe.train_step, seed=4 + count)


def test_loss_falls():
    router, w1, w2, x, y = moe.initial(seed=0)
    params = (router, moe.by_device(w1), moe.by_device(w2))
    losses = []
    for _ in range(4):
        *params, loss = moe.train_step(*params, x, y)
        losses.append(float(loss))
    assert all(later < earlier for earlier, later in itertools.pairwise(losses)), losses

"""Data + model parallel training of a small MLP on a 2x4 mesh (8 virtual CPU devices).

Rows of the mesh ('data') hold different batches; columns ('model') hold
column blocks of the first weight matrix and row blocks of the second. Each
device computes its slice of the hidden layer, `psum` over 'model' adds the
partial outputs, and `psum` over 'data' adds the gradients of the batches.

    python examples/mlp_training.py
"""

from functools import partial

import numpy as np

import pmapc

pmapc.use_host_devices(8)  # before JAX starts: 8 virtual CPU devices

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

DATA, MODEL = 2, 4
BATCH, D_IN, HIDDEN, D_OUT = 16, 8, 32, 4
LEARNING_RATE = 0.05


def local_step(w1, w2, x, y):
    """One device: its weight blocks, its batch."""

    def loss_of(w1, w2):
        hidden = jnp.tanh(x @ w1)
        prediction = jax.lax.psum(hidden @ w2, "model")
        return jnp.mean((prediction - y) ** 2)

    loss, (g1, g2) = jax.value_and_grad(loss_of, argnums=(0, 1))(w1, w2)
    # The transpose of psum is psum: each model device's gradient comes out
    # MODEL times too large (JAX 0.4 semantics); divide it back.
    g1, g2 = jax.lax.psum((g1, g2), "data")
    scale = LEARNING_RATE / (DATA * MODEL)
    return w1 - scale * g1, w2 - scale * g2, jax.lax.pmean(loss, "data")


@partial(pmapc.pmap, axis_name="data", in_axes=(None, None, 0, 0))
def train_step(w1_blocks, w2_blocks, x, y):
    step = pmapc.pmap(
        local_step, axis_name="model", in_axes=(0, 0, None, None), out_axes=(0, 0, None)
    )
    return step(w1_blocks, w2_blocks, x, y)


def reference_step(w1, w2, x, y):
    """The same step on one device, whole matrices, whole batch."""

    def loss_of(w1, w2):
        return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)

    loss, (g1, g2) = jax.value_and_grad(loss_of, argnums=(0, 1))(w1, w2)
    return w1 - LEARNING_RATE * g1, w2 - LEARNING_RATE * g2, loss


def split_weights(w1, w2):
    """W1 column blocks and W2 row blocks, one per model device."""
    w1_blocks = w1.reshape(D_IN, MODEL, HIDDEN // MODEL).transpose(1, 0, 2)
    return w1_blocks, w2.reshape(MODEL, HIDDEN // MODEL, D_OUT)


def main() -> None:
    rng = np.random.default_rng(0)
    w1 = rng.normal(size=(D_IN, HIDDEN)).astype(np.float32) / np.sqrt(D_IN)
    w2 = rng.normal(size=(HIDDEN, D_OUT)).astype(np.float32) / np.sqrt(HIDDEN)
    x = rng.normal(size=(DATA * BATCH, D_IN)).astype(np.float32)
    y = np.sin(x[:, :D_OUT]).astype(np.float32)
    blocks = split_weights(w1, w2)
    whole = (w1, w2)
    for step in range(5):
        w1_blocks, w2_blocks, losses = train_step(
            *blocks, x.reshape(DATA, BATCH, D_IN), y.reshape(DATA, BATCH, D_OUT)
        )
        blocks = (w1_blocks[0], w2_blocks[0])  # every data row holds the same weights
        *whole, loss = reference_step(*whole, x, y)
        print(f"step {step}: loss {float(losses[0]):.6f} (one device: {float(loss):.6f})")
    agree = np.allclose(split_weights(*[np.asarray(w) for w in whole])[0], blocks[0], atol=1e-5)
    print("weights agree with single-device training:", agree)


if __name__ == "__main__":
    main()

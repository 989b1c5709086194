"""Mixture-of-experts training on a data x expert mesh (8 virtual CPU devices).

Rows of the mesh ('data') hold different batches; columns ('expert') hold the
experts, EXPERTS_PER_DEVICE each, and every device holds TOKENS tokens. One
training step of a top-k MoE layer with a residual connection:

    router    each token's TOP_K experts and their gates (softmax of the top logits)
    dispatch  each token, once per chosen expert, to the device holding that expert:
              one `jax.lax.ragged_all_to_all` over 'expert' (the slices' sizes are
              what the router chose; no capacity, no token dropped)
    experts   the received tokens grouped by local expert, each group through its
              expert's MLP with `jax.lax.ragged_dot` (a grouped matmul)
    combine   the results back to their tokens' devices (a second ragged_all_to_all)
              and summed with the gates
    update    SGD on the router (shared: its gradient averaged over every device)
              and on the experts (each shared by the devices of one column)

On CPU no JAX runs ragged_all_to_all (XLA:CPU has no ragged-all-to-all); pmapc
expands it into all_to_alls of padded slices. On GPU and TPU it is XLA's own op.
The script checks each step against the dense computation on one device: every
token times its experts' weights, no communication.

    python examples/moe.py
"""

from functools import partial

import numpy as np

import pmapc

pmapc.use_host_devices(8)  # before JAX starts: 8 virtual CPU devices

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

DATA, EXPERT_DEVICES = 2, 4
EXPERTS_PER_DEVICE = 2
EXPERTS = EXPERT_DEVICES * EXPERTS_PER_DEVICE
TOKENS, D_MODEL, HIDDEN, TOP_K = 16, 8, 16, 2
LEARNING_RATE = 0.5


def route(router, x):
    """Each token's TOP_K experts and their gates."""
    top_logits, experts = lax.top_k(x @ router, TOP_K)
    return experts, jax.nn.softmax(top_logits, axis=-1)


def exclusive_cumsum(sizes, axis=0):
    return jnp.cumsum(sizes, axis=axis) - sizes


def moe_layer(router, w1, w2, x):
    """One device: its tokens `x` [tokens, d_model], its experts' weights `w1`
    [experts per device, d_model, hidden] and `w2`; the layer's output for its tokens."""
    tokens, d_model = x.shape
    devices, per_device = lax.axis_size("expert"), w1.shape[0]
    experts, gates = route(router, x)
    chosen = experts.reshape(-1)  # [tokens * TOP_K]: one row per (token, choice)
    order = jnp.argsort(chosen, stable=True)  # rows sorted by expert: by device too
    rows = x[order // TOP_K]
    per_expert = jnp.bincount(chosen, length=devices * per_device)
    send_sizes = per_expert.reshape(devices, per_device).sum(axis=1)
    # Where each slice lands: after what the devices before this one send there.
    every = lax.all_gather(send_sizes, "expert")  # [source, target]
    me = lax.axis_index("expert")
    output_offsets = exclusive_cumsum(every, axis=0)[me]
    recv_sizes = every[:, me]
    input_offsets = exclusive_cumsum(send_sizes)
    exchange = (input_offsets, send_sizes, output_offsets, recv_sizes)

    capacity = tokens * TOP_K * devices  # every token of the column, at most
    received = lax.ragged_all_to_all(
        rows, jnp.zeros((capacity, d_model), x.dtype), *exchange, axis_name="expert"
    )
    padding = jnp.full((capacity,), devices * per_device, chosen.dtype)  # no device's
    which = lax.ragged_all_to_all(chosen[order], padding, *exchange, axis_name="expert")
    results = local_experts(w1, w2, received, which - me * per_device)

    # Back to the tokens' devices: each received slice to where its rows came from.
    returned_offsets = lax.all_gather(input_offsets, "expert")[:, me]
    back = lax.ragged_all_to_all(
        results,
        jnp.zeros_like(rows),
        exclusive_cumsum(recv_sizes),
        recv_sizes,
        returned_offsets,
        send_sizes,
        axis_name="expert",
    )
    per_choice = jnp.zeros_like(back).at[order].set(back).reshape(tokens, TOP_K, d_model)
    return jnp.sum(gates[..., None] * per_choice, axis=1)


def local_experts(w1, w2, rows, local):
    """Each row through the MLP of this device's expert `local[row]` (rows whose
    `local` is none of this device's, padding, give zeros): the rows grouped by
    expert, one `ragged_dot` per layer, then back in their order."""
    per_device = w1.shape[0]
    local = jnp.where((local >= 0) & (local < per_device), local, per_device)
    grouping = jnp.argsort(local, stable=True)
    group_sizes = jnp.bincount(local, length=per_device + 1)[:per_device]
    hidden = jax.nn.gelu(lax.ragged_dot(rows[grouping], w1, group_sizes))
    computed = lax.ragged_dot(hidden, w2, group_sizes)
    return jnp.zeros_like(computed).at[grouping].set(computed)


def local_step(router, w1, w2, x, y, layer=moe_layer):
    """One device's step. Its gradient for its experts holds the tokens of its column
    routed to them (ragged_all_to_all's transpose brings their cotangents back); the
    loss is the mean over every device's, so the gradients are averaged over them."""

    def local_loss(router, w1, w2):
        return jnp.mean((x + layer(router, w1, w2, x) - y) ** 2)

    loss, (g_router, g1, g2) = jax.value_and_grad(local_loss, argnums=(0, 1, 2))(router, w1, w2)
    devices = lax.axis_size("data") * lax.axis_size("expert")
    g_router = lax.psum(g_router, ("data", "expert")) / devices
    g1, g2 = lax.psum((g1, g2), "data")
    return (
        router - LEARNING_RATE * g_router,
        w1 - LEARNING_RATE * g1 / devices,
        w2 - LEARNING_RATE * g2 / devices,
        lax.pmean(loss, ("data", "expert")),
    )


def make_train_step(layer=moe_layer):
    """The training step on the mesh, of the MoE layer `layer` (a device's function)."""

    @partial(pmapc.pmap, axis_name="data", in_axes=(None, None, None, 0, 0), out_axes=(None,) * 4)
    def train_step(router, w1, w2, x, y):
        """router [D_MODEL, EXPERTS] (shared); w1, w2 [EXPERT_DEVICES, EXPERTS_PER_DEVICE,
        ...] (a column's experts per device); x, y [DATA, EXPERT_DEVICES, TOKENS, D_MODEL]."""
        step = pmapc.pmap(
            partial(local_step, layer=layer),
            axis_name="expert",
            in_axes=(None, 0, 0, 0, 0),
            out_axes=(None, 0, 0, None),
        )
        return step(router, w1, w2, x, y)

    return train_step


train_step = make_train_step()


# -- the dense computation: every token times its experts' weights, on one device ----


def dense_layer(router, w1, w2, x):
    """x [tokens, D_MODEL]; w1 [EXPERTS, D_MODEL, HIDDEN], w2 [EXPERTS, HIDDEN, D_MODEL]."""
    experts, gates = route(router, x)
    hidden = jax.nn.gelu(jnp.einsum("td,tkdh->tkh", x, w1[experts]))
    out = jnp.einsum("tkh,tkhd->tkd", hidden, w2[experts])
    return jnp.sum(gates[..., None] * out, axis=1)


def dense_step(router, w1, w2, x, y):
    def loss_of(router, w1, w2):
        return jnp.mean((x + dense_layer(router, w1, w2, x) - y) ** 2)

    loss, grads = jax.value_and_grad(loss_of, argnums=(0, 1, 2))(router, w1, w2)
    return (*(p - LEARNING_RATE * g for p, g in zip((router, w1, w2), grads)), loss)


def initial(seed: int = 0, tokens: int = TOKENS, d_model: int = D_MODEL, hidden: int = HIDDEN):
    """Weights, and a batch whose targets a small MoE can fit."""
    rng = np.random.default_rng(seed)
    router = rng.normal(size=(d_model, EXPERTS)).astype(np.float32)
    w1 = rng.normal(size=(EXPERTS, d_model, hidden)).astype(np.float32) / np.sqrt(d_model)
    w2 = rng.normal(size=(EXPERTS, hidden, d_model)).astype(np.float32) / np.sqrt(hidden)
    x = rng.normal(size=(DATA, EXPERT_DEVICES, tokens, d_model)).astype(np.float32)
    y = x + np.tanh(x[..., ::-1]).astype(np.float32)
    return router, w1, w2, x, y


def by_device(w):
    """[EXPERTS, ...] -> [EXPERT_DEVICES, EXPERTS_PER_DEVICE, ...]."""
    return w.reshape(EXPERT_DEVICES, EXPERTS_PER_DEVICE, *w.shape[1:])


def main() -> None:
    router, w1, w2, x, y = initial()
    sharded = (router, by_device(w1), by_device(w2))
    dense = (router, w1, w2)
    tokens = (x.reshape(-1, D_MODEL), y.reshape(-1, D_MODEL))
    for step in range(8):
        *sharded, loss = train_step(*sharded, x, y)
        *dense, dense_loss = dense_step(*dense, *tokens)
        print(f"step {step}: loss {float(loss):.6f} (dense, one device: {float(dense_loss):.6f})")
    agree = all(
        np.allclose(np.asarray(a), np.asarray(b), atol=1e-4)
        for a, b in zip(sharded, (dense[0], by_device(dense[1]), by_device(dense[2])))
    )
    print("weights agree with the dense computation:", agree)


if __name__ == "__main__":
    main()

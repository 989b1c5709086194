"""The benchmark programs: each as a nested `pmapc.pmap` and as the `jax.shard_map` equivalent.

Both versions of a workload run the same per-device body on the same
`data` x `model` mesh (device d*M + m at mesh position (d, m)). shard_map runs
with `check_vma=False`, which gives `psum` JAX 0.4's transpose (the gradient of
a psum is a psum), so both compute the same numbers. Each workload also states
the communication its semantics need (`minimum`), computed from its sizes.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import pmapc
from hlo_stats import cost

F32 = 4  # bytes


@dataclasses.dataclass
class Workload:
    """One program, written for pmapc and for shard_map, with what it must communicate."""

    name: str
    description: str
    mesh_shape: tuple[int, int]
    pmapc_fn: Callable  # a pmapc.pmap function
    pmapc_args: tuple
    shard_fn: Callable  # a jitted shard_map function
    shard_args: tuple
    shard_in_specs: tuple
    # (pmapc outputs, shard_map outputs) -> pairs of numpy arrays that must agree
    comparable: Callable[[object, object], list[tuple[np.ndarray, np.ndarray]]]
    minimum: list[tuple[str, float]]  # (what the semantics need, bytes per device per step)


def mesh_of(data: int, model: int, devices=None) -> Mesh:
    """The 2-D mesh pmapc uses: the first data*model devices (of `devices`, by default
    this process's), row-major."""
    listed = list(jax.devices() if devices is None else devices)[: data * model]
    return Mesh(np.array(listed).reshape(data, model), ("data", "model"))


def shard_map_jit(body: Callable, mesh: Mesh, in_specs, out_specs) -> Callable:
    return jax.jit(
        jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    )


def nested(body: Callable, inner_in_axes=0) -> Callable:
    """`body` under an inner pmapc map over 'model' inside an outer one over 'data'."""

    @partial(pmapc.pmap, axis_name="data")
    def outer(*args):
        return pmapc.pmap(body, axis_name="model", in_axes=inner_in_axes)(*args)

    return outer


# -- W1: data + model parallel MLP training step --------------------------------------

LEARNING_RATE = 0.01


def mlp_local_step(w1, w2, x, y):
    """One SGD step on this device's W1 column block and W2 row block."""

    def loss_fn(w1, w2):
        hidden = jnp.tanh(x @ w1)
        out = jax.lax.psum(hidden @ w2, "model")
        return jnp.mean((out - y) ** 2)

    loss, (g1, g2) = jax.value_and_grad(loss_fn, argnums=(0, 1))(w1, w2)
    g1, g2 = jax.lax.psum((g1, g2), "data")
    return w1 - LEARNING_RATE * g1, w2 - LEARNING_RATE * g2, jax.lax.pmean(loss, "data")


def mlp(data: int, model: int, batch=64, d_in=256, hidden=512, d_out=256, devices=None) -> Workload:
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((d_in, hidden), dtype=np.float32) / np.sqrt(d_in)
    w2 = rng.standard_normal((hidden, d_out), dtype=np.float32) / np.sqrt(hidden)
    x = rng.standard_normal((data * batch, d_in), dtype=np.float32)
    y = rng.standard_normal((data * batch, d_out), dtype=np.float32)
    specs = (P(None, "model"), P("model", None), P("data"), P("data"))
    activations = batch * d_out * F32
    gradients = (d_in * hidden + hidden * d_out) // model * F32 + F32  # + the loss
    return Workload(
        name=f"W1 mlp {data}x{model}",
        description=f"MLP SGD step, batch {batch}/data shard, {d_in}->{hidden}->{d_out}",
        mesh_shape=(data, model),
        pmapc_fn=nested(mlp_local_step, inner_in_axes=(0, 0, None, None)),
        pmapc_args=(
            *per_device_blocks(w1, w2, data, model),
            x.reshape(data, batch, d_in),
            y.reshape(data, batch, d_out),
        ),
        shard_fn=shard_map_jit(
            mlp_local_step,
            mesh_of(data, model, devices),
            specs,
            (P(None, "model"), P("model", None), P()),
        ),
        shard_args=(w1, w2, x, y),
        shard_in_specs=specs,
        comparable=partial(mlp_comparable, data, model),
        minimum=[
            ("psum over model of activations", cost("all-reduce", model, activations)),
            ("its transpose (grad of psum is psum)", cost("all-reduce", model, activations)),
            ("psum over data of gradients + loss", cost("all-reduce", data, gradients)),
        ],
    )


def per_device_blocks(w1, w2, data: int, model: int) -> tuple[np.ndarray, np.ndarray]:
    """pmap's layout: each device's W1 column block and W2 row block, [data, model, ...]."""
    (d_in, hidden), d_out = w1.shape, w2.shape[1]
    block = hidden // model
    w1_blocks = w1.reshape(d_in, model, block).transpose(1, 0, 2)
    w2_blocks = w2.reshape(model, block, d_out)
    return (
        np.broadcast_to(w1_blocks, (data, *w1_blocks.shape)).copy(),
        np.broadcast_to(w2_blocks, (data, *w2_blocks.shape)).copy(),
    )


def mlp_comparable(data: int, model: int, pm, sm) -> list[tuple[np.ndarray, np.ndarray]]:
    """pmapc's [data, model, ...] blocks reassembled next to shard_map's whole arrays."""
    (d_in, hidden), d_out = sm[0].shape, sm[1].shape[1]
    pm_w1 = np.asarray(pm[0]).transpose(0, 2, 1, 3).reshape(data, d_in, hidden)
    pm_w2 = np.asarray(pm[1]).reshape(data, hidden, d_out)
    return [
        (pm_w1, np.broadcast_to(sm[0], pm_w1.shape)),
        (pm_w2, np.broadcast_to(sm[1], pm_w2.shape)),
        (np.asarray(pm[2]), np.broadcast_to(sm[2], (data, model))),
    ]


# -- W2: un-shard heavy: the outer body reads a large stacked inner output ----------------


def produce(x):
    """The inner map's per-device result: as large as its input block."""
    return x * 2.0 + 1.0


def add_rows(stack):
    """The sum of a stack's rows, written as adds.

    Not `stack.sum(axis=0)`: XLA:CPU's reduce over a short leading axis takes
    about 0.6 s for 4M f32 here (adds: 10 ms) and would hide the communication.
    """
    return functools.reduce(operator.add, [stack[i] for i in range(stack.shape[0])])


@partial(pmapc.pmap, axis_name="data")
def stack_then_sum(row):
    return add_rows(pmapc.pmap(produce, axis_name="model")(row))


@partial(pmapc.pmap, axis_name="data")
def stack_then_scale(row):
    return pmapc.pmap(produce, axis_name="model")(row) * 0.5


def gathered_sum(block):  # block: [1, 1, n] -> [1, n]
    return add_rows(jax.lax.all_gather(produce(block[0, 0]), "model"))[None]


def scaled(block):
    return produce(block) * 0.5


def unshard(variant: str, data=2, model=4, per_device=1 << 20, devices=None) -> Workload:
    """'sum': the outer body sums the stack (needs it whole); 'scale': scales and returns it."""
    x = np.random.default_rng(1).standard_normal((data, model, per_device), dtype=np.float32)
    mesh, specs = mesh_of(data, model, devices), (P("data", "model"),)
    stacked = model * per_device * F32
    if variant == "sum":
        pmapc_fn, shard_fn = stack_then_sum, shard_map_jit(gathered_sum, mesh, specs, P("data"))
        minimum = [
            ("all-gather over model of the per-device array", cost("all-gather", model, stacked))
        ]
    else:
        pmapc_fn, shard_fn = stack_then_scale, shard_map_jit(scaled, mesh, specs, specs[0])
        minimum = [("none: the stack only leaves the program", 0.0)]
    return Workload(
        name=f"W2 unshard-{variant} {data}x{model}",
        description=f"inner map returns {per_device} f32/device; outer body {variant}s the stack",
        mesh_shape=(data, model),
        pmapc_fn=pmapc_fn,
        pmapc_args=(x,),
        shard_fn=shard_fn,
        shard_args=(x,),
        shard_in_specs=specs,
        comparable=lambda pm, sm: [(np.asarray(pm), np.asarray(sm))],
        minimum=minimum,
    )


# -- W3: latency bound: a loop of tiny psums, alternating axes ----------------------------


def alternating_psum_loop(data: int, model: int, trips: int) -> Callable:
    def body(x):
        def step(_, x):
            x = jax.lax.psum(x, "data") * (1.0 / data)
            return jax.lax.psum(x, "model") * (1.0 / model) + 1.0

        return jax.lax.fori_loop(0, trips, step, x)

    return body


def tiny_psums(x):
    return jax.lax.psum(jax.lax.psum(x, "data") * 0.5, "model")


def small_collectives(
    name: str, body: Callable, psums_per_axis: int, data=2, model=4, width=16, devices=None
) -> Workload:
    """A body of tiny psums on a [data, model, width] f32 array."""
    x = np.arange(data * model * width, dtype=np.float32).reshape(data, model, width) / 100
    specs = (P("data", "model"),)
    payload = width * F32
    return Workload(
        name=name,
        description=f"{2 * psums_per_axis} psums of {width} f32, alternating data/model",
        mesh_shape=(data, model),
        pmapc_fn=nested(body),
        pmapc_args=(x,),
        shard_fn=shard_map_jit(body, mesh_of(data, model, devices), specs, specs[0]),
        shard_args=(x,),
        shard_in_specs=specs,
        comparable=lambda pm, sm: [(np.asarray(pm), np.asarray(sm))],
        minimum=[
            (
                f"{psums_per_axis} psums over data",
                psums_per_axis * cost("all-reduce", data, payload),
            ),
            (
                f"{psums_per_axis} psums over model",
                psums_per_axis * cost("all-reduce", model, payload),
            ),
        ],
    )


def latency_loop(trips=100, data=2, model=4, devices=None) -> Workload:
    return small_collectives(
        f"W3 fori {2 * trips} psums {data}x{model}",
        alternating_psum_loop(data, model, trips),
        trips,
        data,
        model,
        devices=devices,
    )


def dispatch_step() -> Workload:
    return small_collectives("dispatch 2x4", tiny_psums, 1, width=8)


def standard(name: str) -> list[Workload]:
    """The workloads of one benchmark name (W1, W2, W3, dispatch)."""
    builders = {
        "W1": lambda: [mlp(2, 4), mlp(4, 2)],
        "W2": lambda: [unshard("sum"), unshard("scale")],
        "W3": lambda: [latency_loop()],
        "dispatch": lambda: [dispatch_step()],
    }
    return builders[name]()

"""A mixture-of-experts training step: ragged_all_to_all (pmapc) against the same layer
written with a capacity-padded all_to_all, the GShard-style workaround people write
where no JAX runs ragged_all_to_all (CPU).

    .venv/bin/python benchmarks/moe.py [--tokens 16,256] [--rounds 30] [--json OUT]

Programs, all examples/moe.py's training step on a data=2 x expert=4 mesh (two
experts per device, top-2 routing), interleaved in one process:

    ragged             pmapc, the layer of examples/moe.py: tokens dispatched and
                       combined by ragged_all_to_all (on CPU, pmapc's expanded form:
                       every slice padded to min(operand rows, output rows))
    padded pmapc       pmapc, the same layer with each device's tokens for each
                       device in a capacity-padded buffer and lax.all_to_all
    padded shard_map   jax.jit(jax.shard_map) of that padded layer: the peer

The capacity is every token's choices (tokens x top-k rows per device pair), so
no token is dropped and all three compute the same step (checked against each
other before timing). Reported: the median step time of each, the per-round
ratios against the peer, and the bytes each device sends per step by pmapc's
communication plan (`Lowered.plan()`).
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

from example_modules import load_example

moe = load_example("moe")  # sets up the 8 CPU devices before JAX starts

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import environment  # noqa: E402
import timing  # noqa: E402
import workloads  # noqa: E402


def padded_layer(router, w1, w2, x):
    """examples/moe.py's layer with a capacity-padded all_to_all: each device's rows for
    each device in a buffer of `capacity` rows (every row it could send there)."""
    tokens, d_model = x.shape
    devices, per_device = lax.axis_size("expert"), w1.shape[0]
    experts, gates = moe.route(router, x)
    chosen = experts.reshape(-1)
    capacity = chosen.shape[0]
    target = chosen // per_device
    onehot = jax.nn.one_hot(target, devices, dtype=jnp.int32)
    slot = jnp.take_along_axis(jnp.cumsum(onehot, axis=0) - onehot, target[:, None], axis=1)[:, 0]
    rows = x[jnp.arange(capacity) // moe.TOP_K]
    buffer = jnp.zeros((devices, capacity, d_model), x.dtype).at[target, slot].set(rows)
    ids = jnp.full((devices, capacity), devices * per_device, chosen.dtype)
    ids = ids.at[target, slot].set(chosen)
    received = lax.all_to_all(buffer, "expert", 0, 0, tiled=True)
    received_ids = lax.all_to_all(ids, "expert", 0, 0, tiled=True)
    me = lax.axis_index("expert")
    results = moe.local_experts(
        w1, w2, received.reshape(-1, d_model), received_ids.reshape(-1) - me * per_device
    )
    back = lax.all_to_all(results.reshape(devices, capacity, d_model), "expert", 0, 0, tiled=True)
    per_choice = back[target, slot].reshape(tokens, moe.TOP_K, d_model)
    return jnp.sum(gates[..., None] * per_choice, axis=1)


def shard_map_step():
    """The padded step as jax.jit(jax.shard_map) over (data, expert)."""
    mesh = workloads.mesh_of(moe.DATA, moe.EXPERT_DEVICES)
    mesh = jax.sharding.Mesh(mesh.devices, ("data", "expert"))

    def body(router, w1, w2, x, y):
        router, w1, w2, loss = moe.local_step(router, w1[0], w2[0], x[0, 0], y[0, 0], padded_layer)
        return router, w1[None], w2[None], loss

    experts, tokens = P("expert"), P("data", "expert")
    return workloads.shard_map_jit(
        body, mesh, (P(), experts, experts, tokens, tokens), (P(), experts, experts, P())
    )


def bytes_sent(step, args) -> float:
    """Bytes a device sends per step, by the communication plan."""
    return pmapc_lower(step, args).plan().totals()["sent"]


def pmapc_lower(step, args):
    import pmapc

    return pmapc.lower(step, *args)


def measure(tokens: int, rounds: int) -> dict:
    router, w1, w2, x, y = moe.initial(seed=0, tokens=tokens, d_model=32, hidden=64)
    args = (router, moe.by_device(w1), moe.by_device(w2), x, y)
    programs = {
        "ragged": moe.train_step,
        "padded pmapc": moe.make_train_step(padded_layer),
        "padded shard_map": shard_map_step(),
    }
    results = {name: step(*args) for name, step in programs.items()}
    for result in results.values():  # the same step, so the same numbers
        for got, want in zip(result, results["padded shard_map"]):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-5)
    calls = {name: (step, args) for name, step in programs.items()}
    timed = timing.interleave(calls, warmup=3, rounds=rounds)
    summary = timed.summary("padded shard_map")
    summary["ragged"]["vs_padded_pmapc"] = statistics.median(timed.ratios("ragged", "padded pmapc"))
    for name in ("ragged", "padded pmapc"):
        summary[name]["sent_bytes"] = bytes_sent(programs[name], args)
    return {"tokens": tokens, **summary}


def table(rows: list[dict]) -> str:
    lines = [
        "| tokens/device | ragged ms | padded pmapc ms | padded shard_map ms "
        "| ragged / shard_map | ragged / padded pmapc | bytes sent: ragged / padded |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ragged, padded, peer = row["ragged"], row["padded pmapc"], row["padded shard_map"]
        lines.append(
            f"| {row['tokens']} | {ragged['median_s'] * 1e3:.2f} | {padded['median_s'] * 1e3:.2f} "
            f"| {peer['median_s'] * 1e3:.2f} | {timing.ratio_cell(ragged)} "
            f"| {ragged['vs_padded_pmapc']:.2f} "
            f"| {ragged['sent_bytes'] / 1024:.1f} / {padded['sent_bytes'] / 1024:.1f} KiB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="16,256", help="tokens per device, comma-separated")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)
    rows = [measure(int(t), args.rounds) for t in args.tokens.split(",")]
    print(table(rows))
    if args.json:
        settings = {"tokens": args.tokens, "rounds": args.rounds}
        environment.write_results(args.json, settings, rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Folded nests against nested `jax.vmap` of the same program on the same devices.

    .venv/bin/python benchmarks/folded.py [--quick] [--counts 1,2]

Runs W1-W3 (benchmarks/workloads.py) folded onto 1 and 2 of 8 virtual CPU devices
(`pmapc.fold_onto`) and, as the peer, `jax.jit` of the same bodies under nested named
`jax.vmap` (the mapped axes as vmap axes), whose inputs are split over the same
devices along the outermost axis, so that XLA partitions the vmapped program as the
fold lays the mesh out (the outer axis keeps its devices, the inner ones fold). Both
get their arguments placed so once, and both run inside one `pmapc.fold_onto` (as a
training loop would); every call waits for its result, in a new order each round
(benchmarks/timing.py). The table gives each median and the median of the
per-round ratios folded/vmap. Target: at most 1.10.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pmapc

pmapc.use_host_devices(8)  # before anything starts JAX's CPU backend

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import environment  # noqa: E402
import timing  # noqa: E402
import workloads  # noqa: E402

TARGET = 1.10  # folded / vmap, on every workload and count (benchmarks/tables.py)


def vmapped(body, inner_in_axes=0):
    """`body` under nested named vmaps over 'model' inside 'data' (workloads.nested's)."""
    inner = jax.vmap(body, in_axes=inner_in_axes, axis_name="model")
    return jax.jit(jax.vmap(inner, axis_name="data"))


def peers() -> dict[str, tuple[workloads.Workload, object]]:
    """Each workload, and its program under nested vmap."""
    w1 = [workloads.mlp(2, 4), workloads.mlp(4, 2)]
    w2 = [workloads.unshard("sum"), workloads.unshard("scale")]
    w3 = workloads.latency_loop()

    def stack_then_sum(row):
        return workloads.add_rows(jax.vmap(workloads.produce, axis_name="model")(row))

    def stack_then_scale(row):
        return jax.vmap(workloads.produce, axis_name="model")(row) * 0.5

    mlp = vmapped(workloads.mlp_local_step, inner_in_axes=(0, 0, None, None))
    return {
        w1[0].name: (w1[0], mlp),
        w1[1].name: (w1[1], mlp),
        w2[0].name: (w2[0], jax.jit(jax.vmap(stack_then_sum, axis_name="data"))),
        w2[1].name: (w2[1], jax.jit(jax.vmap(stack_then_scale, axis_name="data"))),
        w3.name: (w3, vmapped(workloads.alternating_psum_loop(2, 4, 100))),
    }


def placed(args, count: int):
    """`args` split along their leading (outermost mapped) axis over the first `count`
    devices."""
    mesh = Mesh(np.array(jax.devices()[:count]), ("devices",))
    return tuple(jax.device_put(a, NamedSharding(mesh, P("devices"))) for a in args)


def measure(counts: list[int], warmup: int, rounds: int) -> list[dict]:
    """Each workload folded onto each count of devices against nested vmap, interleaved."""
    rows = []
    for name, (workload, peer) in peers().items():
        for count in counts:
            arguments = placed(workload.pmapc_args, count)
            ours = workload.pmapc_fn
            # both run inside: a training loop folds as a whole, not call by call
            with pmapc.fold_onto(jax.devices()[:count]):
                expected = jax.tree_util.tree_leaves(peer(*arguments))
                got = jax.tree_util.tree_leaves(ours(*arguments))
                for a, b in zip(got, expected, strict=True):
                    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
                result = timing.interleave(
                    {"folded": (ours, arguments), "vmap": (peer, arguments)}, warmup, rounds
                )
            summary = result.summary("vmap")
            rows.append({"workload": name, "devices": count, **summary})
            print(f"  {name} on {count}: done", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict]) -> str:
    lines = [
        "| workload | devices | folded ms | vmap ms | folded / vmap |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        folded, vmap = row["folded"], row["vmap"]
        lines.append(
            f"| {row['workload']} | {row['devices']} | {folded['median_s'] * 1e3:.2f} "
            f"| {vmap['median_s'] * 1e3:.2f} | {timing.ratio_cell(folded)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 warm-up and 7 timed rounds")
    parser.add_argument("--counts", default="1,2", help="device counts to fold onto")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    warmup, rounds = (3, 7) if args.quick else (7, 41)
    rows = measure([int(c) for c in args.counts.split(",")], warmup, rounds)
    print(f"Folded pmapc against nested jax.vmap, medians of {rounds} rounds")
    print(table(rows))
    if args.json:
        environment.write_results(args.json, {"warmup": warmup, "rounds": rounds}, rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""An un-blocked loop of eager calls on XLA:CPU: pmapc against `jax.jit(shard_map)`.

    .venv/bin/python benchmarks/unblocked.py [--calls 200] [--timeout 120]

Each runs the same 2x4 step (a psum over 'model' then over 'data' of 8 f32)
`--calls` times without waiting, then waits for the last result, in a child
process of its own (XLA:CPU's in-process collectives can abort the process when
dozens of collective programs queue). pmapc bounds the runs in flight on CPU
(compiler/runtime.py: InFlight), so its loop finishes; the table says how long
each took, or how it ended.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

SETUP = """
import time
import numpy as np
import pmapc
pmapc.use_host_devices(8)
import jax
from jax import lax
from jax.sharding import PartitionSpec as P
x = np.ones((2, 4, 8), np.float32)
"""

PMAPC = """
def outer(v):
    inner = pmapc.pmap(lambda y: lax.psum(y, "model"), axis_name="model")
    return lax.psum(inner(v), "data")
step = pmapc.pmap(outer, axis_name="data")
"""

SHARD_MAP = """
mesh = jax.sharding.Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
x = jax.device_put(x, jax.sharding.NamedSharding(mesh, P("data", "model")))
def body(v):
    return lax.psum(lax.psum(v, "model"), "data")
step = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("data", "model"),
                             out_specs=P("data", "model")))
"""

LOOP = """
jax.block_until_ready(step(x))  # compile
start = time.perf_counter()
results = [step(x) for _ in range({calls})]
jax.block_until_ready(results[-1])
print(time.perf_counter() - start)
"""


def run(program: str, calls: int, timeout: float) -> str:
    code = SETUP + program + LOOP.format(calls=calls)
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return f"hung: no result after {timeout:.0f} s"
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if "rendezvous" in line]
        last = (lines or done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"aborted after {time.perf_counter() - start:.0f} s: {last.strip()[:160]}"
    return f"{float(done.stdout.strip().splitlines()[-1]):.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    print(f"{args.calls} un-blocked calls of a 2x4 step on 8 CPU devices")
    for name, program in (("pmapc.pmap", PMAPC), ("jax.jit(shard_map)", SHARD_MAP)):
        print(f"  {name:<20} {run(program, args.calls, args.timeout)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

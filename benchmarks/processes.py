"""What processes agreeing on a program costs (compiler/agreement.py): the first call
of a new program across processes, and warm calls.

    .venv/bin/python benchmarks/processes.py [--processes 2,4] [--programs 10] [--json OUT]

For each count N of `--processes`, starts N processes of 8 / N virtual CPU devices each on one
`jax.distributed` run (gloo, 127.0.0.1). Each calls `--programs` new nests (a
data x model nest over every device, a chain of k psums over both axes for the
k-th, so that no two share a program) once, then 20 more times. Per program,
process 0 reports the first call's seconds until its result is ready, the
seconds of the agreement inside it (`agreement.STATS`: the digest of the
program and the round trip through JAX's key-value store, waiting for the
slowest process), and the median warm call; and how many agreements the warm
calls made (none: they do not ask again). The table gives the medians and the
agreement's share of the first call.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys

import environment

MARK = "PMAPC-BENCH "
WARM_CALLS = 20

WORKER = """
import json, statistics, sys, time
import numpy as np
import pmapc
process, count, programs, port = map(int, sys.argv[1:5])
pmapc.use_host_devices(8 // count)
import jax
from jax import lax
from pmapc.compiler import agreement
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=count, process_id=process)
outer = max(2, count)
inner = 8 // outer

def program(k):
    def body(y):
        for _ in range(k):
            y = lax.psum(y, ("data", "model")) * 0.5
        return y
    return pmapc.pmap(pmapc.pmap(body, axis_name="model"), axis_name="data")

x = np.ones((outer // count, inner, 16), np.float32)
found = []
for k in range(1, programs + 1):
    f = program(k)
    before = agreement.STATS.seconds
    started = time.perf_counter()
    jax.block_until_ready(f(x))
    first = time.perf_counter() - started
    agreed = agreement.STATS.seconds - before
    count_before = agreement.STATS.agreements
    warm = []
    for _ in range(WARM_CALLS):
        started = time.perf_counter()
        jax.block_until_ready(f(x))
        warm.append(time.perf_counter() - started)
    found.append({
        "program": k, "first_s": first, "agreement_s": agreed,
        "warm_median_s": statistics.median(warm),
        "warm_agreements": agreement.STATS.agreements - count_before,
    })
if process == 0:
    sys.stdout.write("PMAPC-BENCH " + json.dumps(found) + "\\n")
    sys.stdout.flush()
""".replace("WARM_CALLS", str(WARM_CALLS))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure(processes: int, programs: int, timeout: float = 600) -> list[dict]:
    """Each program's figures, as process 0 measured them."""
    port = str(free_port())
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}
    env.pop("XLA_FLAGS", None)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(p), str(processes), str(programs), port],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        for p in range(processes)
    ]
    outputs = []
    try:
        for child in children:
            out, _ = child.communicate(timeout=timeout)
            outputs.append(out)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    lines = [line for line in outputs[0].splitlines() if MARK in line]
    if not lines or any(child.returncode != 0 for child in children):
        raise SystemExit(f"the workers failed: exit codes {[c.returncode for c in children]}")
    return json.loads(lines[-1].split(MARK, 1)[1])


def table(runs: list[dict]) -> str:
    """One row per process count: medians over its programs."""
    lines = [
        "| processes | new programs | first call ms | agreement ms | agreement / first "
        "call | warm call ms | agreements in warm calls |",
        "|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        rows = run["rows"]
        first = statistics.median(row["first_s"] for row in rows)
        agreed = statistics.median(row["agreement_s"] for row in rows)
        warm = statistics.median(row["warm_median_s"] for row in rows)
        share = statistics.median(row["agreement_s"] / row["first_s"] for row in rows)
        warm_agreements = sum(row["warm_agreements"] for row in rows)
        lines.append(
            f"| {run['processes']} | {len(rows)} | {first * 1e3:.1f} | {agreed * 1e3:.2f} | "
            f"{share:.3f} | {warm * 1e3:.2f} | {warm_agreements} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", default="2,4", help="process counts, comma-separated")
    parser.add_argument("--programs", type=int, default=10)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args(argv)
    counts = [int(count) for count in args.processes.split(",")]
    runs = [{"processes": n, "rows": measure(n, args.programs)} for n in counts]
    print(table(runs))
    if args.json:
        settings = {"processes": args.processes, "programs": args.programs}
        environment.write_results(args.json, settings, runs=runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
